"""Topologies: the same report as `gossip topo FILE --json` (connected, components, spectral
gap, rounds to cut disagreement 1000x), from a file or a generator."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Optional, Union

from . import _gossip

PathLike = Union[str, "os.PathLike[str]"]


def load(path: PathLike) -> Dict[str, Any]:
    """The report of the topology file `path` as a dict (fields in docs/topology.md). Raises
    ValueError naming the file and line of the first problem."""
    report, _code = _gossip.topology_report(str(path))
    return report


def generate(kind: str, n: int = 0, rows: int = 0, cols: int = 0, k: int = 0, degree: int = 0,
             p: float = 0.0, beta: float = 0.0, seed: int = 0, directed: bool = False,
             path: Optional[PathLike] = None, s: int = 0, period: int = 0) -> Dict[str, Any]:
    """Generates a topology (ring, torus, exponential, random-regular, epidemic, ... as
    `gossip topo --generate`) and returns its report; with `path`, also writes its YAML file
    there."""
    text = _gossip.generator_yaml(kind, int(n), int(rows), int(cols), int(k), int(degree),
                                  float(p), float(beta), int(seed), bool(directed), int(s),
                                  int(period))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
        return load(path)
    with tempfile.TemporaryDirectory() as d:
        file = os.path.join(d, f"{kind}.yaml")
        with open(file, "w") as f:
            f.write(text)
        return load(file)
