"""The simulator: N virtual peers in one process running the same algorithm code as real
peers (`gossip sim`)."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Optional, Union

from . import _gossip


def run(config: Union[str, "os.PathLike[str]"],
        out: Optional[Union[str, "os.PathLike[str]"]] = None) -> Dict[str, Any]:
    """Runs `gossip sim CONFIG --out OUT` in this process and returns summary.json as a dict
    (with 'exit_code'). Without `out`, a temporary folder is used and removed."""
    if out is None:
        with tempfile.TemporaryDirectory() as d:
            return run(config, d)
    code = _gossip.simulate(str(config), str(out))
    path = os.path.join(str(out), "summary.json")
    summary: Dict[str, Any] = {}
    if os.path.exists(path):  # the run's own record, as gossip sim writes it
        with open(path) as f:
            summary = json.load(f)
    summary["exit_code"] = code
    return summary
