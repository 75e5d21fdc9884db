"""A torchrun worker for tests/test_torchrun.py: `torchrun ... torchrun_worker.py MODE CONFIG`.

Every rank builds the same small model (seed 0) and trains it STEPS steps on batches drawn from
seed 1000 * rank + step (so a resumed worker draws the batches it has not taken yet), with SGD
and momentum, a gossip round after every step. MODE "opt" wraps the optimizer
(gossip.torch.DecentralizedOptimizer), "gdp" wraps the model where DDP would
(gossip.torch.GossipDataParallel) and leaves the optimizer and the loop as a DDP script has
them. With KILL_RANK and KILL_STEP set, that rank kills itself (SIGKILL) at that step of the
first attempt (TORCHELASTIC_RESTART_COUNT 0), as a crashed worker would, for torchrun to start
the workers again.
"""
import os
import signal
import sys

import torch
import torch.nn.functional as F

import gossip
import gossip.torch

STEPS = 30


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(16, 6, generator=g) * (1 + rank), torch.randint(0, 3, (16,), generator=g)


def main():
    mode = sys.argv[1]
    peer = gossip.Peer.from_env()  # the config: the script's argument naming a .yaml file
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if mode == "gdp":
        net = gossip.torch.GossipDataParallel(model, peer, optimizer=sgd, rounds=STEPS)
        opt, done = sgd, net.steps
    else:
        net = model
        opt = gossip.torch.DecentralizedOptimizer(sgd, model, peer, rounds=STEPS)
        done = opt.steps
    kill = os.environ.get("KILL_RANK") == str(peer.rank) and \
        os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0"
    for step in range(done, STEPS):
        if kill and step == int(os.environ["KILL_STEP"]):
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch(peer.rank, step)
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    summary = peer.finish()
    print(f"rank {peer.rank}: {mode} finished {summary['rounds']} rounds from step {done}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
