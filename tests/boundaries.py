"""The room boundaries of DESIGN.md, checked on the build itself.

For every room, takes the compile command of one of its own sources from compile_commands.json
(the room's real flags), swaps in a one-line probe, and checks that
  1. the rooms it may see (its -DGOSSIP_ROOM_* flags) all lie below it in DESIGN.md's order;
  2. each public header (include/gossip/*.hpp) preprocesses exactly when its room is one of
     those, and each private header (src/<room>/*.hpp) is refused outside them and builds in its
     own room: a reach to any other room stops with an #error;
  3. each third-party library's headers preprocess only in the rooms meson.build's table gives it
     (read from BUILD_DIR/rooms.json, which the build writes from that table), and every library
     of the table has a header to probe;
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

# The rooms, their folders and their third-party libraries come from meson.build's table (the
# build writes it as BUILD_DIR/rooms.json), so a room or a library added to the build is checked
# here without a second edit; cli sits on top of every room.
def load_table(build):
    """(rooms top to bottom, room -> folder, {library: (probe header, rooms)}, problems)."""
    with open(os.path.join(build, "rooms.json")) as f:
        table = json.load(f)
    order = ["cli"] + [row[0] for row in reversed(table["rooms"])]
    folder = {row[0]: row[1] for row in table["rooms"]}
    third_party = {}
    for lib, header in table["third_party"].items():
        rooms = {row[0] for row in table["rooms"] if lib in row[3]}
        third_party[lib] = (header, rooms)
    return order, folder, third_party, unchecked(table)


def unchecked(table):
    """What in the table this test could not check: a library with no probe header, or a room
    that names a library the build does not know."""
    problems = [f"library {lib} is in meson.build's third_party but has no header in "
                f"third_party_probe, so its boundary is never checked"
                for lib, header in table["third_party"].items() if not header]
    for row in table["rooms"]:
        problems += [f"room {row[0]} declares library {lib}, which meson.build's third_party "
                     f"does not have" for lib in row[3] if lib not in table["third_party"]]
    return problems


def layout_block(source_root, marker):
    """The fenced block of docs/layout.md after `marker` (its fence line included in the
    marker), or None when the page has no such block."""
    with open(os.path.join(source_root, "docs", "layout.md")) as f:
        doc = f.read()
    if marker not in doc:
        return None
    at = doc.index(marker) + len(marker)
    return doc[at:doc.index("```", at)]


def quote_differs(source_root):
    """Whether docs/layout.md's copy of meson.build's room table differs from the table."""
    with open(os.path.join(source_root, "meson.build")) as f:
        build = f.read()
    start = build.index("rooms = [\n")
    table = build[start:build.index("\n]\n", start) + 3]
    quoted = layout_block(source_root, "<!-- rooms: quoted from meson.build -->\n```meson\n")
    if quoted is None:
        return "docs/layout.md has no quoted room table"
    return None if quoted == table else "docs/layout.md's room table differs from meson.build's"


def transport_picture_differs(source_root):
    """Whether docs/layout.md's transport picture misses a file of src/net, or names one that is
    not there."""
    picture = layout_block(source_root, "<!-- transport: the files of src/net -->\n```\n")
    if picture is None:
        return "docs/layout.md has no transport picture"
    named = set(re.findall(r"\b([a-z_]+\.cpp)\b", picture))
    there = {f for f in os.listdir(os.path.join(source_root, "src", "net")) if f.endswith(".cpp")}
    problems = [f"src/net/{f} is not in docs/layout.md's transport picture"
                for f in sorted(there - named)]
    problems += [f"docs/layout.md's transport picture names src/net/{f}, which is not there"
                 for f in sorted(named - there)]
    return "; ".join(problems) or None


def self_check(build):
    """unchecked() must name a library whose probe header is taken out of the table (the
    guard that keeps BLIS-like gaps from coming back)."""
    with open(os.path.join(build, "rooms.json")) as f:
        table = json.load(f)
    lib = next(iter(table["third_party"]))
    table["third_party"][lib] = None
    return any(f"library {lib} " in p for p in unchecked(table))


GUARD = re.compile(r"#if !defined\(GOSSIP_ROOM_([A-Z]+)\)")


def room_commands(build, source_root, folder):
    """room -> (argv, directory) of a C++ compile of one of the room's own sources."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    out = {}
    for e in entries:
        src = os.path.relpath(os.path.join(e["directory"], e["file"]), source_root)
        if not src.endswith(".cpp"):
            continue
        room = next((r for r, d in folder.items() if os.path.dirname(src) == d), None)
        if room is None:
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
    order, folders, third_party, problems = load_table(build)
    commands = room_commands(build, source_root, folders)
    failures = [("third-party headers", p) for p in problems]
    if not self_check(build):
        failures.append(("third-party headers", "a library without a probe header went unnoticed"))
    if quote_differs(source_root):
        failures.append(("direction", quote_differs(source_root)))
    if transport_picture_differs(source_root):
        failures.append(("direction", transport_picture_differs(source_root)))
    expected_rooms = set(order) - {"cli"}
    missing = expected_rooms - set(commands)
    if missing:
        failures.append(("direction", f"no compile command for rooms {sorted(missing)}"))

    tmp = tempfile.mkdtemp(prefix="boundaries-")
    checks = []  # (group, description, argv, cwd, should_pass, expected message in stderr or None)
    for room, (argv, cwd, source) in sorted(commands.items()):
        visible = {m.lower() for m in re.findall(r"-DGOSSIP_ROOM_([A-Z]+)", " ".join(argv))}
        below = set(order[order.index(room):])
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
        for lib, (header, allowed) in third_party.items():
            if not header:
                continue  # reported above
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
