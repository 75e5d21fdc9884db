"""PyTorch reference for `gossip bench wan`: one rank of torch.distributed with the gloo backend,
run inside that rank's network namespace, doing what DDP does each round of the MLP
784-256-128-10 at batch 32 on synthetic data: forward, backward, all_reduce of the gradients as
one flat buffer (235146 floats), average, SGD step with momentum 0.9.

usage: torch_wan.py RANK PEERS FLOATS ROUNDS WARM MASTER_ADDR PORT
Prints one line "seconds_per_round 0 wire_bytes_per_round cpu_seconds_per_round" (this rank's
mean over the timed rounds; the bytes its eth0 sent per round, -1 when unreadable; the CPU time
this process used per round).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def tx_bytes():
    try:
        with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
            return float(f.read())
    except OSError:
        return -1.0


def main():
    rank, peers, floats, rounds, warm = (int(a) for a in sys.argv[1:6])
    os.environ["MASTER_ADDR"] = sys.argv[6]
    os.environ["MASTER_PORT"] = sys.argv[7]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")  # the emulated link, not lo
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", rank=rank, world_size=peers)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    params = list(model.parameters())
    if sum(p.numel() for p in params) != floats:
        raise SystemExit(f"the MLP has {sum(p.numel() for p in params)} floats, not {floats}")
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    xs = torch.randn(8, 32, 784)
    ys = torch.randint(0, 10, (8, 32))
    flat = torch.empty(floats)
    loss_fn = torch.nn.CrossEntropyLoss()
    for r in range(warm + rounds):
        if r == warm:
            dist.barrier()
            wire0 = tx_bytes()
            cpu0 = time.process_time()
            t0 = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(xs[r % 8]), ys[r % 8]).backward()
        torch.cat([p.grad.reshape(-1) for p in params], out=flat)
        dist.all_reduce(flat)
        flat /= peers
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        opt.step()
    seconds = (time.perf_counter() - t0) / rounds
    cpu = (time.process_time() - cpu0) / rounds
    wire1 = tx_bytes()
    wire = (wire1 - wire0) / rounds if wire0 >= 0 and wire1 >= 0 else -1.0
    dist.barrier()
    dist.destroy_process_group()
    print(f"{seconds:.9f} 0 {wire:.1f} {cpu:.9f}", flush=True)


if __name__ == "__main__":
    main()
