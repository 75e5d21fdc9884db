"""PyTorch's torchrun starts the peers (Debian's torch and /usr/bin/torchrun):

- `torchrun --standalone --nproc_per_node 4 examples/torch_fmnist.py CONFIG` trains with nothing
  gossip-specific but the config as the script's argument, and its peers end bit-identical to
  `gossip run CONFIG` (exec: the same script);
- two torchrun "nodes" on loopback through a c10d rendezvous (2 workers each, TLS credentials
  from `gossip keys init`, every rank but 0 learned through signed records): the same peers;
- a worker killed mid-run under --max-restarts 1: every worker resumes from the newest checkpoint
  they all hold and the run ends bit-identical to an unbroken one; `gossip collect` names the
  restarts;
- gossip.torch.GossipDataParallel in a DDP-shaped loop: bit-identical to DecentralizedOptimizer;
- refused, naming what to do: a world size other than the topology's (before any link forms),
  TLS without credentials, no config.

Debian's torch 1.13 needs `--redirects 1 --tee 2 --log_dir DIR` (without them its agent fails
before any worker starts). Skipped with a message when torchrun or torch is absent.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from gossip_test import GOSSIP, SOURCE, Checks, port_base, run

WORKER = os.path.join(SOURCE, "tests", "python", "torchrun_worker.py")
EXAMPLE = os.path.join(SOURCE, "examples", "torch_fmnist.py")


def torchrun_python():
    """The interpreter torchrun runs the workers with (its own shebang's): torch is there."""
    with open(shutil.which("torchrun")) as f:
        line = f.readline()
    return line[2:].strip().split()[0] if line.startswith("#!") else sys.executable


def torchrun(args, env, cwd, logs, timeout=240):
    """torchrun ARGS in its own process group, killed whole after `timeout` s; (code, output)."""
    cmd = [shutil.which("torchrun"), "--redirects", "1", "--tee", "2", "--log_dir", logs] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, **env}, cwd=cwd, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out + f"\n(killed after {timeout} s)"


def hashes(folder, n=4):
    out = []
    for r in range(n):
        with open(os.path.join(folder, "peers", str(r), "summary.json")) as f:
            out.append(json.load(f)["params_sha256"][0])
    return out


def starts(folder, n=4):
    out = []
    for r in range(n):
        with open(os.path.join(folder, "peers", str(r), "summary.json")) as f:
            out.append(json.load(f)["start"])
    return out


def leftovers(tmp):
    """Processes still running a script of this test's folder or the worker."""
    code, out = run(["pgrep", "-f", f"{WORKER}|{tmp}"], 10)
    return [line for line in out.split() if line.strip() and int(line) != os.getpid()]


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    t = Checks("torchrun")
    if not shutil.which("torchrun"):
        t.skip("torchrun not found (Debian's python3-torch; scripts/setup.sh installs it)")
    env = {"PYTHONPATH": os.path.join(sys.argv[1], "python"), "OMP_NUM_THREADS": "1"}
    tmp = tempfile.mkdtemp(prefix="gossip-torchrun-")
    try:
        write(os.path.join(tmp, "ring4.yaml"), "generator: ring\nn: 4\n")
        example = write(os.path.join(tmp, "fmnist.yaml"),
                        f"exec: {torchrun_python()} {EXAMPLE}\n"
                        "optimizer: {lr: 0.05, momentum: 0.9}\n"
                        "data: {limit_train: 1024}\n"
                        "train: {epochs: 1, batch: 32, seed: 1, threads: 1, evals_per_epoch: 1}\n"
                        "gossip: {topology: ring4.yaml, algorithm: dpsgd, period: 1}\n"
                        "net: {run_id: torchrun-test, tls: off}\n")
        standalone = ["--standalone", "--nproc_per_node", "4"]

        # 1. The example, unchanged, under torchrun and under gossip run.
        code, log = torchrun(standalone + [EXAMPLE, "fmnist.yaml"],
                             {**env, "GOSSIP_OUT": "runs/torchrun"}, tmp, f"{tmp}/logs1")
        t.check(code == 0, "torchrun --standalone --nproc_per_node 4 torch_fmnist.py CONFIG "
                "exits 0", log[-3000:])
        t.check("(from RANK, torchrun), WORLD_SIZE=4, ports from TORCHELASTIC_RUN_ID and MASTER_PORT" in log,
                "each worker took its rank, world size and port from torchrun", log[-2000:])
        code, ref_log = run([GOSSIP, "run", "fmnist.yaml", "--out", "runs/exec", "--no-progress"],
                            240, env, tmp)
        t.check(code == 0, "gossip run CONFIG (exec: the same script) exits 0", ref_log[-2000:])
        reference = hashes(os.path.join(tmp, "runs/exec")) if code == 0 else None
        got = hashes(os.path.join(tmp, "runs/torchrun")) if reference else None
        t.check(reference is not None and got == reference,
                "the torchrun peers' parameters are bit-identical to gossip run's",
                f"torchrun {got}\ngossip run {reference}")

        # 2. Two torchrun nodes through a c10d rendezvous, TLS from gossip keys init.
        code, keys = run([GOSSIP, "keys", "init", "keys", "--config", "fmnist.yaml"], 60,
                         None, tmp)
        t.check(code == 0, "gossip keys init", keys)
        write(os.path.join(tmp, "fmnist-tls.yaml"),
              open(example).read().replace("tls: off", "tls: on"))
        endpoint = f"127.0.0.1:{port_base() + 500}"
        nodes = []
        for node in (0, 1):
            args = ["--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "2",
                    "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", "two",
                    EXAMPLE, "fmnist-tls.yaml"]
            cmd = [shutil.which("torchrun"), "--redirects", "1", "--tee", "2", "--log_dir",
                   f"{tmp}/logs-node{node}"] + args
            nodes.append(subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
                env={**os.environ, **env, "GOSSIP_OUT": "runs/two",
                     "GOSSIP_TLS_DIR": os.path.join(tmp, "keys")}, start_new_session=True))
        outputs = []
        for p in nodes:
            try:
                outputs.append(p.communicate(timeout=240)[0])
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                outputs.append(p.communicate()[0] + "\n(killed)")
        t.check(all(p.returncode == 0 for p in nodes), "both torchrun nodes exit 0",
                "\n".join(o[-1500:] for o in outputs))
        both = "\n".join(outputs)
        t.check("other nodes' ranks learned" in both and "its signed record tells the members" in both,
                "across nodes the ranks other than 0 announce signed addresses", both[-2000:])
        two = hashes(os.path.join(tmp, "runs/two")) if all(p.returncode == 0 for p in nodes) else None
        t.check(reference is not None and two == reference,
                "the two-node run's parameters are bit-identical to gossip run's",
                f"two nodes {two}\ngossip run {reference}")

        # 3. A worker killed mid-run, torchrun's restart, and GossipDataParallel.
        write(os.path.join(tmp, "w.yaml"),
              "train: {epochs: 1, batch: 16, seed: 1, threads: 1, checkpoint_every: 5}\n"
              "gossip: {topology: ring4.yaml, algorithm: dpsgd, period: 1}\n"
              "net: {run_id: torchrun-worker, tls: off}\n")
        runs = {}
        for name, mode, extra, more in (
                ("unbroken", "opt", {}, []),
                ("gdp", "gdp", {}, []),
                ("killed", "opt", {"KILL_RANK": "2", "KILL_STEP": "23"}, ["--max_restarts", "1"])):
            code, log = torchrun(standalone + more + [WORKER, mode, "w.yaml"],
                                 {**env, **extra, "GOSSIP_OUT": f"runs/{name}"}, tmp,
                                 f"{tmp}/logs-{name}")
            runs[name] = (code, log)
            t.check(code == 0, f"the {name} run ({mode}) exits 0", log[-3000:])
        ok = all(code == 0 for code, _ in runs.values())
        unbroken = hashes(os.path.join(tmp, "runs/unbroken")) if ok else None
        t.check(ok and hashes(os.path.join(tmp, "runs/gdp")) == unbroken,
                "GossipDataParallel's peers are bit-identical to DecentralizedOptimizer's")
        t.check(ok and hashes(os.path.join(tmp, "runs/killed")) == unbroken,
                "the run whose worker was killed and restarted ends bit-identical to an unbroken one")
        if ok:
            s = starts(os.path.join(tmp, "runs/killed"))
            t.check(all(x.get("as") == "resumed" and x.get("round") == 20 and
                        x.get("restart_count") == 1 for x in s),
                    "every restarted worker resumed from round 20, the newest checkpoint all hold",
                    s)
            t.check(all(x.get("as") == "fresh" and x.get("restart_count") == 0
                        for x in starts(os.path.join(tmp, "runs/unbroken"))),
                    "an unbroken run's workers started fresh")
        code, collected = run([GOSSIP, "collect", "runs/killed"], 120, None, tmp)
        t.check(code == 0 and collected.count("restarted by torchrun (restart 1): resumed from "
                                              "its checkpoint of round 20") == 4,
                "gossip collect names each worker's restart and where it resumed", collected)

        # 4. Refusals.
        code, log = torchrun(["--standalone", "--nproc_per_node", "2", WORKER, "opt", "w.yaml"],
                             {**env, "GOSSIP_OUT": "runs/two-of-four"}, tmp, f"{tmp}/logs-ws")
        t.check(code != 0 and log.count("torchrun started 2 ranks (WORLD_SIZE=2) but the topology "
                                        "ring4.yaml has 4 peers") == 2,
                "2 workers against a 4-peer topology: each refuses, naming both sizes", log[-2000:])
        t.check(not os.path.exists(os.path.join(tmp, "runs/two-of-four/peers")),
                "... before any peer started")
        write(os.path.join(tmp, "w-tls.yaml"),
              open(os.path.join(tmp, "w.yaml")).read().replace("tls: off", "tls: on"))
        code, log = torchrun(standalone + [WORKER, "opt", "w-tls.yaml"], env, tmp,
                             f"{tmp}/logs-tls")
        t.check(code != 0 and "no TLS credentials" in log and "gossip keys init" in log and
                "GOSSIP_TLS_DIR" in log and "net.tls: off" in log,
                "TLS without credentials: refused, naming gossip keys init, GOSSIP_TLS_DIR and "
                "net.tls: off", log[-2000:])
        code, log = torchrun(["--standalone", "--nproc_per_node", "1", WORKER, "opt"], env, tmp,
                             f"{tmp}/logs-noconfig")
        t.check(code != 0 and "no run config under torchrun" in log and
                "script.py CONFIG.yaml" in log and "GOSSIP_CONFIG" in log,
                "no config: refused, naming the ways to give one", log[-2000:])
        t.check(not leftovers(tmp), "no worker is left running", leftovers(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
