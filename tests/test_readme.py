"""Every `gossip ...` command in the code blocks of README.md and of docs/*.md runs as written, in
its --help form: the lines of fenced code blocks that start with `gossip ` (or with
mpirun/srun/sbatch and run gossip or a batch file), run as `gossip SUBCOMMAND --help` (`gossip
bench NAME --help` for a benchmark), must exit 0 and know every option the line names; the
subcommand must be in `gossip --help`; and the files the line names (configs, topologies, batch
files) must exist from the repository root. So a renamed flag, subcommand or file breaks the test
suite. (README's blocks fenced as ```sh runnable are also run for real, by tests/docs.py.)
"""
import glob
import os
import re

from gossip_test import GOSSIP, SOURCE, Checks, run


def code_block_lines(text):
    """The lines inside ``` fences."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if inside:
            lines.append(line.strip())
    return lines


def command_part(line):
    """The command of a line, without a trailing `# comment` or a two-space-separated description."""
    line = line.split(" #", 1)[0]
    return re.split(r"\s{2,}", line.strip())[0]


def main():
    t = Checks("readme")
    pages = [os.path.join(SOURCE, "README.md")]
    pages += sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md")))
    code, usage = run([GOSSIP, "--help"], 30)
    t.check(code == 0, "gossip --help exits 0", usage)
    subcommands = set(re.findall(r"^  (\w+)\s", usage, re.MULTILINE))

    commands = []
    for page in pages:
        with open(page) as f:
            lines = code_block_lines(f.read())
        before = len(commands)
        collect_commands(t, lines, commands)
        if page.endswith("README.md"):
            t.check(len(commands) - before >= 10,
                    f"README's code blocks hold the gossip commands ({len(commands) - before})")

    for words in commands:
        check_command(t, words, subcommands, usage)
    t.finish()


def collect_commands(t, lines, commands):
    """Appends the gossip commands of these code-block lines (as word lists) to `commands`, and
    checks the files that launcher lines name."""
    for line in lines:
        cmd = command_part(line)
        words = cmd.split()
        if not words:
            continue
        if words[0] == "gossip":
            if len(words) > 1 and words[1].endswith(":"):
                continue  # a message gossip printed ("gossip topo: ..."), not a command
            commands.append(words)
        elif words[0] in ("mpirun", "srun", "sbatch"):
            if "gossip" in words:
                commands.append(words[words.index("gossip"):])
            for w in words:  # the batch files and configs a launcher line names
                if re.search(r"\.(sbatch|yaml)$", w):
                    t.check(os.path.exists(os.path.join(SOURCE, w)), f"`{cmd}`: {w} exists", w)


def check_command(t, words, subcommands, usage):
    cmd = " ".join(words)
    sub = words[1] if len(words) > 1 else "--help"
    if sub.startswith("-"):
        code, out = run([GOSSIP, "--help"], 30)
        t.check(code == 0, f"`{cmd}`: gossip --help exits 0", out)
        return
    t.check(sub in subcommands, f"`{cmd}`: {sub} is a subcommand of gossip --help", usage)
    # A benchmark has its own options: `gossip bench NAME --help`.
    name = [sub]
    if sub == "bench" and len(words) > 2 and re.fullmatch(r"[a-z]+", words[2]):
        name = [sub, words[2]]
    code, out = run([GOSSIP] + name + ["--help"], 30)
    t.check(code == 0 and out.startswith("usage: gossip " + " ".join(name)),
            f"`{cmd}`: gossip {' '.join(name)} --help exits 0", out)
    for w in words[1 + len(name):]:
        for option in re.findall(r"--[a-z][a-z-]*", w):
            if option == "--help":
                continue
            t.check(re.search(rf"{option}\b", out) is not None,
                    f"`{cmd}`: gossip {' '.join(name)} knows {option}", out)
        # Files named as they are in the repository (configs/, topologies/, deploy/).
        path = w.strip("[]|")
        if re.match(r"^(configs|topologies|deploy|tests)/\S+$", path):
            t.check(os.path.exists(os.path.join(SOURCE, path)), f"`{cmd}`: {path} exists")


if __name__ == "__main__":
    main()
