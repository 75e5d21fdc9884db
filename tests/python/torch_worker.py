"""A torch peer for the front end's tests: `torch_worker.py MODE CONFIG RANK FOLDER`, or imported
by the tests to compute the same training without gossip (the reference).

Each rank builds the same small model (BatchNorm included in mode "bn"), from seed RANK, and
trains it STEPS steps on batches of seed RANK with the optimizer MODE names, mixing after every
step through gossip.torch.DecentralizedOptimizer. On the 3-ring with weights 1/3 a round is the
exact average of the three, so the reference is: every rank's local step, then the average of
the parameters and floating-point buffers.

Modes: sgd, adam, adamw, autocast (AdamW under torch.autocast bf16, gradient clipping and a
StepLR schedule on the wrapped optimizer), bn (a BatchNorm model under Adam), bn-local (the same
with buffer_period 0: statistics never mixed), overlap (SGD with momentum, overlap=True: each
round mixes the snapshot taken after a step and is applied after the next one, x <- x +
(avg(s) - s); the last one at synchronize()), gdp-nosync (GossipDataParallel around the model
in a DDP-shaped loop, the even steps but the last inside no_sync(): local steps without a
round; its state dict in DDP's layout round-trips), gdp-overlap (the same with overlap=True,
every step synced: the one-step-stale schedule of mode overlap). MODE-cuda (overlap-cuda) runs MODE with the model
and batches on the GPU: the device snapshot, the side stream's copies and the change taken on
the device, against the same reference.
"""
import json
import os
import sys
from typing import Iterator, List, Tuple

import torch
import torch.nn.functional as F

STEPS = 5


def make_model(mode: str, rank: int) -> torch.nn.Module:
    torch.manual_seed(rank)
    if mode.startswith("bn"):
        # No bias before BatchNorm (as conv layers before it have none): its gradient would be
        # rounding noise, which Adam scales up to full steps, and no tolerance would hold.
        return torch.nn.Sequential(torch.nn.Linear(6, 8, bias=False), torch.nn.BatchNorm1d(8),
                                   torch.nn.ReLU(), torch.nn.Linear(8, 3))
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def make_optimizer(mode: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if mode in ("sgd", "overlap", "gdp-nosync", "gdp-overlap"):
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if mode in ("adam", "bn", "bn-local"):
        return torch.optim.Adam(model.parameters(), lr=0.01)
    return torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)


def batches(rank: int) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        yield torch.randn(16, 6, generator=g) * (1 + rank), torch.randint(0, 3, (16,), generator=g)


def synced(mode: str, step: int) -> bool:
    """Whether `step` has its round: in mode gdp-nosync, the even steps but the last are taken
    inside GossipDataParallel.no_sync() (local steps, no round)."""
    return mode != "gdp-nosync" or step % 2 == 1 or step == STEPS - 1


def local_step(mode: str, model: torch.nn.Module, opt, x: torch.Tensor, y: torch.Tensor) -> None:
    """One step: the loss, its gradient, the optimizer's step (`opt` the wrapper or not)."""
    opt.zero_grad()
    if mode == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    else:
        F.cross_entropy(model(x), y).backward()
    opt.step()


def state(model: torch.nn.Module) -> List[torch.Tensor]:
    """Parameters, then floating-point buffers: the flat buffer's order."""
    return [t.detach().clone().reshape(-1) for t in model.parameters()] + \
        [b.detach().clone().reshape(-1) for b in model.buffers() if b.is_floating_point()]


def reference(mode: str, n: int) -> List[torch.Tensor]:
    """The n ranks' final flat values, trained without gossip: local steps, then the exact
    average (of the buffers too, unless bn-local), every step."""
    models = [make_model(mode, r) for r in range(n)]
    opts = [make_optimizer(mode, m) for m in models]
    scheds = [torch.optim.lr_scheduler.StepLR(o, 2, 0.5) if mode == "autocast" else None
              for o in opts]
    data = [list(batches(r)) for r in range(n)]
    n_params = sum(p.numel() for p in models[0].parameters())
    if mode in ("overlap", "gdp-overlap"):
        return overlap_reference(models, opts, data)
    for step in range(STEPS):
        for r in range(n):
            local_step(mode, models[r], opts[r], *data[r][step])
            if scheds[r] is not None:
                scheds[r].step()
        if not synced(mode, step):
            continue
        flats = [torch.cat(state(m)) for m in models]
        avg = torch.stack(flats).mean(0)
        with torch.no_grad():
            for m, own in zip(models, flats):
                new = avg.clone()
                if mode == "bn-local":
                    new[n_params:] = own[n_params:]
                offset = 0
                for t in list(m.parameters()) + [b for b in m.buffers() if b.is_floating_point()]:
                    t.copy_(new[offset:offset + t.numel()].view_as(t))
                    offset += t.numel()
    return [torch.cat(state(m)) for m in models]


def tensors_of(model: torch.nn.Module) -> List[torch.Tensor]:
    return list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]


def add_flat(model: torch.nn.Module, delta: torch.Tensor) -> None:
    offset = 0
    with torch.no_grad():
        for t in tensors_of(model):
            t.add_(delta[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def overlap_reference(models, opts, data) -> List[torch.Tensor]:
    """The one-step-stale schedule in plain torch: after each step the round before is applied
    (x += avg(s) - s), then the parameters are snapshot (s) for the next; the last round is
    applied at the end."""
    pending = None
    for step in range(STEPS):
        for r, m in enumerate(models):
            local_step("overlap", m, opts[r], *data[r][step])
        if pending is not None:
            for m, d in zip(models, pending):
                add_flat(m, d)
        snaps = [torch.cat(state(m)) for m in models]
        avg = torch.stack(snaps).mean(0)
        pending = [avg - s for s in snaps]
    assert pending is not None
    for m, d in zip(models, pending):
        add_flat(m, d)
    return [torch.cat(state(m)) for m in models]


def main() -> None:
    import gossip
    import gossip.torch
    name, config, rank, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    mode = name.removesuffix("-cuda")
    device = torch.device("cuda" if name.endswith("-cuda") else "cpu")
    peer = gossip.Peer(config, rank=rank, out=os.path.join(folder, "run"))
    if mode.startswith("gdp-"):
        return gdp_main(name, peer, rank, folder)
    model = make_model(mode, rank).to(device)
    inner = make_optimizer(mode, model)
    sched = torch.optim.lr_scheduler.StepLR(inner, 2, 0.5) if mode == "autocast" else None
    opt = gossip.torch.DecentralizedOptimizer(inner, model, peer, rounds=STEPS,
                                              buffer_period=0 if mode == "bn-local" else 1,
                                              overlap=mode == "overlap")
    for x, y in batches(rank):
        local_step(mode, model, opt, x.to(device), y.to(device))
        if sched is not None:
            sched.step()
    opt.synchronize()
    if mode == "overlap":  # every round went through the thread, and was applied
        assert opt.overlap_stats["rounds"] == STEPS, opt.overlap_stats
        # and the buffer the peer holds (its checkpoints, reports and final parameters) is
        # the settled model, not the last round's change
        assert torch.equal(opt.host, opt.flat), (opt.host - opt.flat).abs().max()
        with open(os.path.join(folder, f"{name}-{rank}.stats.json"), "w") as f:
            json.dump(opt.overlap_stats, f)
    torch.save(torch.cat(state(model)).cpu(), os.path.join(folder, f"{name}-{rank}.pt"))
    # The wrapper's state dict round-trips: a fresh wrapper's optimizer takes it whole.
    saved = opt.state_dict()
    again = make_optimizer(mode, model)
    again.load_state_dict(saved["optimizer"])
    assert str(again.state_dict()) == str(inner.state_dict())
    peer.finish()


def gdp_main(name: str, peer, rank: int, folder: str) -> None:
    """GossipDataParallel in a DDP-shaped loop, some steps inside no_sync()."""
    import gossip.torch
    model = make_model(name, rank)
    sgd = make_optimizer(name, model)
    net = gossip.torch.GossipDataParallel(model, peer, optimizer=sgd,
                                          rounds=sum(synced(name, k) for k in range(STEPS)),
                                          overlap=name == "gdp-overlap")
    for step, (x, y) in enumerate(batches(rank)):
        if synced(name, step):
            local_step(name, net, sgd, x, y)
        else:
            with net.no_sync():
                local_step(name, net, sgd, x, y)
    net.synchronize()
    assert peer.rounds_done == sum(synced(name, k) for k in range(STEPS)), peer.rounds_done
    torch.save(torch.cat(state(model)), os.path.join(folder, f"{name}-{rank}.pt"))
    saved = net.state_dict()  # DDP's layout, with the wrapper's state beside it
    assert "gossip" in saved and all(k.startswith("module.") for k in saved if k != "gossip")
    net.load_state_dict(saved)
    assert torch.equal(torch.cat(state(model)), torch.load(os.path.join(folder, f"{name}-{rank}.pt")))
    peer.finish()


if __name__ == "__main__":
    main()
