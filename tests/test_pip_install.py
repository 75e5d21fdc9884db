"""`pip install` as Python users do it (issue: the package installs as Python packages do): a
venv with Debian's site packages (for python3-torch), `pip install --no-build-isolation .` from
a copy of the repository (meson-python builds it: a few minutes on two cores, so meson runs
this test alone), then, from another folder, `import gossip, gossip.torch` in that venv, the
`gossip` command it installed, and a topology report through the installed extension."""
import os
import shutil
import subprocess
import tempfile

from gossip_test import SOURCE, Checks, run


def main():
    t = Checks("pip_install")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        # The repository's tracked and untracked files (not build/ or runs/): a clean tree.
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=SOURCE,
                               capture_output=True, text=True).stdout.split()
        if not files:
            t.skip("not a git checkout")
        for f in files:
            if os.path.isfile(os.path.join(SOURCE, f)):
                os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
                shutil.copy2(os.path.join(SOURCE, f), os.path.join(src, f))
        venv = os.path.join(d, "v")
        code, out = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], 120)
        if not t.check(code == 0, "python3 -m venv --system-site-packages v", out):
            t.finish()
        pip = os.path.join(venv, "bin", "pip")
        code, out = run([pip, "install", "--no-build-isolation", "--no-index", src], 1500, cwd=d)
        if not t.check(code == 0, "v/bin/pip install --no-build-isolation .", out[-6000:]):
            t.finish()
        elsewhere = os.path.join(d, "elsewhere")
        os.makedirs(elsewhere)
        python = os.path.join(venv, "bin", "python")
        code, out = run([python, "-c", "import gossip, gossip.torch, gossip.data; "
                         "print(gossip.__file__); "
                         "print(gossip.topology.generate('ring', n=8)['spectral_gap'])"],
                        120, cwd=elsewhere)
        t.check(code == 0 and os.path.join(venv, "lib") in out,
                "import gossip, gossip.torch from another folder uses the venv's copy", out)
        t.check("0.195" in out, "the installed extension reports the 8-ring's spectral gap", out)
        for marker in ("py.typed", "_gossip.pyi"):
            found = any(marker in names for _, _, names in os.walk(os.path.join(venv, "lib")))
            t.check(found, f"the installed package has {marker}")
        code, out = run([os.path.join(venv, "bin", "gossip"), "--help"], 60, cwd=elsewhere)
        t.check(code == 0 and "usage: gossip" in out, "the venv's gossip command runs", out)
    t.finish()


if __name__ == "__main__":
    main()
