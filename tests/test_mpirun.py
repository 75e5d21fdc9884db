"""Open MPI's mpirun starts the peers: `mpirun -np 4 gossip peer CONFIG --out DIR` on a small
synthetic config trains to the accuracy `gossip sim` reaches with bit-identical parameters (a
synchronous run), `gossip collect DIR` prints the same final table as `gossip run`, and a world
size other than the topology's peer count is refused on every rank, naming both numbers.

gossip does not link MPI: mpirun only starts the processes, which read their rank from
OMPI_COMM_WORLD_RANK. Runs when mpirun is on the PATH (Debian's openmpi-bin, which
scripts/setup.sh installs); skipped with a message otherwise.
"""
import os
import shutil
import tempfile

from gossip_test import GOSSIP, Checks, final_table, run, summary, write_config

PEERS = 4


def main():
    t = Checks("mpirun")
    mpirun = shutil.which("mpirun")
    if not mpirun:
        t.skip("mpirun not found (Debian's openmpi-bin; scripts/setup.sh installs it)")
    # Open MPI refuses root without both of these; --oversubscribe lets 4 ranks share 2 cores.
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    launch = [mpirun, "--oversubscribe", "-np"]
    tmp = tempfile.mkdtemp(prefix="gossip-mpirun-")
    try:
        cfg = write_config(tmp, PEERS)
        out = os.path.join(tmp, "mpi")
        code, log = run(launch + [str(PEERS), GOSSIP, "peer", cfg, "--out", out], 300, env, tmp)
        t.check(code == 0, f"mpirun -np {PEERS} gossip peer exits 0", log[-3000:])
        for r in range(PEERS):
            folder = os.path.join(out, "peers", str(r))
            t.check(all(os.path.exists(os.path.join(folder, f))
                        for f in ("summary.json", "metrics.csv", "events.txt", "params.bin")),
                    f"rank {r} wrote its own files in DIR/peers/{r}/", sorted(os.listdir(out)))
            t.check(f"rank {r} (from OMPI_COMM_WORLD_RANK)" in log,
                    f"rank {r} took its rank from OMPI_COMM_WORLD_RANK")

        code, collected = run([GOSSIP, "collect", out], 120)
        t.check(code == 0, "gossip collect DIR exits 0", collected)
        code, sim_log = run([GOSSIP, "sim", cfg, "--out", os.path.join(tmp, "sim")], 120)
        t.check(code == 0, "gossip sim exits 0", sim_log)
        code, run_log = run([GOSSIP, "run", cfg, "--out", os.path.join(tmp, "run"),
                             "--no-progress"], 300)
        t.check(code == 0, "gossip run exits 0", run_log)

        got, sim, net = summary(out), summary(os.path.join(tmp, "sim")), summary(os.path.join(tmp, "run"))
        t.check(len(got["params_sha256"]) == PEERS and got["params_sha256"] == sim["params_sha256"],
                "the ranks' final parameters are bit-identical to gossip sim's",
                f"mpirun {got['params_sha256']}\nsim    {sim['params_sha256']}")
        t.check(got["test_accuracy"] > 0.9,
                f"the average model trained (test accuracy {got['test_accuracy']} > 0.9)")
        t.check(got["test_accuracy"] == sim["test_accuracy"]
                and got["consensus_distance"] == sim["consensus_distance"],
                "its accuracy and consensus distance are gossip sim's",
                f"collect {got}\nsim     {sim}")
        t.check(got["test_accuracy"] == net["test_accuracy"]
                and got["consensus_distance"] == net["consensus_distance"],
                "the average model and consensus distance are gossip run's",
                f"collect {got}\nrun     {net}")
        t.check(final_table(collected) == final_table(run_log) and len(final_table(run_log)) == PEERS + 1,
                "gossip collect prints gossip run's final table",
                f"collect:\n{collected}\nrun:\n{run_log}")
        for f in ("summary.json", "metrics.csv", "events.jsonl"):
            t.check(os.path.exists(os.path.join(out, f)), f"gossip collect wrote DIR/{f}")

        # Half the ranks the topology needs: every rank says so and none trains.
        wrong = os.path.join(tmp, "wrong")
        code, log = run(launch + ["2", GOSSIP, "peer", cfg, "--out", wrong], 120, env, tmp)
        t.check(code != 0, "mpirun -np 2 on a 4-peer topology fails", log)
        t.check(log.count("mpirun started 2 ranks (OMPI_COMM_WORLD_SIZE=2) but the topology ") == 2
                and log.count(f"topo.yaml has {PEERS} peers: start {PEERS} ranks") == 2,
                "each of the 2 ranks names both numbers", log)
        t.check(not os.path.exists(os.path.join(wrong, "peers")), "no rank started training")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
