#!/usr/bin/env python3
"""A DistributedDataParallel script as people write them, and the same script gossiping.

    torchrun --standalone --nproc_per_node 8 examples/torch_ddp.py                # DDP (gloo)
    torchrun --standalone --nproc_per_node 8 examples/torch_ddp.py CONFIG.yaml    # gossip

(Debian's torch 1.13 also needs --redirects 1 --tee 2 --log_dir DIR.) Given a gossip run config
(its topology, algorithm, TLS: docs/python.md, "Under torchrun"), the script swaps two things and
nothing else: `gossip.Peer.from_env()` for `init_process_group`, and
`gossip.torch.GossipDataParallel(model, peer, optimizer=opt)` for `DistributedDataParallel(model)`
(and calls `peer.finish()` at the end). The model, data, sharding, optimizer, schedule and loop
are the same: the example CNN of torch_fmnist.py on Fashion-MNIST, each rank on every
WORLD_SIZE-th training image, SGD with momentum 0.9 at 0.05 on a cosine schedule to 0, batch 32
a rank, EPOCHS epochs (default 1).
"""
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import gossip
import gossip.torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_fmnist import Net, evaluate  # noqa: E402  (the same model and evaluation)

DATA = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
BATCH, LR, EPOCHS = 32, 0.05, float(os.environ.get("EPOCHS", "1"))


def load(kind):
    prefix = "train" if kind == "train" else "t10k"
    x, y = gossip.load_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz",
                           f"{DATA}/{prefix}-labels-idx1-ubyte.gz")
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y)


def main():
    config = next((a for a in sys.argv[1:] if a.endswith((".yaml", ".yml"))), None)
    torch.set_num_threads(1)
    torch.manual_seed(1)  # every rank starts from the same model
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    if config:
        peer = gossip.Peer.from_env()
        rank, world = peer.rank, peer.size
    else:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    x_all, y_all = load("train")
    x, y = x_all[rank::world], y_all[rank::world]
    x_test, y_test = load("test")
    steps_per_epoch = math.ceil(len(x) / BATCH)
    total = math.ceil(EPOCHS * steps_per_epoch)
    if config:
        net = gossip.torch.GossipDataParallel(model, peer, optimizer=opt, rounds=total)
    else:
        net = DistributedDataParallel(model)
    gen = torch.Generator().manual_seed(1000 + rank)
    t0 = time.time()
    step = 0
    while step < total:
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), BATCH):
            if step >= total:
                break
            for group in opt.param_groups:
                group["lr"] = LR * 0.5 * (1 + math.cos(math.pi * step / total))
            idx = order[i:i + BATCH]
            opt.zero_grad()
            F.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
            step += 1
    net.eval()  # settles the last round (gossip)
    with torch.no_grad():
        net(x_test[:1])
    loss, acc = evaluate(model, x_test, y_test)
    print(f"rank {rank}: {'gossip' if config else 'DDP'} test accuracy {acc:.4f} after {total} "
          f"steps ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
    if config:
        peer.report(loss=loss, accuracy=acc)
        peer.finish()
    else:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
