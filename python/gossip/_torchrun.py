"""Peer.from_env() under PyTorch's torchrun: the run config, the folder and, after one of
torchrun's restarts, where each worker goes on from.

torchrun's agent sets TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT and TORCHELASTIC_RESTART_COUNT in every worker. The C++ peer reads the rank, the
world size (checked against the topology) and the addresses from them (rank R listens on
net.base_port + R in a block the run id and MASTER_PORT choose; see docs/python.md, "Under torchrun"); this module finds the config and the
folder, and agrees with the other workers on a restart's round through torch.distributed's
store at MASTER_ADDR:MASTER_PORT (the one `init_process_group("env://")` would use), which it
closes again before the peer starts.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Set

from . import _gossip

#: How long a restarted worker waits for the others' checkpoint lists.
AGREE_TIMEOUT_S = 300.0


@dataclass
class Start:
    """How a worker starts: fresh, from its checkpoint of `resume_round`, or rejoining."""
    resume_round: Optional[int] = None
    rejoin: bool = False
    why: str = ""


def active() -> bool:
    """Whether torchrun started this process (its agent sets TORCHELASTIC_RUN_ID and RANK)."""
    return bool(os.environ.get("TORCHELASTIC_RUN_ID")) and bool(os.environ.get("RANK"))


def config_argument(argv: Sequence[str]) -> Optional[str]:
    """The script's first argument that names a YAML file (`torchrun ... script.py CONFIG`)."""
    for a in argv[1:]:
        if a.endswith((".yaml", ".yml")) and os.path.isfile(a):
            return a
    return None


def folder() -> str:
    """The run's folder under torchrun: GOSSIP_OUT, else runs/torchrun-TORCHELASTIC_RUN_ID (the
    same for every restart of one job; --rdzv_id names it)."""
    return os.environ.get("GOSSIP_OUT") or f"runs/torchrun-{os.environ['TORCHELASTIC_RUN_ID']}"


def restart_count() -> int:
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


def _store(prefix: str) -> Any:  # a torch.distributed.Store
    """torch.distributed's env:// store (the agent's, or one rank 0 hosts), under `prefix`."""
    try:
        import torch.distributed as dist
    except ImportError as e:  # torchrun without torch cannot be, but say what is missing
        raise RuntimeError("gossip under torchrun: a restarted worker agrees on its checkpoint "
                           f"through torch.distributed, which does not import: {e}") from e
    from datetime import timedelta
    store, _, _ = next(dist.rendezvous("env://", timeout=timedelta(seconds=AGREE_TIMEOUT_S)))
    return dist.PrefixStore(prefix, store)


def _agree(rank: int, size: int, rounds: List[int]) -> List[Set[int]]:
    """Every worker's checkpoint rounds, exchanged through the store; returns them by rank. The
    store stays up (rank 0 may host it) until every worker has read them all."""
    store = _store(f"gossip/restart-{restart_count()}/")
    store.set(f"rounds/{rank}", ",".join(str(r) for r in rounds))
    out = []
    for r in range(size):
        text = store.get(f"rounds/{r}").decode()
        out.append({int(x) for x in text.split(",") if x})
    store.add("read", 1)
    deadline = time.monotonic() + AGREE_TIMEOUT_S
    while rank == 0 and store.add("read", 0) < size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"gossip under torchrun: not every worker read the checkpoint "
                               f"lists within {AGREE_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    return out


def restart_start(out: str, rank: int, size: int) -> Start:
    """Where a worker that torchrun started again goes on from: the newest round whose
    checkpoint every worker holds (as `gossip run --resume` takes it); a worker without any
    checkpoint rejoins from its neighbours while those that hold one resume from the newest round
    they all hold; with none in common the whole run starts over."""
    mine, refused = _gossip.valid_checkpoints(os.path.join(out, "peers", str(rank)), rank)
    for why in refused:
        print(f"gossip: refusing checkpoint {why}", file=sys.stderr)
    every = _agree(rank, size, mine)
    common = set.intersection(*every)
    if common:
        r = max(common)
        return Start(resume_round=r, why=f"resumed from round {r}, the newest every worker has")
    holders = [s for s in every if s]
    shared = set.intersection(*holders) if holders else set()
    if shared and mine:
        r = max(shared)
        return Start(resume_round=r, why=f"resumed from round {r}; the workers without a "
                                         "checkpoint rejoin from their neighbours")
    if shared:
        return Start(rejoin=True, why="no checkpoint of its own: rejoins from its neighbours")
    return Start(why="no round has a checkpoint from the workers that hold any: starts over")
