"""Topologies: the same report as `gossip topo FILE --json` (connected, components, spectral
gap, rounds to cut disagreement 1000x), from a file or a generator."""
import json
import os
import tempfile

from . import _gossip


def load(path):
    """The report of the topology file `path` as a dict (fields in docs/topology.md). Raises
    ValueError naming the file and line of the first problem."""
    text, _code = _gossip.topology_report(str(path))
    return json.loads(text)


def generate(kind, n=0, rows=0, cols=0, k=0, degree=0, p=0.0, beta=0.0, seed=0,
             directed=False, path=None):
    """Generates a topology (ring, torus, exponential, random-regular, ... as `gossip topo
    --generate`) and returns its report; with `path`, also writes its YAML file there."""
    text = _gossip.generator_yaml(kind, int(n), int(rows), int(cols), int(k), int(degree),
                                  float(p), float(beta), int(seed), bool(directed))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
        return load(path)
    with tempfile.TemporaryDirectory() as d:
        file = os.path.join(d, f"{kind}.yaml")
        with open(file, "w") as f:
            f.write(text)
        return load(file)
