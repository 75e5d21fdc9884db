"""Watching a run live (docs/observe.md): the dashboard of a running 8-peer quickstart in a real
headless browser while the fault schedule kills two peers, the Prometheus pages of every peer
(C++ and Python) and of the launcher checked by promtool and against summary.json, and what the
servers do with a port in use and with malformed, huge or idle requests."""
import csv
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import EXEC_WORKER, GOSSIP, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = shutil.which("promtool")


def long_config(folder, base_port, epochs):
    """write_config's ring of 4 on synthetic data, with enough rounds (64 an epoch, one
    evaluation each) and a large enough model (a megabyte a message) to be watched while it
    runs: about 3 ms a round here."""
    path = write_config(folder, 4, base_port)
    text = open(path).read().replace("train: 512, test: 128", "train: 4096, test: 128")
    text = text.replace("epochs: 1\n", f"epochs: {epochs}\n")
    text = text.replace("evals_per_epoch: 2", "evals_per_epoch: 1")
    text = text.replace("layers: [16, 12, 10]", "layers: [16, 512, 512, 10]")
    with open(path, "w") as f:
        f.write(text)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_handed_out = []


def free_block(size):
    """A port P with P..P+size-1 free now and apart from the blocks handed out before, below
    the ephemeral range."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(21000, 29400 - size)  # below the quickstart's 29500
        if any(base < b + n and b < base + size for b, n in _handed_out):
            continue
        ok = True
        for p in range(base, base + size):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            _handed_out.append((base, size))
            return base
    pytest.fail("no free block of ports")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def promtool_ok(text, what):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, f"promtool on {what}: {r.stdout}{r.stderr}\n{text[:2000]}"


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


class Run:
    """gossip run in the background; its stdout lines with the time each arrived."""

    def __init__(self, argv):
        self.lines = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=ROOT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_line(self, pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, line in list(self.lines):
                if re.search(pattern, line):
                    return t
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        pytest.fail(f"no line /{pattern}/ in: " + "\n".join(l for _, l in self.lines[-30:]))

    def text(self):
        return "\n".join(l for _, l in self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh --test)")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,900"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def test_dashboard_shows_a_kill_and_the_partition_live(tmp_path):
    """The quickstart with --dashboard: 8 peers and 8 links drawn; the fault schedule kills
    peers 1 and 5 at round 500 and within 3 s their nodes are dead and the two components of
    the live graph, {0, 6, 7} and {2, 3, 4}, are shown; a screenshot goes into the run folder.
    Each peer's and the launcher's /metrics pass promtool meanwhile, and at the end the pages
    agree with summary.json."""
    if PROMTOOL is None:
        pytest.skip("promtool (Debian's prometheus) is not installed")
    driver = browser()
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults:\n  - {round: 500, kill: [1, 5]}\n")
    out = tmp_path / "run"
    port = free_port()
    metrics = free_block(9)
    run = Run([GOSSIP, "run", "configs/quickstart.yaml", "--out", str(out), "--no-progress",
               "--faults", str(faults), "--dashboard", f"127.0.0.1:{port}",
               "--metrics-port", str(metrics)])
    try:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
        run.wait_line(r"dashboard at http://127\.0\.0\.1:%d/" % port, 60)
        driver.get(f"http://127.0.0.1:{port}/")
        wait = WebDriverWait(driver, 60, poll_frequency=0.1)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph .peer")) == 8)
        links = driver.find_elements(By.CSS_SELECTOR, "#graph .link")
        assert sorted((int(l.get_attribute("data-a")), int(l.get_attribute("data-b")))
                      for l in links) == sorted([(i, i + 1) for i in range(7)] + [(0, 7)])
        wait.until(lambda d: all(
            p.get_attribute("data-state") == "alive"
            for p in d.find_elements(By.CSS_SELECTOR, "#graph .peer")))
        # Every page passes promtool while the run goes (the peers are past their setup).
        for r in range(9):
            status, text = get(f"http://127.0.0.1:{metrics + r}/metrics")
            assert status == 200
            promtool_ok(text, f"port {metrics + r}")
        assert 'peer="7"' in text and "gossip_run_round" in text  # the launcher's merge
        killed_at = run.wait_line(r"fault schedule at round 500: kill peers 1", 120)

        def state(d, peer):
            return d.find_element(By.CSS_SELECTOR, f'#graph .peer[data-peer="{peer}"]') \
                .get_attribute("data-state")
        WebDriverWait(driver, 10, poll_frequency=0.05).until(
            lambda d: state(d, 1) == "dead" and state(d, 5) == "dead")
        seen = time.monotonic() - killed_at
        assert seen <= 3.0, f"the dashboard showed the kill after {seen:.1f} s"
        WebDriverWait(driver, 5).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#components .component")) == 2)
        comps = sorted(c.get_attribute("data-peers")
                       for c in driver.find_elements(By.CSS_SELECTOR, "#components .component"))
        assert comps == ["0 6 7", "2 3 4"]
        assert driver.find_element(By.ID, "partition").is_displayed()
        shot = out / "dashboard.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("DASHBOARD_SCREENSHOT"):
            shutil.copy(shot, os.environ["DASHBOARD_SCREENSHOT"])
        assert run.proc.wait(timeout=300) == 0, run.text()
    finally:
        driver.quit()
        run.stop()
    summary = json.load(open(out / "summary.json"))
    merged = (out / "metrics.prom").read_text()
    promtool_ok(merged, "metrics.prom")
    m = samples(merged)
    assert m[("gossip_run_deaths_total", frozenset())] == summary["deaths"] >= 2
    # Every metric is in the docs' tables.
    doc = open(os.path.join(ROOT, "docs", "observe.md")).read()
    for name in re.findall(r"^# TYPE (\S+) ", merged, re.M):
        assert f"| `{name}` |" in doc, f"{name} is missing from docs/observe.md"
    for r in (0, 2, 3, 4, 6, 7):
        mine = json.load(open(out / "peers" / str(r) / "summary.json"))
        page = samples((out / "peers" / str(r) / "metrics.prom").read_text())
        assert page[("gossip_sent_bytes_total", frozenset())] == mine["bytes_sent"]
        assert page[("gossip_rounds_total", frozenset())] == mine["rounds"]
        assert m[("gossip_sent_bytes_total", frozenset({("peer", str(r))}))] == mine["bytes_sent"]
        # Its membership view holds the two killed peers dead.
        for dead in (1, 5):
            assert page[("gossip_member_state",
                          frozenset({("member", str(dead)), ("state", "dead")}))] == 1


def test_python_peers_serve_metrics_that_agree_with_the_summary(tmp_path):
    """gossip run --exec (Python peers over the module) with --metrics-port: each Python peer's
    page passes promtool during the run and its final page equals its summary; the launcher's
    merged page adds up to summary.json's bytes and rounds."""
    if PROMTOOL is None:
        pytest.skip("promtool (Debian's prometheus) is not installed")
    base = free_block(16)
    metrics = free_block(5)
    out = tmp_path / "run"
    config = long_config(str(tmp_path), base, 30)
    run = Run([GOSSIP, "run", config, "--out", str(out), "--no-progress", "--metrics-port",
               str(metrics), "--exec", f"{sys.executable} {EXEC_WORKER} model-exec"])
    scraped = set()
    try:
        end = time.monotonic() + 120
        while run.proc.poll() is None and time.monotonic() < end and len(scraped) < 4:
            for r in range(4):
                if r in scraped:
                    continue
                try:
                    status, text = get(f"http://127.0.0.1:{metrics + r}/metrics", timeout=0.5)
                except OSError:
                    continue
                if "gossip_rounds_total" in text:
                    promtool_ok(text, f"python peer {r}")
                    scraped.add(r)
            time.sleep(0.05)
        assert run.proc.wait(timeout=300) == 0, run.text()
    finally:
        run.stop()
    assert len(scraped) >= 3, f"only Python peers {scraped} answered /metrics during the run"
    summary = json.load(open(out / "summary.json"))
    merged = samples((out / "metrics.prom").read_text())
    total = sum(v for (name, labels), v in merged.items() if name == "gossip_sent_bytes_total")
    assert total == summary["bytes_sent"]
    rounds = {v for (name, labels), v in merged.items() if name == "gossip_rounds_total"}
    assert rounds == {summary["rounds"]}
    assert merged[("gossip_run_deaths_total", frozenset())] == summary["deaths"] == 0


def raw_request(port, data, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks).decode(errors="replace")


def test_bad_requests_and_a_busy_port_leave_the_run_going(tmp_path, base_port):
    """A dashboard port already taken is said and the run goes on without it; on a working
    dashboard, malformed, huge and non-GET requests get a 4xx, and a client that sends nothing
    holds up neither the other requests nor the rounds."""
    config = write_config(str(tmp_path), 4, base_port)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        out = tmp_path / "busy"
        r = subprocess.run([GOSSIP, "run", config, "--out", str(out), "--no-progress",
                            "--dashboard", str(taken.getsockname()[1])],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"--dashboard: cannot listen on 127.0.0.1:{taken.getsockname()[1]}" in r.stderr
        assert "the run goes on without a dashboard" in r.stderr
        assert (out / "summary.json").exists()
    finally:
        taken.close()
    port = free_port()
    out = tmp_path / "run"
    config = long_config(str(tmp_path), base_port + 8, 60)
    run = Run([GOSSIP, "run", config, "--out", str(out), "--no-progress",
               "--dashboard", str(port)])
    try:
        run.wait_line(r"dashboard at http://", 60)
        idle = socket.create_connection(("127.0.0.1", port))  # says nothing
        try:
            assert raw_request(port, b"GARBAGE\r\n\r\n").startswith("HTTP/1.1 400 ")
            assert raw_request(port, b"GET nopath HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 400 ")
            assert raw_request(port, b"POST /state.json HTTP/1.1\r\n\r\n").startswith(
                "HTTP/1.1 405 ")
            huge = b"GET / HTTP/1.1\r\nX-Fill: " + b"a" * 20000 + b"\r\n\r\n"
            assert raw_request(port, huge).startswith("HTTP/1.1 431 ")
            assert raw_request(port, b"GET /nothing-here HTTP/1.1\r\n\r\n").startswith(
                "HTTP/1.1 404 ")
            t = time.monotonic()
            status, body = get(f"http://127.0.0.1:{port}/state.json")
            assert status == 200 and time.monotonic() - t < 2.0
            state = json.loads(body)
            assert state["n"] == 4 and len(state["peers"]) == 4 and len(state["links"]) == 4
            before = state["round"]
            time.sleep(1.5)
            assert json.loads(get(f"http://127.0.0.1:{port}/state.json")[1])["round"] > before \
                or run.proc.poll() is not None
        finally:
            idle.close()
        assert run.proc.wait(timeout=300) == 0, run.text()
    finally:
        run.stop()


def test_nothing_is_served_or_written_when_off(tmp_path, base_port):
    config = write_config(str(tmp_path), 4, base_port)
    out = tmp_path / "plain"
    r = subprocess.run([GOSSIP, "run", config, "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dashboard" not in r.stdout and "Prometheus" not in r.stdout
    assert not (out / "metrics.prom").exists() and not (out / "tensorboard").exists()
    for p in range(4):
        assert not (out / "peers" / str(p) / "metrics.prom").exists()
        assert "Prometheus" not in (out / "peers" / str(p) / "peer.log").read_text()


def test_watch_follows_a_run_folder_as_it_grows(tmp_path, base_port):
    """gossip watch DIR serves the dashboard of a run it did not start, from its files: the
    peers as they train, every merged evaluation of metrics.csv, the end; Ctrl-C stops it with
    exit 0. A folder that is no run folder is refused with exit 2."""
    bad = subprocess.run([GOSSIP, "watch", str(tmp_path)], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "not a run folder" in bad.stderr
    config = long_config(str(tmp_path), base_port, 30)
    out = tmp_path / "run"
    run = Run([GOSSIP, "run", config, "--out", str(out), "--no-progress"])
    port = free_port()
    watch = None
    try:
        run.wait_line(r"peer logs in", 60)
        deadline = time.monotonic() + 30
        while not (out / "peers" / "0" / "events.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        watch = subprocess.Popen([GOSSIP, "watch", str(out), "--dashboard", str(port)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        state = None
        while time.monotonic() < deadline:
            try:
                state = json.loads(get(f"http://127.0.0.1:{port}/state.json", timeout=1)[1])
            except OSError:
                time.sleep(0.1)
                continue
            if any(p["state"] in ("alive", "finished") for p in state["peers"]):
                break
            time.sleep(0.1)
        assert state and state["source"] == "gossip watch" and state["n"] == 4
        assert len(state["links"]) == 4
        assert run.proc.wait(timeout=300) == 0, run.text()
        rounds = sorted({int(r["round"]) for r in csv.DictReader(open(out / "metrics.csv"))})
        while time.monotonic() < deadline + 30:
            state = json.loads(get(f"http://127.0.0.1:{port}/state.json")[1])
            if state["finished"]:
                break
            time.sleep(0.1)
        assert state["finished"]
        assert [p["state"] for p in state["peers"]] == ["finished"] * 4
        assert [s["round"] for s in state["series"]] == rounds
        summary = json.load(open(out / "summary.json"))
        assert state["series"][-1]["accuracy"] == pytest.approx(summary["test_accuracy"])
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == 0
    finally:
        run.stop()
        if watch and watch.poll() is None:
            watch.kill()
            watch.wait()
