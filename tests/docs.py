"""README.md cannot drift: every shell block in it fenced as ```sh runnable runs as written, and
README stays a front door of at most 300 lines.

Each runnable block runs with `bash -euo pipefail -c BLOCK`, `gossip` on the PATH being the binary
under test (GOSSIP_BIN; else BUILD/src/cli/gossip for a build folder given as the first
argument), from a scratch folder that mirrors the repository: every top-level entry of the
repository is a symbolic link there, except `runs/` (and build and output folders), which is a
fresh empty folder. So a block's `--out runs/...` lands in the scratch folder, never in the
checkout's own runs/, and the whole folder is removed at the end (kept when GOSSIP_DOCS_KEEP is
set, and its path printed). Nothing is rewritten: the blocks README marks runnable use configs
small enough to finish in seconds (the quickstart, 8 peers for 4 epochs, being the longest), and
README says what the longer runs reach.

The test fails when a block exits non-zero or runs past its time (TIMEOUT_S; its whole process
group is then killed), when README holds no runnable block, and when README is longer than
MAX_LINES. It prints `ok:` or `FAILED:` per check, with the block's first line and its seconds,
the output's tail on failure, and ends with the "N passed, N failed" line that
scripts/count_tests.py reads.

Usage: GOSSIP_BIN=build/src/cli/gossip python3 tests/docs.py   (meson test docs)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MAX_LINES = 300
TIMEOUT_S = 150  # per block; the quickstart takes 12-50 s on a loaded 2-core machine
TAIL_LINES = 60  # of a failed block's output

SOURCE = os.environ.get("GOSSIP_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
# Top-level entries of the repository that are not linked into the scratch folder.
NOT_LINKED = re.compile(r"^(runs|build.*|out.*|\.git)$")

FENCE = re.compile(r"^(`{3,})\s*([^`]*)$")


def runnable_blocks(text):
    """(line number of the opening fence, the block's text) for every fenced block whose info
    string is `sh runnable`. Other blocks, and lines outside fences, are skipped."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, info = m.group(1), m.group(2).split()
        start = i
        i += 1
        body = []
        while i < len(lines) and not re.match(rf"^{ticks}`*\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end of the file: an unclosed block is still checked)
        if info[:1] == ["sh"] and "runnable" in info[1:]:
            blocks.append((start + 1, "\n".join(body) + "\n"))
    return blocks


def first_line(block):
    for line in block.splitlines():
        if line.strip():
            return line.strip()
    return "(empty block)"


def make_scratch(root, gossip):
    """The scratch repository (links to every top-level entry but runs/ and builds) and a bin/
    folder whose `gossip` is the binary under test. Returns (repository folder, bin folder)."""
    repo = os.path.join(root, "repo")
    bindir = os.path.join(root, "bin")
    os.makedirs(os.path.join(repo, "runs"))
    os.makedirs(bindir)
    for name in sorted(os.listdir(SOURCE)):
        if NOT_LINKED.match(name):
            continue
        os.symlink(os.path.join(SOURCE, name), os.path.join(repo, name))
    os.symlink(gossip, os.path.join(bindir, "gossip"))
    return repo, bindir


def run_block(block, cwd, env):
    """Runs one block in its own process group; returns (exit code, output, seconds). A block
    still running after TIMEOUT_S is killed with everything it started and reads as 124."""
    start = time.monotonic()
    p = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TIMEOUT_S)
        code = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = p.communicate()
        out += f"\n(killed after {TIMEOUT_S} s)"
        code = 124
    return code, out, time.monotonic() - start


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok: {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAILED: {what}", flush=True)
            if detail:
                print("  " + detail.rstrip().replace("\n", "\n  "), flush=True)
        return ok


def check_summary_fields(t, runs):
    """Every field of every summary.json the blocks wrote (gossip run's, its peers', gossip
    sim's, gossip compare's runs) is documented in docs/outputs.md, as `name`."""
    with open(os.path.join(SOURCE, "docs", "outputs.md")) as f:
        outputs = f.read()
    found = {}
    for folder, _, files in os.walk(runs):
        if "summary.json" in files:
            path = os.path.join(folder, "summary.json")
            with open(path) as f:
                for key in json.load(f):
                    found.setdefault(key, os.path.relpath(path, runs))
    t.check(len(found) > 0, f"the blocks wrote summary.json files ({len(found)} fields)")
    missing = sorted(k for k in found if f"`{k}`" not in outputs)
    t.check(not missing, "every summary.json field is documented in docs/outputs.md",
            "\n".join(f"{k} (in runs/{found[k]})" for k in missing))


def main():
    t = Checks()
    gossip = os.environ.get("GOSSIP_BIN", "")
    if not gossip and len(sys.argv) > 1:
        gossip = os.path.join(sys.argv[1], "src", "cli", "gossip")
    gossip = os.path.abspath(gossip) if gossip else ""
    readme_path = os.path.join(SOURCE, "README.md")
    with open(readme_path) as f:
        readme = f.read()

    lines = len(readme.splitlines())
    t.check(lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES})")
    blocks = runnable_blocks(readme)
    t.check(len(blocks) > 0, f"README.md has runnable blocks ({len(blocks)})",
            "no block fenced as ```sh runnable")
    if not (gossip and os.access(gossip, os.X_OK)):
        t.check(False, "the gossip binary under test is executable",
                f"GOSSIP_BIN={gossip or '(unset)'}; give GOSSIP_BIN or the build folder")
        print(f"{t.passed} passed, {t.failed} failed")
        return 1

    root = tempfile.mkdtemp(prefix="gossip-docs-")
    try:
        repo, bindir = make_scratch(root, gossip)
        env = dict(os.environ)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        total = time.monotonic()
        for line_no, block in blocks:
            code, out, seconds = run_block(block, repo, env)
            tail = "\n".join(out.rstrip().splitlines()[-TAIL_LINES:])
            t.check(code == 0,
                    f"README.md:{line_no}: `{first_line(block)}` ({seconds:.1f} s)",
                    f"exit code {code}; the block:\n{block}last {TAIL_LINES} lines of its "
                    f"output:\n{tail}")
        print(f"all blocks: {time.monotonic() - total:.1f} s")
        check_summary_fields(t, os.path.join(repo, "runs"))
    finally:
        if os.environ.get("GOSSIP_DOCS_KEEP"):
            print(f"scratch folder kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed or not t.passed else 0


if __name__ == "__main__":
    sys.exit(main())
