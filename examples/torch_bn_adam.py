#!/usr/bin/env python3
"""A script as users write them: a small CNN with BatchNorm and dropout, trained with Adam, the
shard asked for first, a report every 100 steps (not at the last one), under
gossip.torch.DecentralizedOptimizer. BatchNorm's running statistics are mixed with the
parameters every round, and at the end gossip run evaluates the average model (parameters and
statistics) with this script's own evaluate().

    gossip run configs/torch-quickstart.yaml --exec "/usr/bin/python3 examples/torch_bn_adam.py" \\
        --out runs/bn-adam
    GOSSIP_LIMIT_TRAIN=4096 ...   # a shorter run on the first 4,096 training images
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import gossip
import gossip.torch


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


def images(path_images: str, path_labels: str):
    x, y = gossip.load_idx(path_images, path_labels)
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y)


def main() -> None:
    peer = gossip.Peer.from_env()
    shard = torch.tensor(peer.shard())  # first, before anything else of gossip's
    config = peer.config
    limit = int(os.environ.get("GOSSIP_LIMIT_TRAIN", "0"))
    if limit:
        shard = shard[shard < limit]
    torch.manual_seed(config["seed"])
    torch.set_num_threads(max(1, config["threads"]))
    x_all, y_all = images(config["train_images"], config["train_labels"])
    x, y = x_all[shard], y_all[shard]
    x_test, y_test = images(config["test_images"], config["test_labels"])
    model = Net()

    def evaluate():
        model.eval()
        with torch.no_grad():
            logits = torch.cat([model(x_test[i:i + 1000]) for i in range(0, len(x_test), 1000)])
        model.train()
        return (F.cross_entropy(logits, y_test).item(),
                (logits.argmax(1) == y_test).float().mean().item())

    batch = config["batch"]
    steps = math.ceil(len(x) / batch) * max(1, math.ceil(config["epochs"]))
    opt = gossip.torch.DecentralizedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-3),
                                              model, peer, period=1, rounds=steps,
                                              evaluate=evaluate)
    gen = torch.Generator().manual_seed(1000 + peer.rank)
    order = torch.cat([torch.randperm(len(x), generator=gen)
                       for _ in range(max(1, math.ceil(config["epochs"])))])
    for step in range(steps):
        idx = order[(step * batch) % len(order):][:batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        if opt.stopped:
            break
        if (step + 1) % 100 == 0:
            _, acc = evaluate()
            peer.report(loss=loss.item(), accuracy=acc, epoch=(step + 1) * batch / len(x))
    _, acc = evaluate()
    summary = peer.finish()
    print(f"rank {peer.rank}: own model's test accuracy {acc:.4f} after {summary.get('rounds')} "
          "rounds", file=sys.stderr)


if __name__ == "__main__":
    main()
