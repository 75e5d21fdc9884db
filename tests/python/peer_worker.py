"""One Python peer process for the tests: `peer_worker.py MODE CONFIG RANK FOLDER [ARGS]`.

Modes:
  vector ROUNDS   joins with a numpy vector of seed RANK, mixes it ROUNDS times, and writes the
                  vector after each round to FOLDER/vector-RANK.npy (rounds+1 rows)
  model           joins with gossip's own model and runs the plan's rounds (interop)
  torch           a tiny torch model under DecentralizedOptimizer at learning rate 0; rank 0
                  also tries a second Peer of its rank (FOLDER/second-peer.txt: the refusal);
                  finish()'s dict to FOLDER/finish-RANK.json
  size N          joins with a vector of N values (to be refused by its neighbours)
  leave ROUND     as model, leaving the elastic run at ROUND (Peer(leave_at_round=ROUND))
"""
import os
import sys

import numpy as np

import gossip

mode, config, rank, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
out = os.path.join(folder, "run")
leave_at = int(sys.argv[5]) if mode == "leave" else None
peer = gossip.Peer(config, rank=rank, out=out, leave_at_round=leave_at)

if mode == "vector":
    rounds = int(sys.argv[5])
    x = np.random.default_rng(rank).standard_normal(1000).astype(np.float32)
    rows = [x.copy()]
    peer.join(x, rounds=rounds)
    for _ in range(rounds):
        peer.neighbor_average(x)
        rows.append(x.copy())
    np.save(os.path.join(folder, f"vector-{rank}.npy"), np.stack(rows))
    peer.report(loss=0.0, accuracy=0.5)
    peer.finish()
elif mode == "model":
    peer.join_model()
    while peer.rounds_done < peer._peer.planned_rounds:
        peer.step_round()
        if peer.eval_due():
            peer.report()
    print("summary", peer.finish())
elif mode == "leave":
    # gossip's own model, leaving at round leave_at as gossip peer --leave-at-round does
    peer.join_model()
    while peer.rounds_done < peer._peer.planned_rounds:
        peer.step_round()
        if peer.eval_due():
            peer.report()
        if peer.leave_due():
            break
    print("summary", peer.finish())
elif mode == "torch":
    import torch
    import gossip.torch
    torch.manual_seed(rank)
    model = torch.nn.Linear(5, 3)
    opt = gossip.torch.DecentralizedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                              model, peer, rounds=1)
    before = opt.flat.clone().numpy()
    np.save(os.path.join(folder, f"before-{rank}.npy"), before)
    loss = model(torch.ones(2, 5)).sum()
    loss.backward()
    opt.step()
    np.save(os.path.join(folder, f"after-{rank}.npy"), opt.flat.numpy())
    w, b = model.weight.detach().numpy().ravel(), model.bias.detach().numpy()
    np.save(os.path.join(folder, f"model-{rank}.npy"), np.concatenate([w, b]))
    if rank == 0:  # a second Peer of a rank that already runs here: refused by name
        try:
            gossip.Peer(config, rank=rank, out=out).join(np.zeros(18, dtype=np.float32))
            refusal = "joined"
        except ValueError as e:
            refusal = str(e)
        with open(os.path.join(folder, "second-peer.txt"), "w") as f:
            f.write(refusal)
    import json
    with open(os.path.join(folder, f"finish-{rank}.json"), "w") as f:
        json.dump(peer.finish(), f)  # no evaluate and no report(): no accuracy figure
elif mode == "size":
    x = np.zeros(int(sys.argv[5]), dtype=np.float32)
    try:
        peer.join(x)
        print("joined")
    except ValueError as e:
        print("refused:", e)
        sys.exit(3)
    peer.finish()
