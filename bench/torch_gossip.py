"""PyTorch reference for `gossip bench gossip`: torch.distributed with the gloo backend doing one
gossip round on a ring — isend the parameter buffer to both neighbours, irecv theirs, average
with weights 1/3 — in `peers` processes over loopback. Prints one JSON object:
{"seconds_per_round": ...} (the slowest rank's mean over the timed rounds).
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, peers, floats, rounds, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=peers)
    x = torch.randn(floats)
    left, right = (rank - 1) % peers, (rank + 1) % peers
    buf_l, buf_r = torch.empty(floats), torch.empty(floats)
    warm = 3
    for r in range(rounds + warm):
        if r == warm:
            dist.barrier()
            t0 = time.perf_counter()
        reqs = [dist.isend(x, left), dist.isend(x, right),
                dist.irecv(buf_l, left), dist.irecv(buf_r, right)]
        for q in reqs:
            q.wait()
        x = (x + buf_l + buf_r) / 3.0
    elapsed = (time.perf_counter() - t0) / rounds
    queue.put(elapsed)
    dist.barrier()
    dist.destroy_process_group()


def main():
    peers, floats, rounds, port = (int(a) for a in sys.argv[1:5])
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, peers, floats, rounds, port, queue))
             for r in range(peers)]
    for p in procs:
        p.start()
    times = [queue.get() for _ in procs]
    for p in procs:
        p.join(timeout=60)
    print(json.dumps({"seconds_per_round": max(times)}))


if __name__ == "__main__":
    main()
