"""A one-node Slurm cluster runs deploy/slurm/gossip-ring.sbatch with 4 tasks on a small synthetic
config: the job completes within a bounded time, every rank writes its folder, the batch file's
`gossip collect` merges them, and the parameters are bit-identical to `gossip sim` of the same
config (a synchronous run) with the same accuracy.

Everything lives under one temporary directory: a munge key and munged on a socket of its own, a
generated slurm.conf (one node, this host, with 4 CPUs; free ports; state, spool and logs in the
directory), slurmctld and slurmd in the foreground as children of this script. Every daemon is
stopped at the end, pass or fail. Needs Debian's slurm-wlm and munge (scripts/setup.sh installs
them); skipped with a message when they are absent.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from gossip_test import GOSSIP, SOURCE, Checks, run, summary, write_config

TASKS = 4
JOB_TIMEOUT = 300  # seconds the job may take, queueing included


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, test, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return True
        time.sleep(0.5)
    print(f"gave up waiting for {what} after {timeout} s")
    return False


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return str(e)


class Cluster:
    """munged, slurmctld and slurmd under `root`, stopped by stop()."""

    def __init__(self, root):
        self.root = root
        self.procs = []
        self.conf = os.path.join(root, "slurm.conf")
        self.env = {"SLURM_CONF": self.conf}
        self.logs = {}

    def start_munge(self):
        mdir = os.path.join(self.root, "munge")
        os.makedirs(mdir, mode=0o700)
        sock_dir = os.path.join(self.root, "munge-socket")
        os.makedirs(sock_dir, mode=0o755)
        key = os.path.join(mdir, "munge.key")
        if shutil.which("mungekey"):
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        else:
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self.socket = os.path.join(sock_dir, "munge.socket")
        self.spawn("munged", ["munged", "--foreground", "--force", f"--socket={self.socket}",
                              f"--key-file={key}", f"--pid-file={mdir}/munged.pid",
                              f"--seed-file={mdir}/munged.seed", f"--log-file={mdir}/munged.log"])
        return wait_for("munged's socket", lambda: os.path.exists(self.socket), 20)

    def write_conf(self):
        host = socket.gethostname().split(".")[0]
        for d in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.root, d))
        r = self.root
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=gossiptest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs={TASKS} State=UNKNOWN
PartitionName=gossip Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")

    def spawn(self, name, argv):
        log = os.path.join(self.root, f"{name}.out")
        self.logs[name] = log
        with open(log, "w") as out:
            self.procs.append((name, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                      env={**os.environ, **self.env},
                                                      start_new_session=True)))

    def start_slurm(self):
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-f", self.conf])

        def idle():
            code, out = run(["sinfo", "--noheader", "--format=%t"], 10, self.env)
            return code == 0 and out.strip() == "idle"
        return wait_for("the node to be idle", idle, 60)

    def job_state(self, job):
        code, out = run(["scontrol", "show", "job", "--oneliner", job], 10, self.env)
        for field in out.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return "UNKNOWN"

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def main():
    t = Checks("slurm")
    missing = [p for p in ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "munged")
               if not shutil.which(p)]
    if missing:
        t.skip(f"{', '.join(missing)} not found (Debian's slurm-wlm and munge; "
               "scripts/setup.sh installs them)")
    if os.geteuid() != 0:
        t.skip("slurmd must run as root to start the job's tasks")
    root = tempfile.mkdtemp(prefix="gossip-slurm-")
    os.chmod(root, 0o755)
    cluster = Cluster(root)
    try:
        run_job(t, cluster, root)
    finally:
        cluster.stop()
        left = [name for name, p in cluster.procs if p.poll() is None]
        t.check(not left, "every daemon stopped", left)
        shutil.rmtree(root, ignore_errors=True)
    t.finish()


def batch_job(t, cluster, work, name, out, env):
    """Submits gossip-ring.sbatch c.yaml OUT from `work` with `env`, waits (bounded) for it and
    checks it completed; returns its log (work/NAME-JOB.out), or None when sbatch refused it."""
    sbatch = os.path.join(SOURCE, "deploy", "slurm", "gossip-ring.sbatch")
    code, got = run(["sbatch", "--parsable", f"--ntasks={TASKS}", f"--chdir={work}",
                     f"--output={work}/{name}-%j.out", sbatch, "c.yaml", out], 30,
                    {**cluster.env, **env})
    if not t.check(code == 0, f"sbatch accepts gossip-ring.sbatch ({name})", got):
        return None
    job = got.strip().split(";")[0]
    finished = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    try:
        ended = wait_for(f"job {job}", lambda: cluster.job_state(job) in finished, JOB_TIMEOUT)
    finally:
        if cluster.job_state(job) not in finished:
            run(["scancel", job], 30, cluster.env)
    t.check(ended, f"{name} job {job} ends within {JOB_TIMEOUT} s")
    with open(os.path.join(work, f"{name}-{job}.out"), errors="replace") as f:
        job_log = f.read()
    state = cluster.job_state(job)
    t.check(state == "COMPLETED", f"{name} job {job} completed (state {state})", job_log[-4000:])
    return job_log


def run_job(t, cluster, root):
    """Starts the cluster, submits the batch file and checks what it wrote; returns at the first
    check that leaves nothing more to see."""
    # The peers find each other by Slurm's node name, this host's short name.
    host = socket.gethostname().split(".")[0]
    try:
        address = socket.gethostbyname(host)
    except OSError as e:
        address = str(e)
    if not t.check(re.match(r"^\d+\.\d+\.\d+\.\d+$", address) is not None,
                   f"this host's name {host} resolves ({address})"):
        return
    if not t.check(cluster.start_munge(), "munged is up", tail(os.path.join(root, "munge", "munged.log"))):
        return
    cluster.write_conf()
    if not t.check(cluster.start_slurm(), "slurmctld and slurmd are up and the node is idle",
                   tail(os.path.join(root, "log", "slurmctld.log")) + tail(os.path.join(root, "log", "slurmd.log"))):
        return
    work = os.path.join(root, "work")
    os.makedirs(work)
    cfg = write_config(work, TASKS)
    job_log = batch_job(t, cluster, work, "job", "out", {"GOSSIP": GOSSIP})
    if job_log is None:
        return
    result = os.path.join(work, "out")
    t.check("outputs in out" in job_log and "gossip: results in out" in job_log,
            "the batch file says where its outputs are", job_log[-4000:])
    t.check(all(f"rank {r} (from SLURM_PROCID), SLURM_NTASKS={TASKS}, ports from SLURM_JOB_ID="
                in job_log for r in range(TASKS)) and "hosts from SLURM_STEP_NODELIST" in job_log,
            "each task took its rank, world size, port block and hosts from Slurm", job_log[-4000:])
    for r in range(TASKS):
        t.check(os.path.exists(os.path.join(result, "peers", str(r), "params.bin")),
                f"rank {r} wrote DIR/peers/{r}/ with its final parameters")
    if not t.check(os.path.exists(os.path.join(result, "summary.json")),
                   "the job's gossip collect wrote summary.json", job_log[-4000:]):
        return
    code, sim_log = run([GOSSIP, "sim", cfg, "--out", os.path.join(work, "sim")], 120)
    t.check(code == 0, "gossip sim exits 0", sim_log)
    got, sim = summary(result), summary(os.path.join(work, "sim"))
    t.check(len(got["params_sha256"]) == TASKS and got["params_sha256"] == sim["params_sha256"],
            "the tasks' final parameters are bit-identical to gossip sim's",
            f"slurm {got['params_sha256']}\nsim   {sim['params_sha256']}")
    t.check(got["test_accuracy"] > 0.9 and got["test_accuracy"] == sim["test_accuracy"],
            f"the average model reaches gossip sim's accuracy ({got['test_accuracy']} > 0.9)",
            f"slurm {got}\nsim   {sim}")
    python_job(t, cluster, work, sim)


def python_job(t, cluster, work, sim):
    """The same batch file with GOSSIP_EXEC: each task a Python peer (gossip.Peer.from_env(),
    gossip's own model through the module), ending bit-identical to gossip sim too."""
    module = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(GOSSIP))), "python")
    python = "/usr/bin/python3"
    if not os.path.exists(os.path.join(module, "gossip")) or not os.path.exists(python):
        print(f"slurm: no Python module in {module} or no {python}: the Python job is skipped")
        return
    worker = os.path.join(SOURCE, "tests", "python", "mpi_worker.py")
    job_log = batch_job(t, cluster, work, "py", "py",
                        {"GOSSIP": GOSSIP, "PYTHONPATH": module,
                         "GOSSIP_EXEC": f"{python} {worker}"})
    if job_log is None:
        return
    result = os.path.join(work, "py")
    if not t.check(os.path.exists(os.path.join(result, "summary.json")),
                   "the Python job's gossip collect wrote summary.json", job_log[-4000:]):
        return
    got = summary(result)
    t.check(got["params_sha256"] == sim["params_sha256"],
            "the Python tasks' final parameters are bit-identical to gossip sim's",
            f"slurm {got['params_sha256']}\nsim   {sim['params_sha256']}")


if __name__ == "__main__":
    main()
