#!/usr/bin/env python3
"""The fault table: for each fault, how long the peers take to detect it and to recover, measured
by `gossip run` and predicted by `gossip sim` on the same fault schedule, with the shipped
membership defaults (the quickstart's config; only `faults:` and the epochs are added).

    python3 bench/fault_table.py [--gossip BIN] [--out DIR] [--epochs E] [--pause-epochs E]

Scenarios (ring of 8, D-PSGD, the quickstart's MLP):
  kill       kill -9 of peers 2 and 6 at round 100: detection = the last survivor's `dead` of
             both; partition = the last survivor's `partition` event
  restart    peer 2 started again at round 600, when its death is confirmed and the partition
             seen (at 3-20 ms a round, 1.5-10 s after the kill), in an 8-epoch run that leaves it
             time to load and rejoin: recovery = the last survivor's `healed`
  pause      SIGSTOP of peer 1 for 10 s at round 300 of a 16-epoch run: detection = the last
             neighbour's `suspect`; recovery = peer 1's own refutation after SIGCONT (its
             `alive`/`rejoin` of itself); cost = wall time against the same run undisturbed

Times come from each run's events.jsonl: the launcher's fault events and the time it heard of
each membership event (`launcher_s`), both on its clock; in the simulator both are the simulated
clock. Prints a Markdown table and writes table.json.
The forged-claim and duplicate-identity cases are refused at the handshake (tests/test_peer.cpp,
"an insider holding a live peer's certificate"): nothing to time here.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def events(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def write_config(path, epochs, faults):
    with open(os.path.join(ROOT, "configs", "quickstart.yaml")) as f:
        text = f.read()
    text = text.replace("../topologies/ring-8.yaml",
                        os.path.join(ROOT, "topologies", "ring-8.yaml"))
    text = text.replace("  epochs: 4\n", f"  epochs: {epochs}\n")
    text = text.replace("run_id: quickstart", "run_id: faults")
    if faults:
        text += "faults:\n" + "".join(f"  - {f}\n" for f in faults)
    with open(path, "w") as f:
        f.write(text)


def run(cmd, log):
    t0 = time.monotonic()
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    return code, time.monotonic() - t0


def fault_time(evs, action):
    return next(e["time_s"] for e in evs if e.get("event") == "fault" and e["action"] == action)


def when(e):
    """A membership event's time on the faults' clock: when the launcher heard of it under
    gossip run (launcher_s), the simulated clock under gossip sim."""
    return e.get("launcher_s", e["time_s"])


def last_time(evs, peers, pred):
    """The latest, over `peers`, of each one's first membership event matching pred."""
    worst = None
    for p in peers:
        ts = [when(e) for e in evs if e.get("peer") == p and "subject" in e and pred(e)]
        if not ts:
            return None
        worst = max(worst or 0.0, min(ts))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gossip", default=None, help="the gossip binary (default: build/src/cli/"
                    "gossip if built, else gossip on the PATH)")
    ap.add_argument("--out", default="runs/fault-table")
    ap.add_argument("--epochs", type=float, default=8, help="of the kill/restart runs (long "
                    "enough for the restarted peer to load its data and rejoin)")
    ap.add_argument("--pause-epochs", type=float, default=16, help="of the pause runs (the "
                    "others must still train when the paused peer wakes)")
    ap.add_argument("--only", choices=["kill", "pause"], help="run one scenario again; the "
                    "other one's runs already in --out are read")
    ap.add_argument("--reuse", action="store_true",
                    help="read the runs already in --out instead of running them again")
    a = ap.parse_args()
    gossip = a.gossip or (os.path.join(ROOT, "build/src/cli/gossip")
                          if os.path.exists(os.path.join(ROOT, "build/src/cli/gossip"))
                          else shutil.which("gossip"))
    os.makedirs(a.out, exist_ok=True)
    survivors = [0, 1, 3, 4, 5, 7]
    rows = []

    def both(name, epochs, faults):
        cfg = os.path.join(a.out, f"{name}.yaml")
        write_config(cfg, epochs, faults)
        res = {}
        scenario = "kill" if name == "kill" else "pause"
        for mode in ("run", "sim"):
            d = os.path.join(a.out, f"{name}-{mode}")
            if a.reuse or (a.only and a.only != scenario):
                res[mode] = (events(os.path.join(d, "events.jsonl")),
                             json.load(open(os.path.join(d, "summary.json")))["wall_seconds"])
                continue
            shutil.rmtree(d, ignore_errors=True)
            cmd = [gossip, mode, cfg, "--out", d] + (["--no-progress", "--keep-going"]
                                                      if mode == "run" else [])
            print(f"fault_table: {' '.join(cmd)}", file=sys.stderr, flush=True)
            code, wall = run(cmd, d + ".log")
            if code != 0:
                sys.exit(f"fault_table: {' '.join(cmd)} exited {code}; see {d}.log")
            res[mode] = (events(os.path.join(d, "events.jsonl")), wall)
        return res

    # kill and restart: one schedule.
    res = both("kill", a.epochs, ["{round: 100, kill: [2, 6]}", "{round: 600, restart: [2]}"])
    for mode, (evs, _) in res.items():
        k = fault_time(evs, "kill")
        dead = last_time(evs, survivors, lambda e: e["event"] == "dead" and e["subject"] in (2, 6))
        part = last_time(evs, survivors, lambda e: e["event"] == "partition")
        r = fault_time(evs, "restart")
        healed = last_time(evs, survivors,
                           lambda e: e["event"] == "healed" and when(e) >= r)
        rows.append({"fault": "kill -9 of peers 2 and 6", "mode": mode,
                     "detect_s": None if dead is None else dead - k,
                     "recover_s": None})
        rows.append({"fault": "partition {0,1,7} {3,4,5}", "mode": mode,
                     "detect_s": None if part is None else part - k, "recover_s": None})
        rows.append({"fault": "restart of peer 2", "mode": mode, "detect_s": None,
                     "recover_s": None if healed is None else healed - r})

    # pause: against the same run undisturbed.
    quiet = both("quiet", a.pause_epochs, [])
    paused = both("pause", a.pause_epochs, ["{round: 300, pause: [1], seconds: 10}"])
    for mode in ("run", "sim"):
        evs, wall = paused[mode]
        p = fault_time(evs, "pause")
        suspect = last_time(evs, [0, 2], lambda e: e["event"] == "suspect" and e["subject"] == 1)
        back = last_time(evs, [1], lambda e: e["subject"] == 1 and e["event"] in ("alive", "rejoin"))
        others = sorted({e["subject"] for e in evs if e.get("event") == "suspect"} - {1})
        if mode == "run":
            cost = wall / quiet["run"][1]
        else:  # the simulated clock at the end of each run
            sim_s = lambda name: json.load(open(os.path.join(a.out, f"{name}-sim",
                                                             "summary.json")))["sim_seconds"]
            cost = sim_s("pause") / sim_s("quiet")
        rows.append({"fault": "SIGSTOP of peer 1 for 10 s", "mode": mode,
                     "detect_s": None if suspect is None else suspect - p,
                     "recover_s": None if back is None else back - (p + 10),
                     "run_time_ratio": cost, "others_suspected": others})

    with open(os.path.join(a.out, "table.json"), "w") as f:
        json.dump(rows, f, indent=2)
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    print("| fault | detected after (run / sim), s | recovered after (run / sim), s |")
    print("|---|---|---|")
    for name in dict.fromkeys(r["fault"] for r in rows):
        rr = {r["mode"]: r for r in rows if r["fault"] == name}
        print(f"| {name} | {fmt(rr['run']['detect_s'])} / {fmt(rr['sim']['detect_s'])} | "
              f"{fmt(rr['run']['recover_s'])} / {fmt(rr['sim']['recover_s'])} |")
    for r in rows:
        if "run_time_ratio" in r:
            print(f"pause ({r['mode']}): run time {r['run_time_ratio']:.3f}x the undisturbed "
                  f"run's; peers other than 1 ever suspected: {r['others_suspected'] or 'none'}")


if __name__ == "__main__":
    main()
