"""Shared helpers for the Python module's tests: small networks of real peer processes on
loopback (each on ports of its own), with every process stopped when a test ends."""
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "peer_worker.py")
EXEC_WORKER = os.path.join(HERE, "exec_worker.py")
GOSSIP = os.environ.get("GOSSIP_BIN", "gossip")


def write_config(folder, n, base_port, algorithm="dpsgd", extra=""):
    """A ring of `n` peers on 127.0.0.1 from base_port, synthetic data, TLS off."""
    topo = os.path.join(folder, "ring.yaml")
    with open(topo, "w") as f:
        f.write(f"generator: ring\nn: {n}\n")
    path = os.path.join(folder, "run.yaml")
    with open(path, "w") as f:
        f.write(f"""data:
  synthetic: {{train: 512, test: 128, dim: 16}}
model:
  layers: [16, 12, 10]
optimizer:
  lr: 0.05
train:
  epochs: 1
  batch: 16
  seed: 3
  evals_per_epoch: 2
gossip:
  topology: ring.yaml
  algorithm: {algorithm}
monitor:
  round_timeout_s: 10
net:
  tls: off
  base_port: {base_port}
  connect_timeout_s: 10
{extra}""")
    return path


@pytest.fixture
def folder():
    with tempfile.TemporaryDirectory() as d:
        yield d


# Below Linux's ephemeral range (32768 and up), where an outgoing connection's local port could
# take a peer's listening port: at most 29950 + 16 per test.
_port = [20000 + (os.getpid() % 200) * 50]


@pytest.fixture
def base_port():
    _port[0] += 16
    return _port[0]


class Processes:
    """Started processes, killed at the end of the test if still running."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log):
        self.procs.append(subprocess.Popen(argv, stdout=open(log, "w"),
                                           stderr=subprocess.STDOUT))
        return self.procs[-1]

    def wait_all(self, timeout=120):
        return [p.wait(timeout=timeout) for p in self.procs]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def procs():
    p = Processes()
    yield p
    p.stop()


def python_peer(procs, folder, mode, config, rank, *args):
    log = os.path.join(folder, f"{mode}-{rank}.log")
    return procs.start([sys.executable, WORKER, mode, config, str(rank), folder, *map(str, args)],
                       log)


def read_log(folder, name):
    with open(os.path.join(folder, name)) as f:
        return f.read()


def gossip_run(config, out, *args):
    """`gossip run CONFIG --out OUT --no-progress ARGS`: (exit code, stdout and stderr)."""
    r = subprocess.run([GOSSIP, "run", config, "--out", out, "--no-progress", *args],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def run_script(folder, config, name, text):
    """Writes `text` to FOLDER/NAME and runs it under `gossip run --exec` into FOLDER/out:
    (exit code, output, the run's folder)."""
    script = os.path.join(folder, name)
    with open(script, "w") as f:
        f.write(text)
    out = os.path.join(folder, "out")
    code, log = gossip_run(config, out, "--exec", f"{sys.executable} {script}")
    return code, log, out
