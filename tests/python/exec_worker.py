"""A Python peer started by `gossip run --exec "python3 exec_worker.py MODE"` (Peer.from_env()),
for the checkpoint tests. It saves checkpoints when they are due, stops at --until-round and
continues under --resume.

Modes:
  model-exec            gossip's own model from the config, driven round by round
  torch-momentum-exec   a small torch MLP under DecentralizedOptimizer, SGD with momentum 0.9,
                        on synthetic data of seed RANK: 8 steps an epoch, 24 rounds
  torch-bn-adam-exec    the same with a BatchNorm layer, under Adam
  torch-overlap-exec    torch-momentum-exec with overlap=True (each round mixed beside the next
                        step and applied a step late)
"""
import sys

import gossip

mode = sys.argv[1]
peer = gossip.Peer.from_env()

if mode == "model-exec":
    peer.join_model()
    while peer.rounds_done < peer._peer.planned_rounds:
        peer.step_round()
        if peer.partition_stop_due():  # monitor.on_partition: stop, as gossip peer does
            peer.report()
            peer.save_checkpoint()
            break
        if peer.eval_due():
            peer.report()
        if peer.checkpoint_due():
            peer.save_checkpoint()
        if peer.stop_due():
            peer.stop()
            break
    peer.finish()
elif mode in ("torch-momentum-exec", "torch-bn-adam-exec", "torch-overlap-exec"):
    import torch
    import torch.nn.functional as F
    import gossip.torch
    torch.set_num_threads(1)
    torch.manual_seed(7)
    if mode in ("torch-momentum-exec", "torch-overlap-exec"):
        model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU(),
                                    torch.nn.Linear(12, 10))
        sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:  # BatchNorm statistics and counters, Adam's moments: all must come back on resume
        model = torch.nn.Sequential(torch.nn.Linear(16, 12, bias=False), torch.nn.BatchNorm1d(12),
                                    torch.nn.ReLU(), torch.nn.Linear(12, 10))
        sgd = torch.optim.Adam(model.parameters(), lr=0.01)
    opt = gossip.torch.DecentralizedOptimizer(sgd, model, peer, rounds=24,
                                              evaluate=lambda: 0.5,
                                              overlap=mode == "torch-overlap-exec")
    g = torch.Generator().manual_seed(peer.rank)
    x, y = torch.randn(128, 16, generator=g), torch.randint(0, 10, (128,), generator=g)
    for step in range(opt.steps, 24):
        batch = slice((step % 8) * 16, (step % 8) * 16 + 16)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        opt.step()
        if opt.stopped:
            break
        if (step + 1) % 4 == 0:
            peer.report(loss=loss.item(), accuracy=0.5, epoch=(step + 1) / 8)
    peer.finish()
else:
    sys.exit(f"exec_worker.py: unknown mode {mode}")
