#!/usr/bin/env python3
"""What gossip.aggregate: clipped costs a whole run: the quickstart (8 peers on the ring, TLS,
the MLP) under `gossip run` with `mean` (the reference) and with `clipped`, in the same run of
this script, the two alternating so that a slow spell of a noisy machine falls on both.

    python3 bench/aggregate_wall.py [--gossip BIN] [--epochs E] [--reps K] [--out DIR]

Prints each run's wall time (the launcher's, from summary.json) and the mix phase summed over
the peers, then ratio = best clipped / best mean (target: 1.1 at most), and writes
DIR/aggregate_wall.json.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(gossip, aggregate, epochs, out):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [gossip, "run", os.path.join(ROOT, "configs", "quickstart.yaml"), "--out", out,
           "--epochs", str(epochs), "--aggregate", aggregate, "--no-progress"]
    with open(out + ".log", "w") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    if code != 0:
        sys.exit(f"aggregate_wall: {' '.join(cmd)} failed (exit {code}); see {out}.log")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    return s["wall_seconds"], s["phases_s"]["mix"], s["test_accuracy"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gossip", default=os.path.join(ROOT, "build", "src", "cli", "gossip"))
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="/tmp/gossip-aggregate-wall")
    a = ap.parse_args()
    if a.reps < 1 or not 0 < a.epochs <= 100:
        sys.exit("aggregate_wall: --reps must be at least 1 and --epochs in (0, 100]")
    os.makedirs(a.out, exist_ok=True)
    runs = {"mean": [], "clipped": []}
    print(f"quickstart, {a.epochs:g} epochs, {a.reps} runs each, mean and clipped alternating")
    print(f"{'aggregate':<10} {'run':>4} {'wall s':>8} {'mix s (peers)':>14} {'accuracy':>9}")
    for k in range(a.reps):
        for agg in ("mean", "clipped"):
            wall, mix, acc = one_run(a.gossip, agg, a.epochs, os.path.join(a.out, f"{agg}-{k}"))
            runs[agg].append({"wall_s": wall, "mix_s": mix, "test_accuracy": acc})
            print(f"{agg:<10} {k + 1:>4} {wall:>8.2f} {mix:>14.2f} {acc:>9.4f}", flush=True)
    best = {agg: min(r["wall_s"] for r in rs) for agg, rs in runs.items()}
    ratio = best["clipped"] / best["mean"]
    print(f"best wall: mean {best['mean']:.2f} s, clipped {best['clipped']:.2f} s; "
          f"ratio = clipped / mean = {ratio:.3f} (target <= 1.1)")
    with open(os.path.join(a.out, "aggregate_wall.json"), "w") as f:
        json.dump({"epochs": a.epochs, "runs": runs, "best_wall_s": best, "ratio": ratio}, f,
                  indent=1)


if __name__ == "__main__":
    main()
