"""The dashboard page (web/) in a real headless browser: web/ and a mock state.json served by
Python's http.server, the page driven by selenium with Debian's chromium and chromedriver.

Run: /usr/bin/python3 -m pytest -q tests/python/test_dashboard_page.py
Set DASHBOARD_SCREENSHOT=/path/to/file.png to keep a copy of the screenshot (for the docs)."""
import functools
import http.server
import json
import math
import os
import shutil
import tempfile
import threading

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEB = os.path.join(ROOT, "web")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("needs /usr/bin/chromium and /usr/bin/chromedriver", allow_module_level=True)

N = 8
PHASES = ["setup", "compute", "compress", "send", "wait", "mix", "evaluate", "checkpoint", "monitor",
          "finish"]


def mock_state(partitioned):
    """A ring of 8 peers under `gossip run`; partitioned: peers 1 and 5 dead, so the live graph is
    {2, 3, 4} and {6, 7, 0}."""
    dead = {1, 5} if partitioned else set()
    components = [[0, 6, 7], [2, 3, 4]] if partitioned else [list(range(N))]
    comp_of = {p: i for i, c in enumerate(components) for p in c}
    rnd = 240 if partitioned else 200
    peers = []
    for i in range(N):
        state = "dead" if i in dead else "alive"
        if i == 3 and not partitioned:
            state = "suspect"
        phases = {k: 0.0 for k in PHASES}
        phases.update(setup=0.4, compute=2.0 + 0.15 * i, compress=0.05, send=0.12 + 0.01 * i,
                      wait=0.3 + 0.08 * ((i * 5) % 8), mix=0.25, evaluate=0.6, checkpoint=0.05,
                      monitor=0.03, encrypt=0.2)
        peers.append({
            "id": i, "state": state, "component": None if i in dead else comp_of[i],
            "byzantine": partitioned and i == 3, "cut": False,
            "round": (150 if i in dead else rnd + (i % 3)),
            "accuracy": 0.78 + 0.01 * (i % 4), "loss": 0.61 - 0.01 * i, "bytes_sent": 1_250_000 * (i + 1),
            "phases": phases,
        })
    links = []
    for i in range(N):
        a, b = sorted((i, (i + 1) % N))
        up = a not in dead and b not in dead
        links.append({"a": a, "b": b, "weight": 1 / 3, "bytes_per_s": (2000.0 * 3 ** (i % 5)) if up else 0.0,
                      "up": up})
    series = []
    for k in range(1, rnd // 10 + 1):
        r = 10 * k
        acc = 0.1 + 0.75 * (1 - math.exp(-r / 60))
        series.append({"round": r, "seconds": round(0.05 * r, 2), "epoch": r / 936 * 4,
                       "accuracy": None if k == 3 else acc, "accuracy_min": acc - 0.06 * math.exp(-r / 200) - 0.01,
                       "accuracy_max": acc + 0.02, "loss": 2.3 * math.exp(-r / 70) + 0.45,
                       "consensus_distance": 0.2 * math.exp(-r / 40) + 2e-4 * (1 + 0.3 * math.sin(r))})
    events = [
        {"seconds": 0.4, "round": 0, "peer": -1, "event": "started", "subject": -1, "text": "launcher started 8 peers"},
        {"seconds": 6.1, "round": 121, "peer": 2, "event": "suspect", "subject": 3,
         "text": "peer 2 suspects peer 3 (missed a round)"},
        {"seconds": 6.4, "round": 127, "peer": 2, "event": "alive", "subject": 3, "text": "peer 3 is back (incarnation 1)"},
    ]
    if partitioned:
        events += [
            {"seconds": 9.8, "round": 196, "peer": 4, "event": "byzantine_suspect", "subject": 3,
             "text": "peer 4 suspects peer 3 of lying"},
            {"seconds": 10.2, "round": 205, "peer": -1, "event": "fault", "subject": 1, "text": "launcher killed peer 1"},
            {"seconds": 10.3, "round": 205, "peer": -1, "event": "fault", "subject": 5, "text": "launcher killed peer 5"},
            {"seconds": 11.0, "round": 214, "peer": 0, "event": "dead", "subject": 1, "text": "peer 0 holds peer 1 dead"},
            {"seconds": 11.1, "round": 214, "peer": 6, "event": "dead", "subject": 5, "text": "peer 6 holds peer 5 dead"},
            {"seconds": 11.1, "round": 214, "peer": 6, "event": "partition", "subject": -1,
             "text": "live graph partitioned: {0,6,7} {2,3,4}"},
        ]
    events.reverse()  # newest first
    return {
        "source": "gossip run", "out": "runs/quickstart", "topology": "topologies/ring-8.yaml",
        "algorithm": "dpsgd", "n": N, "round": rnd, "rounds": 936, "elapsed_s": 0.05 * rnd,
        "eta_s": 0.05 * (936 - rnd), "finished": False, "connected": not partitioned,
        "components": components, "peers": peers, "links": links, "series": series, "events": events,
    }


def write_state(folder, state):
    tmp = os.path.join(folder, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(folder, "state.json"))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    with tempfile.TemporaryDirectory() as folder:
        for name in ("index.html", "app.js", "style.css"):
            shutil.copy(os.path.join(WEB, name), folder)
        write_state(folder, mock_state(partitioned=False))
        handler = functools.partial(QuietHandler, directory=folder)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        # The viewport itself 1280x900 (--window-size counts the window, not the page).
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


def states(driver):
    return {int(e.get_attribute("data-peer")): e.get_attribute("data-state")
            for e in driver.find_elements(By.CSS_SELECTOR, "#graph .peer")}


def test_dashboard_page(site, browser):
    folder, url = site
    browser.get(url)
    wait = WebDriverWait(browser, 5, poll_frequency=0.1)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-updates") not in (None, "", "0"))

    # The first state: a connected ring.
    first = mock_state(partitioned=False)
    assert states(browser) == {p["id"]: p["state"] for p in first["peers"]}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .peer")) == N
    links = browser.find_elements(By.CSS_SELECTOR, "#graph .link")
    assert len(links) == N
    assert {(int(e.get_attribute("data-a")), int(e.get_attribute("data-b"))) for e in links} == \
        {tuple(sorted((i, (i + 1) % N))) for i in range(N)}
    assert all(e.get_attribute("data-up") == "true" for e in links)
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-round") == "200"
    assert not browser.find_element(By.ID, "partition").is_displayed()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#components .component")) == 1
    for chart in ("chart-accuracy", "chart-loss", "chart-consensus"):
        assert browser.find_elements(By.CSS_SELECTOR, f"#{chart} path.series"), chart
    assert len(browser.find_elements(By.CSS_SELECTOR, "#peer-table tbody tr")) == N
    assert len(browser.find_elements(By.CSS_SELECTOR, "#phases .phase-row")) == N
    assert "peer 2 suspects peer 3" in browser.find_element(By.ID, "events").text

    # Peers 1 and 5 die: the ring splits into {2, 3, 4} and {6, 7, 0}.
    write_state(folder, mock_state(partitioned=True))
    quick = WebDriverWait(browser, 3, poll_frequency=0.1)
    quick.until(lambda d: states(d).get(1) == "dead" and states(d).get(5) == "dead")
    quick.until(lambda d: d.find_element(By.ID, "partition").is_displayed())
    assert "2 components" in browser.find_element(By.ID, "partition").text
    quick.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#components .component")) == 2)
    quick.until(lambda d: "peer 0 holds peer 1 dead" in d.find_element(By.ID, "events").text)
    comps = sorted(e.get_attribute("data-peers") for e in browser.find_elements(By.CSS_SELECTOR, "#components .component"))
    assert comps == ["0 6 7", "2 3 4"]
    node = {int(e.get_attribute("data-peer")): e for e in browser.find_elements(By.CSS_SELECTOR, "#graph .peer")}
    assert node[1].get_attribute("data-component") == ""
    assert node[2].get_attribute("data-component") == "1"
    assert node[7].get_attribute("data-component") == "0"
    down = {(e.get_attribute("data-a"), e.get_attribute("data-b")) for e in
            browser.find_elements(By.CSS_SELECTOR, "#graph .link[data-up='false']")}
    assert down == {("0", "1"), ("1", "2"), ("4", "5"), ("5", "6")}
    first_row = browser.find_element(By.CSS_SELECTOR, "#events tbody tr")
    assert first_row.get_attribute("data-event") == "partition"

    # The x axis toggle redraws the charts over seconds.
    browser.find_element(By.CSS_SELECTOR, "#x-axis button[data-x='seconds']").click()
    quick.until(lambda d: "seconds" in d.find_element(By.ID, "chart-loss").text)

    # Losing the server shows the banner; the page keeps polling and recovers.
    os.remove(os.path.join(folder, "state.json"))
    quick.until(lambda d: d.find_element(By.ID, "lost").is_displayed())
    write_state(folder, mock_state(partitioned=True))
    quick.until(lambda d: not d.find_element(By.ID, "lost").is_displayed())

    browser.find_element(By.CSS_SELECTOR, "#x-axis button[data-x='round']").click()
    quick.until(lambda d: "round" in d.find_element(By.ID, "chart-loss").text)
    shot = os.path.join(folder, "dashboard.png")
    assert browser.save_screenshot(shot)
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(shot) > 10_000
    if os.environ.get("DASHBOARD_SCREENSHOT"):
        shutil.copy(shot, os.environ["DASHBOARD_SCREENSHOT"])

    logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"
            and "state.json" not in e.get("message", "")]
    assert not logs, logs
