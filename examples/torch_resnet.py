#!/usr/bin/env python3
"""torchvision's ResNet-18 (BatchNorm throughout) trained by decentralized gossip SGD with AdamW.

    gossip run configs/torch-resnet-short.yaml --out runs/resnet     # 8 peers, a short run
    gossip run configs/torch-resnet.yaml --out runs/resnet-full      # the full one (hours here)
    python3 examples/torch_resnet.py --single configs/torch-resnet-short.yaml   # the reference

Data: Fashion-MNIST (the config's data.*), or CIFAR-10 in its binary version when
GOSSIP_CIFAR10 names the folder with data_batch_1.bin ... test_batch.bin (gossip.data.
load_cifar10). For 28x28 grey images the stem takes one channel; the rest is torchvision's
ResNet-18 as it is (11.2 M parameters). BatchNorm's running statistics are mixed with the
parameters every round; at the end each peer reports its own model and gossip run evaluates the
average model (parameters and statistics) in one of the peers' processes.

The reference (--single) is the same script in one process on the whole (limited) training set
with the network's batch (train.batch times the peers) and the same number of steps.

Where CUDA is, each rank trains on a GPU (gossip.torch.device_for: LOCAL_RANK or the rank
modulo the GPUs; eight ranks share one GPU when there is one) with its shard and the test set
held on the device. GOSSIP_OVERLAP=1 mixes each round beside the next step
(DecentralizedOptimizer(overlap=True)); GOSSIP_AUTOCAST=bf16 runs the forward pass under
torch.autocast with bfloat16 (the parameters and gossip's messages stay float32).

Each rank prints its mean step time over steps 50 to 250 (evaluations left out) on stderr, a
line starting "steps 50-250:", with the overlap's figures when it overlaps. GOSSIP_NO_ROUNDS=1
replaces gossip's round by nothing (the peers join, take no round, and finish): the reference
for what gossip costs a step.
"""
import math
import os
import resource
import sys
import time
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

import gossip
import gossip.data
import gossip.torch


def resnet18(channels: int) -> torch.nn.Module:
    model = torchvision.models.resnet18(num_classes=10)
    if channels != 3:
        model.conv1 = torch.nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def load(config: dict, train: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    cifar = os.environ.get("GOSSIP_CIFAR10")
    if cifar:
        x, y = gossip.data.load_cifar10(cifar, train=train)
        x = torch.from_numpy(x.astype(np.float32) / 255.0)
        mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
        std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)
        return (x - mean) / std, torch.from_numpy(y)
    images, labels = (("train_images", "train_labels") if train else
                      ("test_images", "test_labels"))
    x, y = gossip.load_idx(config[images], config[labels])
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y)


def autocast(device: torch.device):
    """torch.autocast with bfloat16 when GOSSIP_AUTOCAST=bf16, else a no-op context."""
    on = os.environ.get("GOSSIP_AUTOCAST") == "bf16"
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=on)


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
             limit: int) -> Tuple[float, float]:
    model.eval()
    x, y = x[:limit], y[:limit]
    with torch.no_grad(), autocast(x.device):
        logits = torch.cat([model(x[i:i + 500]) for i in range(0, len(x), 500)])
    model.train()
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


class StepWindow:
    """The mean step time over steps [first, last), evaluations left out, printed at `last`."""

    def __init__(self, device: torch.device, first: int, last: int) -> None:
        self.device, self.first, self.last = device, first, last
        self.t0 = 0.0
        self.left_out = 0.0

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def after(self, step: int, opt: object) -> None:
        if step == self.first:
            self.t0 = self._now()
        elif step == self.last and self.t0 > 0:
            mean = (self._now() - self.t0 - self.left_out) / (self.last - self.first)
            stats = getattr(opt, "overlap_stats", None)
            extra = ""
            if getattr(opt, "overlap", False) and stats and stats["rounds"]:
                extra = (f", overlap: copy {stats['copy_s'] / stats['rounds'] * 1e3:.2f} ms, "
                         f"copy wait {stats['copy_wait_s'] / stats['rounds'] * 1e3:.2f} ms, "
                         f"mix {stats['mix_s'] / stats['rounds'] * 1e3:.2f} ms, exposed "
                         f"{stats['exposed_s'] / stats['rounds'] * 1e3:.2f} ms a round")
            print(f"steps {self.first}-{self.last}: {mean * 1e3:.3f} ms/step{extra}",
                  file=sys.stderr, flush=True)

    def leave_out(self, step: int, seconds: float) -> None:
        if self.first < step < self.last:
            self.left_out += seconds


def train(config: dict, shard: torch.Tensor, batch: int, peer: Optional[gossip.Peer]) -> float:
    torch.manual_seed(config["seed"])  # every rank starts from the same model
    torch.set_num_threads(max(1, config["threads"]))
    device = gossip.torch.device_for(peer.rank if peer is not None else 0)
    x_all, y_all = load(config, True)
    x, y = x_all[shard].to(device), y_all[shard].to(device)
    del x_all, y_all
    x_test, y_test = (t.to(device) for t in load(config, False))
    eval_limit = int(os.environ.get("GOSSIP_EVAL_LIMIT", "10000"))
    model = resnet18(x.shape[1]).to(device)
    steps_per_epoch = math.ceil(len(x) / batch)
    steps = math.ceil(config["epochs"] * steps_per_epoch - 1e-9)
    adamw = torch.optim.AdamW(model.parameters(), lr=config["lr"],
                              weight_decay=config["weight_decay"])
    sched = torch.optim.lr_scheduler.OneCycleLR(adamw, max_lr=config["lr"], total_steps=steps)
    opt: object = adamw
    period = steps + 1 if os.environ.get("GOSSIP_NO_ROUNDS") == "1" else config["period"]
    if peer is not None:
        opt = gossip.torch.DecentralizedOptimizer(
            adamw, model, peer, period=period, rounds=steps // period,
            evaluate=lambda: evaluate(model, x_test, y_test, eval_limit),
            overlap=os.environ.get("GOSSIP_OVERLAP") == "1")
    gen = torch.Generator().manual_seed(config["seed"] * 1000 + (peer.rank if peer else 0))
    t0 = time.time()
    step = 0
    window = StepWindow(device, 50, 250)
    while step < steps:
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), batch):
            if step >= steps:
                break
            idx = order[i:i + batch].to(device)
            opt.zero_grad()  # type: ignore[attr-defined]
            with autocast(device):
                loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()  # type: ignore[attr-defined]
            sched.step()
            step += 1
            window.after(step, opt)
            if peer is not None and peer.stopped:
                return float("nan")
            if step % max(1, steps // 4) == 0 or step == steps:
                e0 = time.perf_counter()
                test_loss, acc = evaluate(model, x_test, y_test, eval_limit)
                window.leave_out(step, time.perf_counter() - e0)
                print(f"step {step}/{steps}: loss {loss.item():.4f}, test accuracy {acc:.4f} "
                      f"({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
                if peer is not None:
                    peer.report(loss=loss.item(), accuracy=acc, epoch=step / steps_per_epoch)
    return evaluate(model, x_test, y_test, eval_limit)[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--single":
        config = gossip.peer_config(sys.argv[2], rank=0)
        n = config["limit_train"] or 60000
        batch = config["batch"] * config["size"]
        acc = train(config, torch.arange(n), batch, None)
        print(f"single process: batch {batch}, test accuracy {acc:.4f}, "
              f"peak RSS {peak_rss_mb():.0f} MB")
        return
    if len(sys.argv) != 1:
        sys.exit(f"usage: {sys.argv[0]} (under gossip run) | --single CONFIG")
    peer = gossip.Peer.from_env()
    config = peer.config
    acc = train(config, torch.tensor(peer.shard()), config["batch"], peer)
    summary = peer.finish()
    print(f"rank {peer.rank}: own model's test accuracy {acc:.4f} after {summary.get('rounds')} "
          f"rounds, peak RSS {peak_rss_mb():.0f} MB", file=sys.stderr)
    if "average_model" in summary:
        print(f"rank {peer.rank}: the average model's test accuracy "
              f"{summary['average_model']['accuracy']:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
