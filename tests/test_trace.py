"""Where a round's time goes: `gossip run` on a small synthetic config writes each peer's
timeline to DIR/peers/R/trace.json in the Chrome trace event format, and `gossip sim` writes the
same from its simulated clock. Checked here, for both:

  - the file parses as JSON, with a process_name event and complete ("X") events of one pid;
  - every phase span inside a round lies within that round's span, the phase spans of a round
    do not overlap, and they add up to the round's length;
  - the spans outside rounds (setup, evaluate, monitor, finish, ...) and the rounds do not
    overlap, and for a real peer they add up to its wall time (summary.json) within 5% or
    SLACK_S, whichever is more (a peer preempted between two spans on a loaded machine loses a
    scheduler slice, a few ms, that no span can hold; a run here lasts well under a second);
  - summary.json gives the seconds and shares of each phase, and the final table shows them;
  - encrypt, the transport thread's sealing and opening of TLS records, is a track of its own
    (thread 1): its spans do not overlap, lie within the peer's wall time and add up to its
    `encrypt` seconds; with parameters over TLS (shared memory off) every peer has some.
"""
import json
import os
import shutil
import tempfile

from gossip_test import GOSSIP, Checks, run, summary, write_config

PEERS = 4
PHASES = ["setup", "compute", "compress", "send", "wait", "mix", "evaluate", "checkpoint",
          "monitor", "finish"]
ALL_PHASES = PHASES + ["encrypt"]  # encrypt runs beside the others, on the transport's thread
EPS_US = 0.002  # the trace's microseconds are rounded to the nanosecond
SLACK_S = 0.010  # wall time outside every span that preemption alone may explain


def check_trace(t, path, peer, wall_seconds, label, encrypt_seconds=None):
    with open(path) as f:
        try:
            trace = json.load(f)
        except ValueError as e:
            t.check(False, f"{label}: trace.json parses as JSON", str(e))
            return
    events = trace.get("traceEvents", [])
    meta = [e for e in events if e.get("ph") == "M"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0]
    enc = sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == 1),
                 key=lambda e: e["ts"])
    others = [e for e in events if e.get("ph") == "X" and e.get("tid") not in (0, 1)]
    t.check(not others, f"{label}: every span is on thread 0 (rounds) or 1 (encrypt)", others[:3])
    t.check(any(e.get("name") == "thread_name" and e.get("tid") == 1 for e in meta),
            f"{label}: the trace names thread 1, the encrypt track", meta)
    t.check(any(e.get("name") == "process_name" and e["args"]["name"] == f"peer {peer}"
                for e in meta), f"{label}: the trace names its process 'peer {peer}'", meta)
    t.check(spans and all(e["pid"] == peer and e["dur"] >= 0 for e in spans),
            f"{label}: {len(spans)} complete events, all of pid {peer}, none of negative length")
    t.check(all(e["name"] in PHASES or e["cat"] == "round" for e in spans),
            f"{label}: every span is a round or one of the phases {PHASES}",
            sorted({e["name"] for e in spans}))
    rounds = {e["args"]["round"]: e for e in spans if e["cat"] == "round"}
    inner = {}
    for e in spans:
        if e["cat"] != "round" and e["args"]["round"] >= 0:
            inner.setdefault(e["args"]["round"], []).append(e)
    t.check(len(rounds) > 0 and set(inner) <= set(rounds),
            f"{label}: {len(rounds)} rounds, and every phase span of a round has its round span")
    outside, bad_nest, bad_sum, overlaps = 0, [], [], []
    for r, box in rounds.items():
        kids = sorted(inner.get(r, []), key=lambda e: e["ts"])
        start, end = box["ts"], box["ts"] + box["dur"]
        for k in kids:
            if k["ts"] < start - EPS_US or k["ts"] + k["dur"] > end + EPS_US:
                bad_nest.append((r, k["name"], k["ts"], k["dur"], start, end))
        for a, b in zip(kids, kids[1:]):
            if a["ts"] + a["dur"] > b["ts"] + EPS_US:
                overlaps.append((r, a["name"], b["name"]))
        total = sum(k["dur"] for k in kids)
        if abs(total - box["dur"]) > max(1.0, 1e-6 * box["dur"]):
            bad_sum.append((r, total, box["dur"]))
    t.check(not bad_nest, f"{label}: every phase span lies within its round's span", bad_nest[:5])
    t.check(not overlaps, f"{label}: a round's phase spans do not overlap", overlaps[:5])
    t.check(not bad_sum, f"{label}: a round's phase spans add up to its length", bad_sum[:5])
    top = sorted([e for e in spans if e["cat"] == "round" or e["args"]["round"] < 0],
                 key=lambda e: e["ts"])
    top_overlaps = [(a["name"], b["name"]) for a, b in zip(top, top[1:])
                    if a["ts"] + a["dur"] > b["ts"] + EPS_US]
    t.check(not top_overlaps, f"{label}: rounds and the spans between them do not overlap",
            top_overlaps[:5])
    t.check(all(e["name"] == "encrypt" and e["dur"] >= 0 for e in enc),
            f"{label}: thread 1 holds {len(enc)} encrypt spans", enc[:3])
    enc_overlaps = [(a["ts"], b["ts"]) for a, b in zip(enc, enc[1:])
                    if a["ts"] + a["dur"] > b["ts"] + EPS_US]
    t.check(not enc_overlaps, f"{label}: encrypt spans do not overlap", enc_overlaps[:5])
    if encrypt_seconds is not None:
        total = sum(e["dur"] for e in enc) / 1e6
        t.check(abs(total - encrypt_seconds) <= 1e-6 * (len(enc) + 1) + 1e-9 * encrypt_seconds,
                f"{label}: the encrypt spans add up to summary.json's encrypt seconds "
                f"({total:.6f} s, {encrypt_seconds:.6f} s)")
    if wall_seconds is not None and enc and top:
        t.check(enc[0]["ts"] >= top[0]["ts"] - EPS_US and
                enc[-1]["ts"] + enc[-1]["dur"] <= top[-1]["ts"] + top[-1]["dur"] + 1e3,
                f"{label}: the encrypt spans lie within the peer's timeline")
    if wall_seconds is not None:
        covered = sum(e["dur"] for e in top) / 1e6
        gaps = sorted(((b["ts"] - a["ts"] - a["dur"]) / 1e3, a["name"], b["name"])
                      for a, b in zip(top, top[1:]))[-3:]
        t.check(abs(covered - wall_seconds) <= max(0.05 * wall_seconds, SLACK_S),
                f"{label}: the spans add up to the peer's wall time within 5% or "
                f"{SLACK_S * 1e3:.0f} ms "
                f"({covered:.3f} s of {wall_seconds:.3f} s)",
                f"largest gaps (ms, after, before): {gaps}; first span at {top[0]['ts']} us")


def check_summary(t, s, label):
    phases = s.get("phases_s", {})
    shares = s.get("phase_shares", {})
    t.check(list(phases) == ALL_PHASES and all(v >= 0 for v in phases.values()),
            f"{label}: summary.json gives the seconds of every phase", phases)
    t.check(abs(sum(shares[p] for p in PHASES) - 1.0) < 1e-6 and phases["compute"] > 0,
            f"{label}: the wall phases' shares add up to 1, and some time went to compute",
            shares)
    wall = sum(phases[p] for p in PHASES)
    t.check(wall > 0 and abs(shares["encrypt"] - phases["encrypt"] / wall) < 1e-9,
            f"{label}: encrypt's share is of the same wall time", shares)


def main():
    t = Checks("trace")
    tmp = tempfile.mkdtemp(prefix="gossip-trace-")
    try:
        cfg = write_config(tmp, PEERS, epochs=3)
        out = os.path.join(tmp, "run")
        code, log = run([GOSSIP, "run", cfg, "--out", out, "--no-progress"], 300)
        t.check(code == 0, "gossip run exits 0", log[-3000:])
        t.check("where the time went" in log and " compute " in log,
                "the final table shows where the time went", log[-2000:])
        check_summary(t, summary(out), "run")
        for r in range(PEERS):
            folder = os.path.join(out, "peers", str(r))
            path = os.path.join(folder, "trace.json")
            if not t.check(os.path.exists(path), f"peer {r} wrote DIR/peers/{r}/trace.json"):
                continue
            peer = summary(folder)
            check_trace(t, path, r, peer["wall_seconds"], f"run peer {r}",
                        peer["phases_s"]["encrypt"])

        # Parameters over TLS records (shared memory off): every peer spends time sealing and
        # opening them, and the table and traces show it.
        with open(cfg) as f:
            text = f.read()
        tls_cfg = os.path.join(tmp, "tls.yaml")
        with open(tls_cfg, "w") as f:
            f.write(text.replace("net: {run_id: launchers,",
                                 "net: {run_id: launchers, shared_memory: false,"))
        out = os.path.join(tmp, "run-tls")
        code, log = run([GOSSIP, "run", tls_cfg, "--out", out, "--no-progress", "--epochs", "1"],
                        300)
        t.check(code == 0, "gossip run with shared memory off exits 0", log[-3000:])
        t.check(" encrypt" in log and "TLS records" in log,
                "its final table has the encrypt column and says what it is", log[-2000:])
        for r in range(PEERS):
            folder = os.path.join(out, "peers", str(r))
            peer = summary(folder)
            enc = peer["phases_s"]["encrypt"]
            t.check(0 < enc < peer["wall_seconds"],
                    f"peer {r} over TLS records: {enc:.4f} s sealing and opening of "
                    f"{peer['wall_seconds']:.3f} s")
            check_trace(t, os.path.join(folder, "trace.json"), r, peer["wall_seconds"],
                        f"TLS run peer {r}", enc)

        sim = os.path.join(tmp, "sim")
        code, log = run([GOSSIP, "sim", cfg, "--out", sim], 300)
        t.check(code == 0, "gossip sim exits 0", log[-3000:])
        t.check("where the simulated time went" in log, "gossip sim's table shows it too", log)
        check_summary(t, summary(sim), "sim")
        for r in range(PEERS):
            path = os.path.join(sim, "peers", str(r), "trace.json")
            if t.check(os.path.exists(path), f"gossip sim wrote DIR/peers/{r}/trace.json"):
                check_trace(t, path, r, None, f"sim peer {r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
