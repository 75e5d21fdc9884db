#!/usr/bin/env python3
"""The incumbents' round times around each membership change of an elastic `gossip run`, against
their steady rounds, and how often ordinary rounds of the same run stray as far.

    gossip run configs/elastic-exp-16.yaml --out runs/elastic-real
    python3 bench/elastic_rounds.py runs/elastic-real [--json FILE]

For each change of summary.json's `membership_timeline` and each incumbent (a member before and
after it, with a trace), from peers/R/trace.json (each round's span, its evaluation taken out):
  mean   the mean of the 6 rounds around the change (3 before its round, 3 from it) over the
         incumbent's median round from 10 to 90 rounds after it (its steady round then)
  worst  the longest of those 6 rounds over the same median
and, for reference, the same `worst` over every 6-round window of every peer's run (median,
90th and 99th percentile): how far ordinary rounds stray on this machine.
"""
import argparse
import json
import os
import statistics
import sys

WINDOW_BEFORE, WINDOW_AFTER = 3, 3
STEADY_FROM, STEADY_TO = 10, 90


def round_spans(trace_path):
    """Milliseconds each round took on the peer's main thread, its evaluation taken out."""
    with open(trace_path) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    rounds, evaluations = {}, {}
    for e in events:
        if e.get("tid") != 0 or "dur" not in e:
            continue
        r = e.get("args", {}).get("round")
        if e.get("cat") == "round":
            rounds[r] = e["dur"] / 1000.0
        elif e.get("name") == "evaluate":
            evaluations[r] = evaluations.get(r, 0.0) + e["dur"] / 1000.0
    for r, ms in evaluations.items():
        if r in rounds:
            rounds[r] = max(0.0, rounds[r] - ms)
    return rounds


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a gossip run --out folder of an elastic run")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    summary_path = os.path.join(args.run, "summary.json")
    try:
        with open(summary_path) as f:
            timeline = json.load(f)["membership_timeline"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"elastic_rounds: {summary_path}: no membership timeline ({e}); is it an "
                 "elastic gossip run's folder?")
    spans = {}
    peers_dir = os.path.join(args.run, "peers")
    for name in sorted(os.listdir(peers_dir)):
        trace = os.path.join(peers_dir, name, "trace.json")
        if name.isdigit() and os.path.exists(trace):
            spans[int(name)] = round_spans(trace)
    out = {"changes": []}
    print("| round | change | incumbents | mean of 6 rounds / steady | longest of 6 / steady |")
    print("|---:|---|---:|---|---|")
    for i, change in enumerate(timeline[1:], 1):
        at = change["round"]
        until = timeline[i + 1]["round"] if i + 1 < len(timeline) else float("inf")
        incumbents = [p for p in timeline[i - 1]["members"]
                      if p in change["members"] and p in spans]
        means, worsts = [], []
        for p in incumbents:
            d = spans[p]
            steady = [d[k] for k in range(at + STEADY_FROM, int(min(at + STEADY_TO, until)))
                      if k in d]
            window = [d[k] for k in range(at - WINDOW_BEFORE, at + WINDOW_AFTER) if k in d]
            if not steady or not window:
                continue
            median = statistics.median(steady)
            means.append(statistics.mean(window) / median)
            worsts.append(max(window) / median)
        what = ", ".join(f"{k} {change[k]}" for k in ("joined", "left", "dead") if change.get(k))
        if not means:
            print(f"| {at} | {what} | 0 | - | - |")
            continue
        print(f"| {at} | {what} | {len(means)} | {min(means):.2f}-{max(means):.2f}x "
              f"| {min(worsts):.2f}-{max(worsts):.2f}x |")
        out["changes"].append({"round": at, "change": what, "mean_ratio": [min(means), max(means)],
                               "worst_ratio": [min(worsts), max(worsts)]})
    background = []
    for d in spans.values():
        ks = sorted(k for k in d if k is not None and k >= 0)
        for j in range(20, len(ks) - STEADY_TO, WINDOW_BEFORE + WINDOW_AFTER):
            window = [d[k] for k in ks[j:j + WINDOW_BEFORE + WINDOW_AFTER]]
            steady = [d[k] for k in ks[j + STEADY_FROM:j + STEADY_TO]]
            background.append(max(window) / statistics.median(steady))
    background.sort()
    if background:
        b = {q: percentile(background, q) for q in (0.5, 0.9, 0.99)}
        print(f"\nordinary 6-round windows ({len(background)}): the longest round over the steady "
              f"median is {b[0.5]:.2f}x (median), {b[0.9]:.2f}x (90th percentile), "
              f"{b[0.99]:.2f}x (99th)")
        out["background_worst_ratio"] = {"p50": b[0.5], "p90": b[0.9], "p99": b[0.99]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
