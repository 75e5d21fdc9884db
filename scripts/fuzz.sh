#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets in fuzz/ with clang++ (the project itself builds
# with g++, which has no libFuzzer) and runs each for a bounded time over the seed corpus in
# fuzz/corpus/. Prints one line per target; exits non-zero if a target fails to build, crashes,
# leaks, trips a sanitizer or allocates more than FUZZ_MALLOC_MB at once.
#
#   scripts/fuzz.sh                 # 20 s per target
#   FUZZ_SECONDS=300 scripts/fuzz.sh
#   scripts/fuzz.sh --seeds         # rewrite the frame, handshake, rendezvous and address seeds (fuzz/make_seeds.cpp)
#                                   # through the codec, e.g. after a protocol version change
# Environment: FUZZ_SECONDS (20), FUZZ_OUT (build-fuzz), FUZZ_CXX (clang++), FUZZ_MALLOC_MB (64).
set -u
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-20}
out=${FUZZ_OUT:-build-fuzz}
cxx=${FUZZ_CXX:-clang++}
malloc_mb=${FUZZ_MALLOC_MB:-64}
codec=(src/wire/frame.cpp src/wire/handshake.cpp src/wire/packet.cpp src/wire/checkpoint.cpp
       src/wire/rendezvous.cpp src/wire/address_record.cpp
       src/core/errors.cpp src/core/half.cpp src/core/sha256.cpp)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iinclude -I. -DGOSSIP_ROOM_WIRE -DGOSSIP_ROOM_CORE)

if ! command -v "$cxx" > /dev/null; then
  echo "fuzz: $cxx not found (apt-get install clang libclang-rt-dev, or set FUZZ_CXX)"
  exit 1
fi
mkdir -p "$out"
if [ "${1:-}" = --seeds ]; then
  "$cxx" -std=c++20 -O1 -g -Iinclude -I. -DGOSSIP_ROOM_WIRE -DGOSSIP_ROOM_CORE "${codec[@]}" \
    fuzz/make_seeds.cpp -o "$out/make_seeds" && exec "$out/make_seeds" fuzz/corpus
  exit 1
fi
status=0
for target in fuzz_frame fuzz_handshake fuzz_packet fuzz_checkpoint fuzz_rendezvous fuzz_address; do
  log="$out/$target.log"
  if ! "$cxx" "${flags[@]}" "${codec[@]}" "fuzz/$target.cpp" -o "$out/$target" > "$log" 2>&1
  then
    echo "$target: FAILED to build (see $log)"
    status=1
    continue
  fi
  corpus="$out/corpus-$target"  # new inputs go here; the seeds in fuzz/corpus stay untouched
  mkdir -p "$corpus"
  if timeout $((seconds + 60)) "$out/$target" "$corpus" "fuzz/corpus/${target#fuzz_}" \
      -max_total_time="$seconds" -dict=fuzz/frame.dict -malloc_limit_mb="$malloc_mb" \
      -artifact_prefix="$out/$target-" -print_final_stats=1 > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    echo "$target: ok (${runs:-?} inputs in ${seconds} s, no crash)"
  else
    echo "$target: CRASH (see $log; reproducer in $out/$target-*)"
    status=1
  fi
done
exit $status
