"""Counts Catch2 test cases (and the checks of tests that print "N passed, N failed") from
meson's testlog.json and prints "N passed, N failed".

A test executable whose output has no Catch2 summary (it crashed or timed out) counts as one
failed test case, so a broken suite can never read as passed. Usage:
  count_tests.py build/meson-logs/testlog.json [extra_passed extra_failed]
Exits 1 when anything failed or nothing ran.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((?:\d+|-) assertions? in (\d+) test cases?\)")
MIXED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed(?:\s*\|\s*(\d+) failed)?")
ONLY_FAILED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) failed")
# A test that is not Catch2 (tests/boundaries.py) ends with this line of its own.
PLAIN = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
# pytest's closing line: "3 passed in 1.2s", "1 failed, 2 passed, 1 skipped in 4.0s".
PYTEST = re.compile(r"^=*\s*(?:(\d+) failed, )?(\d+) passed[^\n]* in [\d.]+s", re.MULTILINE)
PYTEST_FAILED = re.compile(r"^=*\s*(\d+) failed[^\n]* in [\d.]+s", re.MULTILINE)


def count(stdout, meson_result):
    m = ALL_PASSED.search(stdout)
    if m:
        return int(m.group(1)), 0
    m = MIXED.search(stdout)
    if m:
        return int(m.group(2)), int(m.group(3) or 0)
    m = ONLY_FAILED.search(stdout)
    if m:
        return 0, int(m.group(2))
    m = PYTEST.search(stdout)
    if m:
        return int(m.group(2)), int(m.group(1) or 0)
    m = PYTEST_FAILED.search(stdout)
    if m:
        return 0, int(m.group(1))
    m = PLAIN.search(stdout)
    if m and (meson_result == "OK") == (int(m.group(2)) == 0):
        return int(m.group(1)), int(m.group(2))
    return (0, 1) if meson_result != "OK" else (0, 1)


def main():
    passed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    failed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    try:
        with open(sys.argv[1]) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except OSError as e:
        print(f"no test log: {e}")
        lines = []
    for t in lines:
        p, fl = count(t.get("stdout", ""), t.get("result"))
        if t.get("result") != "OK" and fl == 0:
            fl = 1  # meson says it failed (exit code, timeout) even if Catch2 printed a pass
        print(f"  {t.get('name')}: {p} passed, {fl} failed ({t.get('result')})")
        passed += p
        failed += fl
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
