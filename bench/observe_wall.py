#!/usr/bin/env python3
"""What watching a run costs: the quickstart (8 peers on the ring, TLS, the MLP) under
`gossip run` plain (the reference) and with everything on (--dashboard, --metrics-port,
--tensorboard) while a watcher polls the page's state every 0.5 s, as the open page does, and
the run's merged /metrics every second (which scrapes every peer), in the same run of this
script, the two alternating so that a slow spell of a noisy machine falls on both.

    python3 bench/observe_wall.py [--gossip BIN] [--epochs E] [--reps K] [--out DIR]

Prints each run's wall time (the launcher's, from summary.json), then
ratio = best observed / best plain (target: 1.05 at most), the ratio of the means and the median
of each adjacent pair's ratio, and writes DIR/observe_wall.json.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def watcher(urls_every, stop, counts):
    """Polls each (url, seconds) until `stop`; counts the answers."""
    due = {u: 0.0 for u, _ in urls_every}
    while not stop.is_set():
        now = time.monotonic()
        for url, every in urls_every:
            if now < due[url]:
                continue
            due[url] = now + every
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    r.read()
                counts[url] = counts.get(url, 0) + 1
            except OSError:
                pass
        stop.wait(0.05)


def one_run(gossip, observed, epochs, out):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [gossip, "run", os.path.join(ROOT, "configs", "quickstart.yaml"), "--out", out,
           "--epochs", str(epochs), "--no-progress"]
    stop, counts, thread = threading.Event(), {}, None
    if observed:
        dash, metrics = free_port(), 23500
        cmd += ["--dashboard", str(dash), "--metrics-port", str(metrics), "--tensorboard"]
        urls = [(f"http://127.0.0.1:{dash}/state.json", 0.5),
                (f"http://127.0.0.1:{metrics + 8}/metrics", 1.0)]
        thread = threading.Thread(target=watcher, args=(urls, stop, counts), daemon=True)
        thread.start()
    with open(out + ".log", "w") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    stop.set()
    if thread:
        thread.join()
    if code != 0:
        sys.exit(f"observe_wall: {' '.join(cmd)} failed (exit {code}); see {out}.log")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    return s["wall_seconds"], s["test_accuracy"], sum(counts.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gossip", default=os.path.join(ROOT, "build", "src", "cli", "gossip"))
    ap.add_argument("--epochs", type=float, default=4.0)  # the quickstart as it is
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="/tmp/gossip-observe-wall")
    a = ap.parse_args()
    if a.reps < 1 or not 0 < a.epochs <= 100:
        sys.exit("observe_wall: --reps must be at least 1 and --epochs in (0, 100]")
    os.makedirs(a.out, exist_ok=True)
    runs = {"plain": [], "observed": []}
    print(f"quickstart, {a.epochs:g} epochs, {a.reps} runs each, plain and observed alternating")
    print(f"{'run':<9} {'rep':>4} {'wall s':>8} {'accuracy':>9} {'scrapes':>8}")
    for k in range(a.reps):
        for kind in ("plain", "observed"):
            wall, acc, scrapes = one_run(a.gossip, kind == "observed", a.epochs,
                                         os.path.join(a.out, f"{kind}-{k}"))
            runs[kind].append({"wall_s": wall, "test_accuracy": acc, "scrapes": scrapes})
            print(f"{kind:<9} {k + 1:>4} {wall:>8.2f} {acc:>9.4f} {scrapes:>8}", flush=True)
    best = {kind: min(r["wall_s"] for r in rs) for kind, rs in runs.items()}
    mean = {kind: sum(r["wall_s"] for r in rs) / len(rs) for kind, rs in runs.items()}
    ratio = best["observed"] / best["plain"]
    pairs = sorted(o["wall_s"] / p["wall_s"] for p, o in zip(runs["plain"], runs["observed"]))
    median_pair = pairs[len(pairs) // 2] if len(pairs) % 2 else \
        (pairs[len(pairs) // 2 - 1] + pairs[len(pairs) // 2]) / 2
    print(f"best wall: plain {best['plain']:.2f} s, observed {best['observed']:.2f} s; "
          f"ratio = observed / plain = {ratio:.3f} (target <= 1.05); mean wall: plain "
          f"{mean['plain']:.2f} s, observed {mean['observed']:.2f} s, ratio "
          f"{mean['observed'] / mean['plain']:.3f}; median of the {len(pairs)} pairs' ratios "
          f"{median_pair:.3f}")
    with open(os.path.join(a.out, "observe_wall.json"), "w") as f:
        json.dump({"epochs": a.epochs, "runs": runs, "best_wall_s": best, "mean_wall_s": mean,
                   "median_pair_ratio": median_pair, "ratio": ratio}, f, indent=1)


if __name__ == "__main__":
    main()
