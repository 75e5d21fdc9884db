#!/usr/bin/env bash
# Builds gossip (installing what is missing) and runs every test: the Catch2 suites through
# `meson test`, then the bounded fuzz run when scripts/fuzz.sh exists. Ends with the line
# "N passed, N failed" counted from the Catch2 test cases (and fuzz targets) that actually ran.
# Extra arguments go to `meson test` (e.g. scripts/test.sh compute model).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

# The tests must leave the checkout as they found it (no tracked file rewritten, nothing new
# outside ignored folders): its state before, compared after.
checkout_before=$(git status --porcelain 2>/dev/null || true)

meson test -C build --print-errorlogs --num-processes 2 "$@"
meson_status=$?

fuzz_passed=0
fuzz_failed=0
if [ $# -eq 0 ] && [ -x scripts/fuzz.sh ]; then
  out=$(bash scripts/fuzz.sh 2>&1)
  fuzz_status=$?
  echo "$out"
  fuzz_passed=$(printf '%s\n' "$out" | grep -c '^fuzz_[a-z]*: ok' || true)
  fuzz_failed=$(printf '%s\n' "$out" | grep -c '^fuzz_[a-z]*: FAIL' || true)
  if [ "$fuzz_status" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then fuzz_failed=1; fi
fi

checkout_after=$(git status --porcelain 2>/dev/null || true)
if [ "$checkout_before" != "$checkout_after" ]; then
  echo "test.sh: FAIL: the tests changed the checkout (git status --porcelain before and after):"
  diff <(printf '%s\n' "$checkout_before") <(printf '%s\n' "$checkout_after") | sed -n '2,40p'
  fuzz_failed=$((fuzz_failed + 1))
else
  [ -d .git ] && echo "test.sh: ok: the checkout is as the tests found it"
  fuzz_passed=$((fuzz_passed + 1))
fi

python3 scripts/count_tests.py build/meson-logs/testlog.json "$fuzz_passed" "$fuzz_failed"
count_status=$?
[ $meson_status -eq 0 ] && [ $count_status -eq 0 ] && [ "$fuzz_failed" -eq 0 ]
