"""Shared pieces of the Python tests (tests/test_*.py): the gossip binary under test, a small
synthetic run config, commands with a bounded time, summaries, and the "N passed, N failed" line
that scripts/count_tests.py reads.

Each test is a script that meson runs with GOSSIP_BIN (the built binary) and GOSSIP_SOURCE_DIR
(the repository root) in its environment.
"""
import json
import os
import re
import subprocess
import sys

GOSSIP = os.environ.get("GOSSIP_BIN", "")
SOURCE = os.environ.get("GOSSIP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Checks:
    """Counts checks; a failed one prints what was expected and what came instead."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok: {what}")
        else:
            self.failed += 1
            print(f"FAILED: {what}")
            if detail:
                print("  " + str(detail).replace("\n", "\n  "))
        return ok

    def skip(self, why):
        """Ends the test without running it (a tool it needs is absent)."""
        print(f"{self.name}: skipped: {why}")
        print("0 passed, 0 failed")
        sys.exit(0)

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed or not self.passed else 0)


def run(cmd, timeout, env=None, cwd=None):
    """Runs `cmd` (a list) with stdout and stderr together; returns (exit code, output). A command
    still running after `timeout` seconds is killed and reads as exit code 124."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=full_env, cwd=cwd)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(killed after {timeout} s)"


def port_base():
    """A base port of this process's own, away from other tests running at the same time."""
    return 21000 + (os.getpid() * 37) % 9000


def write_config(folder, peers, epochs=2, algorithm="dpsgd", topology="topo.yaml"):
    """A small synthetic run (Gaussian blobs, MLP 12-24-3) of `peers` peers on a ring: trains in
    seconds and ends above 0.9 test accuracy. Returns the config's path."""
    with open(os.path.join(folder, topology), "w") as f:
        f.write(f"generator: ring\nn: {peers}\n")
    path = os.path.join(folder, "c.yaml")
    with open(path, "w") as f:
        f.write("data:\n  synthetic: {train: 1536, test: 384, dim: 12, classes: 3}\n"
                "model: {layers: [12, 24, 3]}\n"
                "optimizer: {lr: 0.05, momentum: 0.9}\n"
                f"train: {{epochs: {epochs}, batch: 16, seed: 5, backend: cpu}}\n"
                f"gossip: {{topology: {topology}, algorithm: {algorithm}, period: 1}}\n"
                "monitor: {round_timeout_s: 10}\n"
                f"net: {{run_id: launchers, base_port: {port_base()}, connect_timeout_s: 60, "
                "tls: {ca: keys/ca.pem, cert: 'keys/peer-{rank}.pem', key: 'keys/peer-{rank}.key'}}\n")
    # The run's TLS credentials, as a user makes them for peers started by hand, mpirun or srun.
    code, out = run([GOSSIP, "keys", "init", os.path.join(folder, "keys"), "--config", path], 60)
    if code != 0:
        raise RuntimeError(f"gossip keys init failed: {out}")
    return path


def summary(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        return json.load(f)


def final_table(output):
    """The lines of a run's final table that do not depend on timing: each peer's accuracy, and
    the average model's line up to its duration."""
    rows = []
    for line in output.splitlines():
        m = re.match(r"^\s*(\d+)\s+([0-9.]+|dead)\s+\S+\s+\S+(?:\s+[0-9.]+)?\s*$", line)
        if m:
            rows.append(f"{m.group(1)} {m.group(2)}")
        if line.startswith("average model:"):
            rows.append(line[:line.rfind(",")])
    return rows
