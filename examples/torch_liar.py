#!/usr/bin/env python3
"""The torch quickstart's script with one rank that lies, for trying gossip.aggregate.

Rank GOSSIP_LIAR (default 3) trains as the others do, but at each neighbor_average it sends a
lie: GOSSIP_LIE=scale sends its buffer multiplied by -4, GOSSIP_LIE=nan a buffer of NaN. It then
puts its own parameters back, so it trains on alone, stays alive and lies every round (a liar
that mixed its own lie into itself would diverge and crash, and stop lying). It holds a valid
certificate and nothing else about it differs. Every other rank runs examples/torch_fmnist.py
unchanged. For example:

    gossip run configs/torch-quickstart.yaml --out runs/torch-liar --aggregate clipped \\
        --exec "GOSSIP_LIE=scale /usr/bin/python3 examples/torch_liar.py"

Under `mean` the honest ranks fall with it; under `clipped` they keep their accuracy and the
liar's neighbours name it (byzantine_suspect in events.jsonl and summary.json).
"""
import math
import os
import sys

import torch

import gossip
import torch_fmnist


class Liar(gossip.Peer):
    """The peer `peer` (its state taken over), whose neighbor_average sends a lie."""

    def __init__(self, peer: gossip.Peer, lie: str) -> None:  # pylint: disable=super-init-not-called
        self.__dict__.update(peer.__dict__)
        self._lie = lie

    def neighbor_average(self, tensor: torch.Tensor) -> int:
        own = tensor.clone()
        if self._lie == "nan":
            tensor.fill_(math.nan)
        else:
            tensor *= -4
        round_ = super().neighbor_average(tensor)
        tensor.copy_(own)
        return round_


def main():
    lie = os.environ.get("GOSSIP_LIE", "scale")
    if lie not in ("scale", "nan"):
        sys.exit(f"GOSSIP_LIE must be scale or nan, not {lie!r}")
    liar = int(os.environ.get("GOSSIP_LIAR", "3"))
    peer = gossip.Peer.from_env()
    if peer.rank == liar:
        peer = Liar(peer, lie)
    _, acc = torch_fmnist.train(peer.config, torch.tensor(peer.shard()), peer)
    summary = peer.finish()
    print(f"rank {peer.rank}: test accuracy {acc:.4f} after {summary['rounds']} rounds"
          f"{' (the liar)' if peer.rank == liar else ''}", file=sys.stderr)


if __name__ == "__main__":
    main()
