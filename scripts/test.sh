#!/usr/bin/env bash
# Builds gossip (installing what is missing) and runs every test: the Catch2 suites through
# `meson test`, then the bounded fuzz run when scripts/fuzz.sh exists. Ends with the line
# "N passed, N failed" counted from the Catch2 test cases (and fuzz targets) that actually ran.
# Extra arguments go to `meson test` (e.g. scripts/test.sh compute model).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

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

python3 scripts/count_tests.py build/meson-logs/testlog.json "$fuzz_passed" "$fuzz_failed"
count_status=$?
[ $meson_status -eq 0 ] && [ $count_status -eq 0 ] && [ "$fuzz_failed" -eq 0 ]
