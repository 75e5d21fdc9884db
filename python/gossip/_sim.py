"""The simulator: N virtual peers in one process running the same algorithm code as real
peers (`gossip sim`)."""
import json
import tempfile

from . import _gossip


def run(config, out=None):
    """Runs `gossip sim CONFIG --out OUT` in this process and returns summary.json as a dict
    (with 'exit_code'). Without `out`, a temporary folder is used and removed."""
    if out is None:
        with tempfile.TemporaryDirectory() as d:
            return run(config, d)
    code, text = _gossip.simulate(str(config), str(out))
    summary = json.loads(text) if text else {}
    summary["exit_code"] = code
    return summary
