"""The PyTorch front end under the models and scripts people write: any torch optimizer,
autocast, gradient clipping and schedulers under DecentralizedOptimizer equal the same training
with an exact average in plain torch; BatchNorm statistics are averaged (or kept, by choice);
a script may call Peer's methods in its own order, prints to stdout freely, and gets the
average model evaluated in its own process at finish(); the package installs with pip."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import gossip
import gossip.data
import gossip.torch
from conftest import HERE, read_log, run_script, write_config

sys.path.insert(0, HERE)
import torch_worker  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.mark.parametrize("mode", ["sgd", "adam", "adamw", "autocast", "bn", "bn-local",
                                  "overlap", "gdp-nosync", "gdp-overlap",
                                  pytest.param("overlap-cuda", marks=pytest.mark.skipif(
                                      not torch.cuda.is_available(), reason="no CUDA device"))])
def test_the_wrapper_equals_local_steps_then_the_exact_average(folder, base_port, procs, mode):
    n = 3  # the 3-ring's Metropolis weights are 1/3 each: one round is the exact average
    config = write_config(folder, n, base_port)
    for r in range(n):
        procs.start([sys.executable, os.path.join(HERE, "torch_worker.py"), mode, config, str(r),
                     folder], os.path.join(folder, f"{mode}-{r}.log"))
    assert procs.wait_all(120) == [0] * n, \
        [read_log(folder, f"{mode}-{r}.log") for r in range(n)]
    expected = torch_worker.reference(mode.removesuffix("-cuda"), n)
    got = [torch.load(os.path.join(folder, f"{mode}-{r}.pt")) for r in range(n)]
    n_params = sum(p.numel() for p in torch_worker.make_model(mode, 0).parameters())
    for r in range(n):
        np.testing.assert_allclose(got[r].numpy(), expected[r].numpy(), rtol=1e-4, atol=1e-5)
    if mode.startswith("overlap"):
        check_overlap_trace(folder, mode, n)
    if mode == "bn":  # the statistics are one average, like the parameters
        np.testing.assert_allclose(got[0][n_params:], got[2][n_params:], atol=1e-6)
    if mode == "bn-local":  # each peer's statistics are its own; the parameters agree
        np.testing.assert_allclose(got[0][:n_params], got[1][:n_params], atol=1e-6)
        assert (got[0][n_params:] - got[1][n_params:]).abs().max() > 1e-2


def check_overlap_trace(folder, mode, n):
    """Each overlapped round's copy, copy wait and exposed time are in the peer's trace (thread
    2, per round) and summed in its summary.json, as the wrapper's overlap_stats sum them."""
    for r in range(n):
        with open(os.path.join(folder, "run", "peers", str(r), "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(folder, "run", "peers", str(r), "trace.json")) as f:
            events = json.load(f)["traceEvents"]
        with open(os.path.join(folder, f"{mode}-{r}.stats.json")) as f:
            stats = json.load(f)
        overlap = summary["overlap_s"]
        assert overlap["rounds"] == torch_worker.STEPS == stats["rounds"]
        spans = [e for e in events if e.get("tid") == 2 and e["ph"] == "X"]
        assert [(e["name"], e["args"]["round"]) for e in spans] == \
            [(part, k) for k in range(1, torch_worker.STEPS + 1)
             for part in ("copy", "copy_wait", "exposed")]
        assert any(e["ph"] == "M" and e["tid"] == 2 for e in events)
        for part in ("copy", "copy_wait", "exposed"):
            traced = sum(e["dur"] for e in spans if e["name"] == part) * 1e-6
            assert overlap[part] >= 0
            assert abs(overlap[part] - stats[part + "_s"]) < 1e-6, (part, overlap, stats)
            assert abs(traced - overlap[part]) < 1e-5 * torch_worker.STEPS, (part, traced)


def test_buffers_average_in_closed_form_and_integer_counters_stay_local(folder, base_port,
                                                                       procs):
    # One round of a bare BatchNorm1d(2) at learning rate 0: each peer's running mean after
    # one batch is 0.9 * 0 + 0.1 * (its batch mean), its variance 0.9 + 0.1 * (unbiased batch
    # variance); the round leaves every peer with the mean of the three.
    n = 3
    config = write_config(folder, n, base_port)
    script = os.path.join(folder, "bn.py")
    with open(script, "w") as f:
        f.write("""import sys, torch, gossip, gossip.torch
rank = int(sys.argv[2])
peer = gossip.Peer(sys.argv[1], rank=rank, out=sys.argv[3] + '/run')
bn = torch.nn.BatchNorm1d(2)
opt = gossip.torch.DecentralizedOptimizer(torch.optim.SGD(bn.parameters(), lr=0.0), bn, peer,
                                          rounds=1)
x = torch.tensor([[1.0, 2.0], [3.0, 6.0]]) * (rank + 1)
bn(x).sum().backward()
opt.step()
torch.save({'mean': bn.running_mean.clone(), 'var': bn.running_var.clone(),
            'count': int(bn.num_batches_tracked), 'state': opt.state_dict()},
           sys.argv[3] + f'/bn-{rank}.pt')
peer.finish()
""")
    for r in range(n):
        procs.start([sys.executable, script, config, str(r), folder],
                    os.path.join(folder, f"bn-{r}.log"))
    assert procs.wait_all(60) == [0] * n, [read_log(folder, f"bn-{r}.log") for r in range(n)]
    means = [0.1 * np.array([2.0, 4.0]) * (r + 1) for r in range(n)]
    variances = [0.9 + 0.1 * np.array([2.0, 8.0]) * (r + 1) ** 2 for r in range(n)]
    for r in range(n):
        got = torch.load(os.path.join(folder, f"bn-{r}.pt"))
        np.testing.assert_allclose(got["mean"].numpy(), np.mean(means, axis=0), rtol=1e-6)
        np.testing.assert_allclose(got["var"].numpy(), np.mean(variances, axis=0), rtol=1e-6)
        assert got["count"] == 1  # a counter, not mixed
        assert int(got["state"]["int_buffers"]["num_batches_tracked"]) == 1


def test_overlap_is_refused_for_algorithms_whose_state_cannot_lag_a_step(folder, base_port):
    config = write_config(folder, 3, base_port, algorithm="push_sum")
    peer = gossip.Peer(config, rank=0, out=os.path.join(folder, "run"))
    model = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="only dpsgd and local_sgd allow; push_sum's state"):
        gossip.torch.DecentralizedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                            peer, overlap=True)


def test_a_model_on_an_unsupported_device_is_refused_clearly():
    model = torch.nn.Linear(3, 2).to("meta")
    with pytest.raises(ValueError, match="meta"):
        gossip.torch.flatten_parameters(model)
    # A model across two devices (here the CPU and meta; on a machine with two GPUs, cuda:0
    # and cuda:1 alike) is refused, naming both, before anything moves.
    split = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2).to("meta"))
    with pytest.raises(ValueError, match="spans cpu and meta; gossip mixes a model on one"):
        gossip.torch.flatten_parameters(split)
    assert split[0].weight.device.type == "cpu" and split[1].weight.device.type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_a_cuda_model_mixes_through_its_host_mirror(folder, base_port, procs):
    # Three peers of a 3-ring (weights 1/3): the CUDA model ends at the exact average.
    config = write_config(folder, 3, base_port)
    script = os.path.join(folder, "cuda.py")
    with open(script, "w") as f:
        f.write("""import sys, torch, gossip, gossip.torch
rank = int(sys.argv[2])
peer = gossip.Peer(sys.argv[1], rank=rank, out=sys.argv[3] + '/run')
model = torch.nn.Linear(4, 2).cuda()
torch.nn.init.constant_(model.weight, float(rank)); torch.nn.init.zeros_(model.bias)
opt = gossip.torch.DecentralizedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), model,
                                          peer, rounds=1)
model(torch.ones(1, 4, device='cuda')).sum().backward()
opt.step()
assert model.weight.is_cuda and torch.allclose(model.weight, torch.full_like(model.weight, 1.0))
peer.finish()
""")
    for r in range(3):
        procs.start([sys.executable, script, config, str(r), folder],
                    os.path.join(folder, f"cuda-{r}.log"))
    assert procs.wait_all(60) == [0] * 3, [read_log(folder, f"cuda-{r}.log") for r in range(3)]


def test_a_script_in_its_own_order_gets_the_average_model_evaluated_in_finish(folder,
                                                                             base_port):
    # shard() and config first, reports at rounds 2 and 4 of 7 (not the last), prints to
    # stdout in between (no newline, unflushed), evaluate given: the launcher's line is the
    # average model's evaluation at the rounds run, not a peer's figure.
    config = write_config(folder, 3, base_port)
    code, log, out = run_script(folder, config, "order.py", """import sys, numpy as np, gossip
peer = gossip.Peer.from_env()
shard = peer.shard()
cfg, size = peer.config, peer.size
print('shard of', len(shard), 'samples; the config says batch', cfg['batch'], end=' ')
x = np.full(40, float(peer.rank), dtype=np.float32)
peer.join(x, rounds=7, evaluate=lambda: (0.5, float(x.mean()) / 10.0))
for r in range(7):
    x += 1.0
    peer.neighbor_average(x)
    if r in (1, 3):
        peer.report(loss=0.2, accuracy=0.3, epoch=(r + 1) / 7)
    print('x' * 3000, end='')
graph = peer.live_graph()
assert graph['connected'] and not peer.dead_peers()
summary = peer.finish()
sys.stdout.write(f"rank {peer.rank} summary {sorted(summary)}\\n")
""")
    assert code == 0, log
    summary = json.load(open(os.path.join(out, "summary.json")))
    # Final buffers: the ranks' mean (1) plus 7; evaluate() says mean / 10.
    assert summary["test_accuracy"] == pytest.approx(0.8)
    assert summary["test_loss"] == pytest.approx(0.5)
    assert summary["rounds"] == 7
    assert summary["epochs"] == pytest.approx(1.0)  # the reports' epoch, carried to round 7
    assert summary["peer_accuracy_min"] is None  # no peer reported at round 7
    assert "average model: test_accuracy 0.8000" in log and "7 rounds, 1.00 epochs" in log
    rows = [line.split(",") for line in open(os.path.join(out, "metrics.csv")).read().split()[1:]]
    assert [r[0] for r in rows if r[2] == "-1"] == ["7"]  # one average row, at the rounds run
    # What the script printed is in its log, and its events were all read.
    peer_log = read_log(os.path.join(out, "peers", "1"), "peer.log")
    assert "shard of" in peer_log and "rank 1 summary" in peer_log
    assert sum(1 for line in open(os.path.join(out, "events.jsonl"))
               if '"event": "done"' in line) == 3
    evaluated = json.load(open(os.path.join(out, "average-eval.json")))
    assert evaluated["evaluator"] == 0 and evaluated["peers"] == 3


def test_without_evaluate_the_launcher_says_there_is_no_average_model(folder, base_port):
    config = write_config(folder, 3, base_port)
    code, log, out = run_script(folder, config, "plain.py", """import numpy as np, gossip
peer = gossip.Peer.from_env()
x = np.full(10, float(peer.rank), dtype=np.float32)
peer.join(x, rounds=3)
for _ in range(3):
    peer.neighbor_average(x)
peer.report(loss=0.1, accuracy=0.6, epoch=1.0)
peer.finish()
""")
    assert code == 0, log
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["test_accuracy"] is None
    assert "evaluate=" in summary["average_model_missing"]
    assert "average model: none (" in log
    assert summary["peer_accuracy_min"] == pytest.approx(0.6) and summary["rounds"] == 3


def test_cifar10_binary_files_load_and_bad_ones_are_named(folder):
    rng = np.random.default_rng(0)
    records = []
    for i in range(7):
        records.append(np.concatenate([[i % 10], rng.integers(0, 256, 3072)]).astype(np.uint8))
    for b in range(1, 6):
        np.concatenate(records[:b + 1]).tofile(os.path.join(folder, f"data_batch_{b}.bin"))
    np.concatenate(records[:2]).tofile(os.path.join(folder, "test_batch.bin"))
    x, y = gossip.data.load_cifar10(folder)
    assert x.shape == (2 + 3 + 4 + 5 + 6, 3, 32, 32) and x.dtype == np.uint8
    assert list(y[:2]) == [0, 1]
    # the red plane first: pixel (0, 0) of channel 0 is the record's byte after the label
    np.testing.assert_array_equal(x[0, 0, 0, :4], records[0][1:5])
    np.testing.assert_array_equal(x[1, 2, 31, 31], records[1][3072])
    xt, yt = gossip.data.load_cifar10(folder, train=False)
    assert xt.shape == (2, 3, 32, 32) and list(yt) == [0, 1]
    bad = os.path.join(folder, "cut.bin")
    np.concatenate(records[:2])[:-5].tofile(bad)
    with pytest.raises(ValueError, match="cut.bin.*whole number"):
        gossip.data.load_cifar10(bad)
    label = records[0].copy()
    label[0] = 12
    label.tofile(bad)
    with pytest.raises(ValueError, match="label 12"):
        gossip.data.load_cifar10(bad)
    with pytest.raises(ValueError, match="data_batch_1.bin"):
        gossip.data.load_cifar10(os.path.join(folder, "nowhere"))


def test_the_package_type_checks(folder):
    cache = ["--cache-dir", os.path.join(folder, "mypy")]  # nothing written into the tree
    r = subprocess.run(["/usr/bin/python3", "-m", "mypy", *cache, "--strict", "python/gossip"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["/usr/bin/python3", "-m", "mypy", *cache, "examples",
                        "tests/python/torch_worker.py", "tests/python/torchrun_worker.py"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
