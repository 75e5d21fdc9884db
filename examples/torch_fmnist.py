#!/usr/bin/env python3
"""A PyTorch CNN on Fashion-MNIST, trained by decentralized gossip SGD.

Each rank trains on its own shard (the same shard gossip peer would draw) and, after every
local step, averages its parameters with its graph neighbours through gossip's C++ engine
(TLS, membership, partition alerts). Start it with

    gossip run configs/torch-quickstart.yaml --out runs/torch     # 8 ranks on this machine
    mpirun -np 8 env GOSSIP_CONFIG=configs/torch-quickstart.yaml python3 examples/torch_fmnist.py

or alone, without gossip, for a reference: python3 examples/torch_fmnist.py --single CONFIG.
The reference takes, each step, the batch all the peers take together in one round (train.batch
times the topology's peers: what synchronous SGD over the same peers, e.g. an all-reduce, does),
over the whole training set, with the same learning rate and schedule; add --local-batch to take
train.batch alone instead.

Every train.checkpoint_every rounds the wrapper saves the model, the SGD momentum and the gossip
state in each peer's checkpoint; `gossip run --resume runs/torch` (after Ctrl-C, a crash or
--until-round) restores them, and the loop below skips the batches already taken. At the end
peer.finish() waits for the launcher's average of every peer's final model, and one process
evaluates it with the same evaluate() (gossip run's "average model" line).

Where CUDA is, each rank trains on a GPU (gossip.torch.device_for: LOCAL_RANK or the rank
modulo the GPUs) with its shard and the test set held on the device; GOSSIP_OVERLAP=1 mixes
each round beside the next step (DecentralizedOptimizer(overlap=True)).
"""
import os
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import gossip
import gossip.torch


class Net(nn.Module):
    """conv 5x5x16, max pool, conv 5x5x32, max pool, linear 128, linear 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def tensors(images, labels, limit=0):
    x, y = gossip.load_idx(images, labels)
    if limit:
        x, y = x[:limit], y[:limit]
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y)


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(x[i:i + 1000]) for i in range(0, len(x), 1000)])
    model.train()
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


def train(config, shard, peer=None):
    torch.manual_seed(config["seed"])  # every rank starts from the same model
    torch.set_num_threads(max(1, config["threads"]))
    device = gossip.torch.device_for(peer.rank if peer is not None else 0)
    model = Net().to(device)
    x_test, y_test = (t.to(device) for t in tensors(config["test_images"], config["test_labels"]))
    batch, epochs = config["batch"], config["epochs"]
    steps_per_epoch = math.ceil(len(shard) / batch) if shard is not None else 0
    total = math.ceil(epochs * steps_per_epoch - 1e-9)  # steps, as gossip plans its rounds
    rounds = math.ceil(total / config["period"])
    sgd = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                          weight_decay=config["weight_decay"])
    opt = sgd
    if peer is not None:
        opt = gossip.torch.DecentralizedOptimizer(
            sgd, model, peer, period=config["period"], rounds=rounds,
            evaluate=lambda: evaluate(model, x_test, y_test),
            overlap=os.environ.get("GOSSIP_OVERLAP") == "1")
    start = opt.steps if peer is not None else 0  # > 0 when resumed from a checkpoint
    x_all, y_all = tensors(config["train_images"], config["train_labels"], config["limit_train"])
    x, y = x_all[shard].to(device), y_all[shard].to(device)
    del x_all, y_all
    gen = torch.Generator().manual_seed(config["seed"] * 1000 + (peer.rank if peer else 0))
    evals = max(1, config["evals_per_epoch"])
    t0 = time.time()
    for epoch in range(math.ceil(epochs)):
        order = torch.randperm(len(x), generator=gen)  # drawn for skipped epochs too
        losses = []
        for k, i in enumerate(range(0, len(x), batch)):
            step = epoch * steps_per_epoch + k
            if step >= total:  # a fractional last epoch ends early
                break
            if step < start:
                continue
            idx = order[i:i + batch].to(device)
            for group in sgd.param_groups:  # optimizer.schedule, as gossip's own trainer has it
                group["lr"] = gossip.learning_rate(config, epoch + k / steps_per_epoch)
            opt.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            if peer is not None and opt.stopped:  # --until-round or a partition stop
                return model, None
            losses.append(loss.detach())  # no wait for the device every step
            last = k == steps_per_epoch - 1 or step == total - 1
            if last or (k + 1) % max(1, steps_per_epoch // evals) == 0 and \
                    (k + 1) // max(1, steps_per_epoch // evals) < evals:
                test_loss, acc = evaluate(model, x_test, y_test)
                mean_loss = torch.stack(losses).mean().item()
                print(f"epoch {epoch + (k + 1) / steps_per_epoch:.2f}: train loss "
                      f"{mean_loss:.4f}, test accuracy {acc:.4f} "
                      f"({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
                if peer is not None:
                    peer.report(loss=mean_loss, accuracy=acc,
                                epoch=epoch + (k + 1) / steps_per_epoch)
                losses = []
    return model, evaluate(model, x_test, y_test)[1]


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--single":
        # The reference: the same script, one process, the whole training set, no gossip.
        config = gossip.peer_config(sys.argv[2], rank=0)
        if sys.argv[3:] == ["--local-batch"]:
            pass
        elif sys.argv[3:]:
            sys.exit(f"usage: {sys.argv[0]} --single CONFIG [--local-batch]")
        else:
            config["batch"] *= config["size"]
        n = config["limit_train"] or 60000
        print(f"single process: batch {config['batch']}, learning rate {config['lr']} "
              f"({config['schedule']}), {config['epochs']} epochs", file=sys.stderr)
        _, acc = train(config, torch.arange(n))
        print(f"single process: test accuracy {acc:.4f}")
        return
    peer = gossip.Peer.from_env()
    _, acc = train(peer.config, torch.tensor(peer.shard()), peer)
    summary = peer.finish()  # under gossip run: one process evaluates the average model here
    if acc is None:
        print(f"rank {peer.rank}: stopped after round {peer.rounds_done}", file=sys.stderr)
        return
    print(f"rank {peer.rank}: test accuracy {acc:.4f} after {summary['rounds']} rounds",
          file=sys.stderr)
    if "average_model" in summary:
        print(f"rank {peer.rank}: the average model's test accuracy "
              f"{summary['average_model']['accuracy']:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
