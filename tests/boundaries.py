"""The room boundaries of DESIGN.md, checked on the build itself.

For every room, takes the compile command of one of its own sources from compile_commands.json
(the room's real flags), swaps in a one-line probe, and checks that
  1. the rooms it may see (its -DGOSSIP_ROOM_* flags) all lie below it in DESIGN.md's order;
  2. each public header (include/gossip/*.hpp) preprocesses exactly when its room is one of
     those, and each private header (src/<room>/*.hpp) is refused outside them and builds in its
     own room: a reach to any other room stops with an #error;
  3. each third-party library's headers preprocess only in the rooms DESIGN.md gives it;
  4. whole compiles of the issue's own probes: <asio.hpp> from src/gossip fails with the message
     naming src/net, and compiles from src/net; "gossip/net.hpp" fails from src/gossip and
     compiles from src/peer.
Usage: boundaries.py BUILD_DIR. Prints one line per failed check and ends with
"N passed, N failed"; exits 1 when any check failed.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# DESIGN.md's modules, top to bottom: a room may use only rooms below it. bench/ (benchmarks) and
# cli sit on top.
ORDER = ["cli", "bench", "launcher", "peer", "sim", "faults", "gossip", "monitor", "net", "wire",
         "train", "model", "data", "compute", "topology", "config", "report", "web", "core"]
# web/ (the dashboard's page, embedded at build time) is a room of its own, used by the launcher.
FOLDER = {"sim": "sim", "bench": "bench", "web": "web"}
# Third-party libraries (a header to probe) and the only rooms that may include them. The
# benchmarks call bare OpenBLAS as their outside reference.
THIRD_PARTY = {
    "asio": ("asio.hpp", {"net"}),
    "openssl": ("openssl/ssl.h", {"net"}),
    "yaml-cpp": ("yaml-cpp/yaml.h", {"config"}),
    "eigen": ("Eigen/Dense", {"topology"}),
    "cereal": ("cereal/archives/binary.hpp", {"wire"}),
    "openblas": ("cblas.h", {"compute", "bench"}),
    "onednn": ("dnnl.h", {"compute"}),
    "openmp": ("omp.h", {"compute"}),
    "zlib": ("zlib.h", {"data"}),
    "cuda": ("cuda_runtime.h", set()),  # only src/compute/cuda, which is compiled by nvcc
}
GUARD = re.compile(r"#if !defined\(GOSSIP_ROOM_([A-Z]+)\)")


def room_commands(build, source_root):
    """room -> (argv, directory) of a C++ compile of one of the room's own sources."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    out = {}
    for e in entries:
        src = os.path.relpath(os.path.join(e["directory"], e["file"]), source_root)
        if not src.endswith(".cpp"):
            continue
        parts = src.split(os.sep)
        if parts[0] == "src" and len(parts) == 3:
            room = parts[1]
        elif parts[0] in ("sim", "bench", "web") and len(parts) == 2:
            room = parts[0]
        else:
            continue
        if room not in out:
            argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            out[room] = (argv, e["directory"], e["file"])
    return out


def probe_argv(argv, source, probe, mode):
    """The room's command with `probe` in place of `source`: preprocess only, or syntax only."""
    args, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a == source:
            continue
        args.append(a)
    return args + ["-fdiagnostics-color=never", mode, probe] + (
        ["-o", os.devnull] if mode == "-E" else [])


def run(argv, cwd):
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return p.returncode == 0, p.stderr


def headers(source_root):
    """(include spelling, room) of every guarded header of the project."""
    found = []
    for d, _, files in os.walk(source_root):
        rel = os.path.relpath(d, source_root)
        if rel.startswith(("build", ".git", "tools", "tests", "fuzz")):
            continue
        for name in files:
            if not name.endswith(".hpp"):
                continue
            path = os.path.join(d, name)
            with open(path) as f:
                m = GUARD.search(f.read())
            if not m:
                continue
            spelled = os.path.relpath(path, source_root)
            if spelled.startswith("include" + os.sep):
                spelled = spelled[len("include" + os.sep):]
            found.append((spelled, m.group(1).lower()))
    return sorted(found)


def main():
    build = os.path.abspath(sys.argv[1])
    source_root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    commands = room_commands(build, source_root)
    failures = []
    expected_rooms = set(ORDER) - {"cli"}
    missing = expected_rooms - set(commands)
    if missing:
        failures.append(("direction", f"no compile command for rooms {sorted(missing)}"))

    tmp = tempfile.mkdtemp(prefix="boundaries-")
    checks = []  # (group, description, argv, cwd, should_pass, expected message in stderr or None)
    for room, (argv, cwd, source) in sorted(commands.items()):
        visible = {m.lower() for m in re.findall(r"-DGOSSIP_ROOM_([A-Z]+)", " ".join(argv))}
        below = set(ORDER[ORDER.index(room):])
        if not visible <= below:
            failures.append(("direction",
                             f"{room} sees rooms above it in DESIGN.md: {sorted(visible - below)}"))
        for spelled, owner in headers(source_root):
            # Another room's private header may carry that room's third-party library (net's
            # session.hpp includes Asio), so only its refusal outside the owner's users is checked.
            if owner in visible and owner != room and not spelled.startswith("gossip/"):
                continue
            probe = os.path.join(tmp, f"{room}-{spelled.replace('/', '_')}.cpp")
            with open(probe, "w") as f:
                f.write(f'#include "{spelled}"\n')
            checks.append(("project headers", f"{room} includes {spelled} (room {owner})",
                           probe_argv(argv, source, probe, "-E"), cwd, owner in visible,
                           None if owner in visible else f"belongs to room {owner}"))
        for lib, (header, allowed) in THIRD_PARTY.items():
            probe = os.path.join(tmp, f"{room}-{lib}.cpp")
            with open(probe, "w") as f:
                f.write(f"#include <{header}>\n")
            checks.append(("third-party headers", f"{room} includes <{header}>", probe_argv(argv, source, probe, "-E"),
                           cwd, room in allowed, None if room in allowed else "belongs to src/"))
    # The issue's own probes, compiled (not only preprocessed) with the rooms' flags.
    for room, text, ok, message in [
            ("gossip", "#include <asio.hpp>\nint probe() { return 0; }\n", False,
             "Asio belongs to src/net only"),
            ("net", "#include <asio.hpp>\nint probe() { asio::io_context io; return 0; }\n", True,
             None),
            ("gossip", '#include "gossip/net.hpp"\nint probe() { return 0; }\n', False,
             "gossip/net.hpp belongs to room net"),
            ("peer", '#include "gossip/net.hpp"\nint probe() { return sizeof(gossip::NetConfig); }\n',
             True, None)]:
        if room not in commands:
            continue
        argv, cwd, source = commands[room]
        probe = os.path.join(tmp, f"compile-{room}-{len(checks)}.cpp")
        with open(probe, "w") as f:
            f.write(text)
        checks.append(("compiled probes", f"compiling a probe in {room}: {text.splitlines()[0]}",
                       probe_argv(argv, source, probe, "-fsyntax-only"), cwd, ok, message))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: run(c[2], c[3]), checks))
    for (group, what, _, _, should_pass, message), (ok, stderr) in zip(checks, results):
        if ok != should_pass:
            detail = stderr.strip().splitlines()[:3] if not ok else []
            failures.append((group, f"{what}: {'built' if ok else 'failed'}, expected "
                                    f"{'it to build' if should_pass else 'a refusal'} {detail}"))
        elif not ok and message and message not in stderr:
            failures.append((group, f"{what}: refused without saying '{message}': "
                                    f"{stderr.strip().splitlines()[:3]}"))
    # One result per group of checks, like one test case each.
    groups = ["direction", "project headers", "third-party headers", "compiled probes"]
    failed = sorted({g for g, _ in failures})
    for group, line in failures:
        print(f"FAILED [{group}]: {line}")
    for g in groups:
        n = sum(1 for c in checks if c[0] == g)
        print(f"{g}: {'FAILED' if g in failed else 'ok'} ({n} probes)" if n else
              f"{g}: {'FAILED' if g in failed else 'ok'}")
    print(f"{len(groups) - len(failed)} passed, {len(failed)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
