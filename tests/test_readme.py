"""Every `gossip ...` command in README.md's code blocks runs as written, in its --help form: the
lines of fenced code blocks that start with `gossip ` (or with mpirun/srun/sbatch and run gossip
or a batch file), run as `gossip SUBCOMMAND --help`, must exit 0 and know every option the line
names; the subcommand must be in `gossip --help`; and the files the line names (configs,
topologies, batch files) must exist from the repository root. So a renamed flag, subcommand or
file breaks the test suite.
"""
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
    with open(os.path.join(SOURCE, "README.md")) as f:
        readme = f.read()
    code, usage = run([GOSSIP, "--help"], 30)
    t.check(code == 0, "gossip --help exits 0", usage)
    subcommands = set(re.findall(r"^  (\w+)\s", usage, re.MULTILINE))

    commands = []
    for line in code_block_lines(readme):
        cmd = command_part(line)
        words = cmd.split()
        if not words:
            continue
        if words[0] == "gossip":
            commands.append(words)
        elif words[0] in ("mpirun", "srun", "sbatch"):
            if "gossip" in words:
                commands.append(words[words.index("gossip"):])
            for w in words:  # the batch files and configs a launcher line names
                if re.search(r"\.(sbatch|yaml)$", w):
                    t.check(os.path.exists(os.path.join(SOURCE, w)), f"`{cmd}`: {w} exists", w)
    t.check(len(commands) >= 10, f"README's code blocks hold the gossip commands ({len(commands)})")

    for words in commands:
        cmd = " ".join(words)
        sub = words[1] if len(words) > 1 else "--help"
        if sub.startswith("-"):
            code, out = run([GOSSIP, "--help"], 30)
            t.check(code == 0, f"`{cmd}`: gossip --help exits 0", out)
            continue
        t.check(sub in subcommands, f"`{cmd}`: {sub} is a subcommand of gossip --help", usage)
        code, out = run([GOSSIP, sub, "--help"], 30)
        t.check(code == 0 and out.startswith(f"usage: gossip {sub}"),
                f"`{cmd}`: gossip {sub} --help exits 0", out)
        for w in words[2:]:
            for option in re.findall(r"--[a-z][a-z-]*", w):
                t.check(re.search(rf"{option}\b", out) is not None,
                        f"`{cmd}`: gossip {sub} knows {option}", out)
            # Files named as they are in the repository (configs/, topologies/, deploy/).
            path = w.strip("[]|")
            if re.match(r"^(configs|topologies|deploy|tests)/\S+$", path):
                t.check(os.path.exists(os.path.join(SOURCE, path)), f"`{cmd}`: {path} exists")
    t.finish()


if __name__ == "__main__":
    main()
