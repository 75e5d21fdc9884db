"""The gossip Python module: bad use raises clear exceptions, mixing over real loopback
connections has its closed-form behaviour, the torch wrapper mixes a model in place, and Python
peers interoperate bit for bit with C++ peers and the simulator."""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import gossip
import gossip.torch
from conftest import (EXEC_WORKER, GOSSIP, gossip_run, python_peer, read_log, run_script,
                      write_config)


def test_bad_use_raises_clear_errors(folder, base_port):
    config = write_config(folder, 3, base_port)
    peer = gossip.Peer(config, rank=0, out=os.path.join(folder, "run"))
    x = torch.zeros(10)
    with pytest.raises(ValueError, match="has not joined the network yet"):
        peer.neighbor_average(x)
    with pytest.raises(ValueError, match="has not joined the network yet"):
        peer.live_graph()
    with pytest.raises(TypeError, match="dtype is torch.float64"):
        peer.join(torch.zeros(10, dtype=torch.float64))
    with pytest.raises(ValueError, match="not contiguous"):
        peer.join(torch.zeros(4, 4).t())
    with pytest.raises(ValueError, match="float32"):
        peer.join(np.zeros(10, dtype=np.int32))
    with pytest.raises(ValueError, match="rank 7 is out of range: the topology has 3 peers"):
        gossip.Peer(config, rank=7, out=os.path.join(folder, "run"))
    with pytest.raises(ValueError, match="missing.yaml: no such config file"):
        gossip.Peer(os.path.join(folder, "missing.yaml"), rank=0)


def test_peer_options_are_typed_arguments_and_match_gossip_peers(folder, base_port):
    """gossip.Peer takes gossip peer's options as typed arguments (no argument list): the
    overrides change the config as --epochs and --algorithm do, an unknown override or a value
    out of range is refused naming the option, and the launcher's argument list (args=) reads
    into the same typed options."""
    config = write_config(folder, 3, base_port)
    peer = gossip.Peer(config, rank=1, out=os.path.join(folder, "typed"),
                       overrides={"epochs": 0.5, "algorithm": "local_sgd", "period": 3})
    values = peer.config
    assert (peer.rank, values["epochs"], values["algorithm"], values["period"]) == \
        (1, 0.5, "local_sgd", 3)
    with pytest.raises(ValueError, match="unknown option --colour"):
        gossip.Peer(config, rank=0, overrides={"colour": "blue"})
    with pytest.raises(ValueError, match="--period must be at least 1"):
        gossip.Peer(config, rank=0, overrides={"period": 0})
    with pytest.raises(ValueError, match="--metrics-port"):
        gossip.Peer(config, rank=0, metrics_port=70000)
    parsed = gossip._gossip.peer_arguments([config, "--rank", "2", "--epochs", "0.25",
                                            "--events", "--out", "x"])
    assert (parsed.config, parsed.rank, parsed.overrides, parsed.events, parsed.out) == \
        (config, 2, {"epochs": "0.25"}, True, "x")
    assert gossip._gossip.peer_arguments([config, "--advertise", "203.0.113.9:29502"]).advertise \
        == "203.0.113.9:29502"
    with pytest.raises(ValueError, match="--advertise peer-9: expected host:port"):
        gossip.Peer(config, rank=0, advertise="peer-9")
    assert gossip.Peer(args=[config, "--rank", "2", "--epochs", "0.25", "--out",
                             os.path.join(folder, "args")]).config["epochs"] == 0.25
    with pytest.raises(ValueError, match="unknown option --colour"):
        gossip._gossip.peer_arguments([config, "--colour", "blue"])


def test_a_neighbour_with_another_size_is_refused_with_both_sizes(folder, base_port, procs):
    config = write_config(folder, 3, base_port)
    for rank, size in enumerate((100, 100, 120)):
        python_peer(procs, folder, "size", config, rank, size)
    codes = procs.wait_all(60)
    logs = "".join(read_log(folder, f"size-{r}.log") for r in range(3))
    assert 3 in codes, logs
    assert "refused" in logs and "model fingerprint" in logs
    assert "100 params" in logs and "120 params" in logs


def test_mixing_preserves_the_average_and_shrinks_disagreement_by_rho(folder, base_port, procs):
    n, rounds = 4, 5
    config = write_config(folder, n, base_port)
    for r in range(n):
        python_peer(procs, folder, "vector", config, r, rounds)
    assert procs.wait_all(120) == [0] * n, [read_log(folder, f"vector-{r}.log") for r in range(n)]
    rows = np.stack([np.load(os.path.join(folder, f"vector-{r}.npy")) for r in range(n)])
    rows = rows.astype(np.float64)  # (peer, round, value)
    mean0 = rows[:, 0].mean(axis=0)
    # Metropolis weights on a 4-ring: W = 1/3 (I + shifts); rho = 1/3.
    rho = 1.0 / 3.0
    cd = [((rows[:, t] - rows[:, t].mean(axis=0)) ** 2).sum(axis=1).mean() for t in
          range(rounds + 1)]
    for t in range(1, rounds + 1):
        np.testing.assert_allclose(rows[:, t].mean(axis=0), mean0, atol=1e-5)
        assert cd[t] <= cd[t - 1] * rho ** 2 * 1.0001 + 1e-12
    assert cd[rounds] < cd[0] * 1e-4
    summary = json.load(open(os.path.join(folder, "run", "peers", "0", "summary.json")))
    assert summary["rounds"] == rounds and summary["test_accuracy"] == 0.5


def test_decentralized_optimizer_mixes_the_model_in_place(folder, base_port, procs):
    n = 3  # a 3-ring with weights 1/3: one round is the exact average
    config = write_config(folder, n, base_port)
    for r in range(n):
        python_peer(procs, folder, "torch", config, r)
    assert procs.wait_all(120) == [0] * n, [read_log(folder, f"torch-{r}.log") for r in range(n)]
    before = np.stack([np.load(os.path.join(folder, f"before-{r}.npy")) for r in range(n)])
    avg = before.astype(np.float64).mean(axis=0)
    assert np.abs(before - avg).max() > 1e-3  # the ranks started from different models
    for r in range(n):
        after = np.load(os.path.join(folder, f"after-{r}.npy"))
        np.testing.assert_allclose(after, avg, atol=1e-6)
        # the model's own parameters are views of the flat buffer: they moved too
        np.testing.assert_array_equal(np.load(os.path.join(folder, f"model-{r}.npy")), after)
        # finish() with no evaluate and no report(): no figure, in the dict and summary.json
        assert json.load(open(os.path.join(folder, f"finish-{r}.json")))["test_accuracy"] is None
        summary = json.load(open(os.path.join(folder, "run", "peers", str(r), "summary.json")))
        assert summary["test_accuracy"] is None and summary["peer_accuracy_min"] is None
    # A second Peer of rank 0 in rank 0's process is refused by name, not by its port.
    refusal = open(os.path.join(folder, "second-peer.txt")).read()
    assert "rank 0 already runs in this process" in refusal, refusal
    assert "finish() or stop() that Peer first" in refusal and "Address already" not in refusal


def test_flatten_parameters_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float64"):
        gossip.torch.flatten_parameters(torch.nn.Linear(2, 2).double())


@pytest.mark.parametrize("overlap", [False, True])
def test_python_and_cpp_peers_end_bit_identical_to_the_simulator(folder, base_port, procs,
                                                                 overlap):
    # With gossip.overlap each round is sent before the local steps and mixed after them (the
    # schedule the torch wrapper's overlap=True takes too): Python peers keep sim = real.
    n = 8
    config = write_config(folder, n, base_port)
    if overlap:
        with open(config) as f:
            text = f.read().replace("algorithm: dpsgd", "algorithm: dpsgd\n  overlap: true")
        assert "  overlap: true" in text
        with open(config, "w") as f:
            f.write(text)
    run = os.path.join(folder, "run")
    for r in range(n):
        if r % 2 == 0:
            procs.start([GOSSIP, "peer", config, "--rank", str(r), "--out", run],
                        os.path.join(folder, f"cpp-{r}.log"))
        else:
            python_peer(procs, folder, "model", config, r)
    codes = procs.wait_all(300)
    assert codes == [0] * n, codes
    sim = gossip.sim(config, os.path.join(folder, "sim"))
    assert sim["exit_code"] == 0
    real = [json.load(open(os.path.join(run, "peers", str(r), "summary.json")))
            ["params_sha256"][0] for r in range(n)]
    assert real == sim["params_sha256"]
    assert len(set(real)) > 1  # the peers' models differ: the hashes are not trivially equal
    # One peer lifecycle: a C++ peer's summary.json and a Python peer's have the same fields.
    cpp, py = (json.load(open(os.path.join(run, "peers", str(r), "summary.json")))
               for r in (0, 1))
    assert sorted(cpp) == sorted(py)
    assert cpp["samples"] == py["samples"] == 512 // n
    assert cpp["stopped_by_partition"] is py["stopped_by_partition"] is False


def test_a_python_peer_leaves_an_elastic_run_as_the_schedule_would_bit_for_bit(
        folder, base_port, procs):
    """Rank 3, a Python peer, leaves at round 12 (Peer(leave_at_round=12)) among C++ peers: it
    finishes with left: true, and every peer ends with the parameters gossip sim computes for
    the same leave in the schedule."""
    n = 5
    config = write_config(folder, n, base_port)
    with open(os.path.join(folder, "ring.yaml"), "w") as f:  # room for one more member
        f.write(f"generator: exponential\nn: {n}\nelastic: true\nmax_peers: {n + 1}\n")
    with open(config) as f:
        text = f.read().replace("epochs: 1", "epochs: 3")
    with open(config, "w") as f:
        f.write(text)
    run = os.path.join(folder, "run")
    for r in range(n):
        if r == 3:
            python_peer(procs, folder, "leave", config, r, 12)
        else:
            procs.start([GOSSIP, "peer", config, "--rank", str(r), "--out", run],
                        os.path.join(folder, f"cpp-{r}.log"))
    codes = procs.wait_all(300)
    assert codes == [0] * n, (codes, read_log(folder, "leave-3.log"))
    leaver = json.load(open(os.path.join(run, "peers", "3", "summary.json")))
    assert leaver["left"] is True
    with open(config, "a") as f:
        f.write("faults:\n  - {round: 12, leave: [3]}\n")
    sim = gossip.sim(config, os.path.join(folder, "sim"))
    assert sim["exit_code"] == 0
    real = [json.load(open(os.path.join(run, "peers", str(r), "summary.json")))
            ["params_sha256"][0] for r in range(n)]
    assert real == sim["params_sha256"][:n]  # (rank n, room for one more member, never joined)
    assert len(set(real)) > 1


def _same_values(a, b):
    """Equal field for field, item for item; numbers within the JSON text's 10 digits."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and \
            all(_same_values(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and \
            all(_same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return type(a) is type(b) and a == b


def test_topology_report_matches_the_ring_spectral_gap(folder):
    report = gossip.topology.generate("ring", n=16)
    assert report["connected"] is True
    rho = 1.0 / 3.0 + 2.0 / 3.0 * math.cos(2 * math.pi / 16)
    assert report["spectral_gap"] == pytest.approx(1 - rho, rel=1e-9)
    path = os.path.join(folder, "t.yaml")
    gossip.topology.generate("torus", rows=4, cols=4, path=path)
    assert gossip.topology.load(path)["n"] == 16
    with pytest.raises(ValueError):
        gossip.topology.generate("ring", n=1)
    # The dict is built by the code that writes `gossip topo --json` (no JSON text crosses):
    # the same fields and values, null as None, for a static and an elastic topology; numbers
    # at full precision where the JSON text rounds them to 10 digits.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for file in (path, os.path.join(repo, "topologies", "elastic-exp-16.yaml")):
        cli = subprocess.run([GOSSIP, "topo", file, "--json"], capture_output=True, text=True)
        assert cli.returncode == 0, cli.stderr
        assert _same_values(gossip.topology.load(file), json.loads(cli.stdout))


def test_gossip_run_exec_starts_python_peers_and_evaluates_the_average(folder, base_port):
    config = write_config(folder, 3, base_port)
    code, log, out = run_script(folder, config, "train.py", """import numpy as np, gossip
peer = gossip.Peer.from_env()
x = np.full(50, float(peer.rank), dtype=np.float32)
peer.join(x, rounds=2, evaluate=lambda: (0.25, float(x.mean()) / 10.0))
for _ in range(2):
    peer.neighbor_average(x)
peer.report(loss=0.1, accuracy=0.3, epoch=1.0)
peer.finish()
""")
    assert code == 0, log
    summary = json.load(open(os.path.join(out, "summary.json")))
    # the average of ranks 0, 1, 2 is 1.0; the script's evaluate() says mean / 10
    assert summary["test_accuracy"] == pytest.approx(0.1)
    assert summary["peer_accuracy_min"] == pytest.approx(0.3)
    assert summary["consensus_distance"] == pytest.approx(0.0, abs=1e-9)
    for key in ("rounds", "bytes_sent", "wall_seconds", "connected", "params_sha256"):
        assert key in summary
    # Python peers record their timeline too: rounds of send/wait/mix, the caller's time between
    # rounds as compute, and the launcher sums the phases.
    assert set(summary["phases_s"]) >= {"compute", "send", "wait", "mix", "evaluate"}
    for r in range(3):
        trace = json.load(open(os.path.join(out, "peers", str(r), "trace.json")))
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert sorted(e["args"]["round"] for e in spans if e["cat"] == "round") == [0, 1]
        assert {e["name"] for e in spans} >= {"round 0", "round 1", "wait", "compute"}


def test_the_progress_line_shows_the_stage_the_run_is_in(folder, base_port):
    """A gossip run --exec whose script evaluates nothing: the progress line at its last round
    says the peers are finishing, not that they are starting; the record has no accuracy."""
    config = write_config(folder, 3, base_port)
    script = os.path.join(folder, "quiet.py")
    with open(script, "w") as f:
        f.write("""import time, numpy as np, gossip
peer = gossip.Peer.from_env()
x = np.full(50, float(peer.rank), dtype=np.float32)
peer.join(x, rounds=3)
for _ in range(3):
    time.sleep(0.3)  # a round event each round (at most one every 250 ms)
    peer.neighbor_average(x)
peer.finish()
""")
    out = os.path.join(folder, "out")
    r = subprocess.run([GOSSIP, "run", config, "--out", out, "--exec", f"{sys.executable} {script}"],
                       capture_output=True, text=True, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    lines = [line for line in r.stdout.splitlines() if line.startswith("round ")]
    assert lines and lines[-1].startswith("round 3/3"), log
    for line in lines:
        assert "starting the peers" not in line or line.startswith("round 0/"), log
    assert "the peers are finishing (no evaluation merged)" in lines[-1], log


def test_push_sum_leaves_the_de_biased_model_in_the_buffer(folder, base_port, procs):
    # A directed graph whose rows do not sum to 1: 0 -> 1, 1 -> 2, 2 -> 0, 0 -> 2, each peer
    # keeping and sending equal shares (W[k][i] = 1 / (out-degree i + 1), column stochastic).
    # Push-sum's numerators x and weights w both follow x <- W x; the buffer must hold x / w.
    n, rounds = 3, 40
    with open(os.path.join(folder, "directed.yaml"), "w") as f:
        f.write("n: 3\ndirected: true\nweights: push-sum\n"
                "edges: [[0, 1], [1, 2], [2, 0], [0, 2]]\n")
    config = write_config(folder, n, base_port, algorithm="push_sum")
    with open(config) as f:
        text = f.read().replace("topology: ring.yaml", "topology: directed.yaml")
    with open(config, "w") as f:
        f.write(text)
    for r in range(n):
        python_peer(procs, folder, "vector", config, r, rounds)
    assert procs.wait_all(120) == [0] * n, [read_log(folder, f"vector-{r}.log") for r in range(n)]
    rows = np.stack([np.load(os.path.join(folder, f"vector-{r}.npy")) for r in range(n)])
    W = np.array([[1 / 3, 0, 1 / 2],
                  [1 / 3, 1 / 2, 0],
                  [1 / 3, 1 / 2, 1 / 2]])
    x, w = rows[:, 0].astype(np.float64), np.ones(n)
    mean0 = x.mean(axis=0)
    biased_seen = 0.0
    for t in range(1, rounds + 1):
        x, w = W @ x, W @ w
        np.testing.assert_allclose(rows[:, t], x / w[:, None], rtol=1e-4, atol=1e-5)
        biased_seen = max(biased_seen, np.abs(x - x / w[:, None]).max())
    assert biased_seen > 0.1  # x and x / w differ: the test tells them apart
    assert abs(w.sum() - n) < 1e-12 and np.abs(w - 1).max() > 0.1
    # push-sum's limit: every peer's de-biased model is the initial average
    np.testing.assert_allclose(rows[:, rounds], np.broadcast_to(mean0, (n, mean0.size)),
                               atol=1e-5)


def _event_kinds(out, peer):
    kinds = set()
    with open(os.path.join(out, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("peer") == peer:
                kinds.add(e["event"])
    return kinds


def test_on_partition_stop_ends_python_and_cpp_peers_alike(folder, base_port):
    # 4 peers on a ring, 30 epochs of 256 rounds; the fault schedule kills peers 1 and 3 at round
    # 100, which leaves 0 and 2 apart: with monitor.on_partition: stop each survivor evaluates,
    # checkpoints and ends there, whether it is a gossip peer process or a Python script.
    with open(os.path.join(folder, "ring.yaml"), "w") as f:
        f.write("generator: ring\nn: 4\n")
    config = os.path.join(folder, "run.yaml")
    with open(config, "w") as f:
        f.write(f"""data: {{synthetic: {{train: 16384, test: 384, dim: 12, classes: 3}}}}
model: {{layers: [12, 24, 3]}}
optimizer: {{lr: 0.05}}
train: {{epochs: 30, batch: 16, seed: 5, evals_per_epoch: 1}}
gossip: {{topology: ring.yaml}}
monitor: {{round_timeout_s: 5, dead_after_rounds: 1, dead_after_s: 0, on_partition: stop}}
net: {{tls: off, base_port: {base_port}, connect_timeout_s: 10}}
faults:
  - {{round: 100, kill: [1, 3]}}
""")
    rounds = 30 * 16384 // 4 // 16
    runs = {"cpp": (), "python": ("--exec", f"{sys.executable} {EXEC_WORKER} model-exec")}
    summaries, kinds = {}, {}
    for kind, extra in runs.items():
        out = os.path.join(folder, kind)
        code, log = gossip_run(config, out, *extra)
        assert code == 0, log
        for r in (0, 2):
            s = json.load(open(os.path.join(out, "peers", str(r), "summary.json")))
            assert s["stopped_by_partition"] is True, (kind, r, log)
            assert 100 < s["rounds"] < rounds, (kind, r, s["rounds"])
            peer_dir = os.path.join(out, "peers", str(r))
            assert os.path.exists(os.path.join(peer_dir, f"checkpoint-{s['rounds']}.ckpt"))
            rows = open(os.path.join(peer_dir, "metrics.csv")).read().splitlines()
            assert rows[-1].split(",")[0] == str(s["rounds"])  # evaluated at the stop
        summaries[kind] = json.load(open(os.path.join(out, "peers", "0", "summary.json")))
        kinds[kind] = _event_kinds(out, 0)
        assert {"partition", "done"} <= kinds[kind], (kind, kinds[kind])
    assert sorted(summaries["cpp"]) == sorted(summaries["python"])
    assert kinds["cpp"] == kinds["python"]


def _checkpoint_config(folder, n, base_port, every):
    config = write_config(folder, n, base_port)
    with open(config) as f:
        text = f.read().replace("epochs: 1", "epochs: 3").replace(
            "evals_per_epoch: 2", f"evals_per_epoch: 2\n  checkpoint_every: {every}")
    with open(config, "w") as f:
        f.write(text)
    return config


def _resume(out):
    r = subprocess.run([GOSSIP, "run", "--resume", out, "--no-progress"], capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def _hashes(out):
    return json.load(open(os.path.join(out, "summary.json")))["params_sha256"]


@pytest.mark.parametrize("mode", ["model", "torch-momentum", "torch-bn-adam", "torch-overlap"])
def test_a_python_run_stopped_and_resumed_ends_bit_identical(folder, base_port, mode):
    # 4 peers, 3 epochs of 8 rounds; checkpoints every 4 rounds; stopped after round 10 (a
    # checkpoint of its own) and resumed from it. "model" is gossip's own MLP driven from
    # Python; "torch-momentum" a torch model under DecentralizedOptimizer with SGD momentum,
    # whose momentum must come back from the checkpoint for the end to match.
    config = _checkpoint_config(folder, 4, base_port, every=4)
    script = f"{sys.executable} {EXEC_WORKER} {mode}-exec"
    whole, stopped = os.path.join(folder, "whole"), os.path.join(folder, "stopped")
    code, log = gossip_run(config, whole, "--exec", script)
    assert code == 0, log
    code, log = gossip_run(config, stopped, "--exec", script, "--until-round", "10")
    assert code == 0, log
    assert not os.path.exists(os.path.join(stopped, "summary.json")), log
    assert os.path.exists(os.path.join(stopped, "peers", "1", "checkpoint-10.ckpt"))
    assert not os.path.exists(os.path.join(stopped, "peers", "1", "checkpoint-12.ckpt"))
    code, log = _resume(stopped)
    assert code == 0, log
    assert "from round 10" in log
    peer_log = read_log(os.path.join(stopped, "peers", "2"), "peer.log")
    assert "resumed from" in peer_log and "checkpoint-10.ckpt" in peer_log
    assert _hashes(stopped) == _hashes(whole)
    assert len(_hashes(whole)) == 4 and len(set(_hashes(whole))) > 1
    summary = json.load(open(os.path.join(stopped, "summary.json")))
    assert summary["rounds"] == 24


def test_checkpoint_bad_use_raises_clear_errors(folder, base_port, procs):
    config = write_config(folder, 3, base_port)
    peer = gossip.Peer(config, rank=0, out=os.path.join(folder, "run"))
    with pytest.raises(ValueError, match="has not joined the network yet"):
        peer.save_checkpoint(b"")
    with pytest.raises(ValueError, match="has not joined the network yet"):
        peer.resume_state()
    with pytest.raises(ValueError, match="every must be 0 or more"):
        peer.checkpoint_due(every=-2)
    with pytest.raises(ValueError, match="checkpoint_every must be 0 or more"):
        gossip.torch.DecentralizedOptimizer(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(),
                                                            lr=0.1),
                                            torch.nn.Linear(2, 2), peer, checkpoint_every=-1)
    # Joined (its neighbours are started alongside): state must be bytes; stop needs a checkpoint
    for r in (1, 2):
        python_peer(procs, folder, "vector", config, r, 0)
    x = np.zeros(1000, dtype=np.float32)
    peer.join(x, rounds=0)
    assert peer.resume_state() is None
    with pytest.raises(TypeError, match="state must be bytes, not dict"):
        peer.save_checkpoint({"a": 1})
    with pytest.raises(ValueError, match="has no checkpoint of round 0"):
        peer.stop()
    peer.finish()
    assert procs.wait_all(60) == [0, 0]


def test_the_same_script_runs_under_mpirun_bit_identical_to_the_simulator(folder, base_port):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("mpirun not found (Debian's openmpi-bin; scripts/setup.sh installs it)")
    n = 4
    config = write_config(folder, n, base_port)
    out = os.path.join(folder, "mpi")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               GOSSIP_CONFIG=config, GOSSIP_OUT=out)
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_worker.py")
    done = subprocess.run([mpirun, "--oversubscribe", "-np", str(n), "-x", "GOSSIP_CONFIG",
                           "-x", "GOSSIP_OUT", "-x", "PYTHONPATH", sys.executable, worker],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sim = gossip.sim(config, os.path.join(folder, "sim"))
    real = [json.load(open(os.path.join(out, "peers", str(r), "summary.json")))
            ["params_sha256"][0] for r in range(n)]
    assert real == sim["params_sha256"]
    assert len(set(real)) > 1
