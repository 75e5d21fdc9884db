#!/usr/bin/env bash
# The GPU path, proven where there is a GPU: builds gossip with its CUDA backend (the set-up
# script, then the Meson feature `cuda` forced on, so a build without nvcc fails here instead of
# leaving CUDA out) and, on a machine with an NVIDIA GPU:
#   1. the CUDA tests (tests/test_cuda.cpp: every layer, optimizer, mixing and compression kernel
#      against the CPU backend, within the tolerances the tests state);
#   2. `gossip bench step --backend cuda`: the training step on the GPU against cuBLAS's own GEMM
#      rate for the same shapes, and PyTorch on the GPU where its torch has CUDA;
#   3. the quickstart with train.backend: cuda, beside the same run on the CPU;
#   4. the same with peer 3 flipping the sign of what it sends, under gossip.aggregate: clipped
#      (the distances to the neighbours' models taken on the GPU) and trimmed_mean (taken on the
#      host, the result mixed on the GPU), on cuda and on cpu;
#   5. ResNet-20's step (configs/resnet20.yaml: batch norm, residual blocks) on the GPU, against
#      PyTorch's ResNet-20 of the same layers where its torch has CUDA.
# --prebuilt: no set-up and no build; use the binaries already in build/ (a GPU machine without
# Debian's packages, given a build made elsewhere: set LD_LIBRARY_PATH for its libraries and
# put Fashion-MNIST where the config says). The plugin is then build/src/compute/'s unless
# GOSSIP_CUDA_PLUGIN says otherwise.
# On a machine without one it says so and exits 0, claiming nothing. Figures go to
# ${GPU_CHECK_OUT:-runs/gpu-check}/ (test log, bench JSON and tables, the runs).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${GPU_CHECK_OUT:-runs/gpu-check}"

prebuilt=0
case "${1:-}" in
  --prebuilt) prebuilt=1 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu-check: unknown argument '$1' (usage: scripts/gpu-check.sh [--prebuilt])"; exit 2 ;;
esac
gossip_bin=build/src/cli/gossip
if [ "$prebuilt" -eq 1 ]; then
  [ -x "$gossip_bin" ] && [ -x build/tests/test_cuda ] ||
    { echo "gpu-check: --prebuilt, but $gossip_bin or build/tests/test_cuda is missing"; exit 1; }
  export GOSSIP_CUDA_PLUGIN="${GOSSIP_CUDA_PLUGIN:-$PWD/build/src/compute/libgossip-cuda.so}"
else
  bash scripts/setup.sh || { echo "gpu-check: the set-up failed"; exit 1; }
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if ! command -v nvcc >/dev/null 2>&1; then
    echo "gpu-check: nvcc not found (Debian's nvidia-cuda-toolkit): the CUDA backend cannot be" \
         "built"
    exit 1
  fi
  meson configure build -Dcuda=enabled >/dev/null &&
    ninja -C build >/dev/null || { echo "gpu-check: the build with -Dcuda=enabled failed"; exit 1; }
fi
echo "gpu-check: built with CUDA: $("$gossip_bin" --version | tail -n 1)"

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ "$gpus" -eq 0 ] || ! "$gossip_bin" --version | grep -q '[1-9][0-9]* device(s) visible'; then
  echo "gpu-check: no NVIDIA GPU usable on this machine (nvidia-smi lists $gpus; the backend says:" \
       "$("$gossip_bin" --version | tail -n 1)). The CUDA backend compiles and links; nothing is" \
       "claimed about it running."
  exit 0
fi
mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
status=0

echo "== 1. CUDA kernels against the CPU backend (build/tests/test_cuda)"
GOSSIP_TEST_DATA="$PWD/tests/data" GOSSIP_SOURCE_DIR="$PWD" GOSSIP_BIN="$PWD/$gossip_bin" \
  build/tests/test_cuda 2>&1 | tee "$out/test_cuda.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu-check: CUDA tests FAILED"; status=1; }

echo "== 2. the training step on the GPU (gossip bench step --backend cuda)"
env -u OPENBLAS_CORETYPE "$gossip_bin" bench step --backend cuda | tee "$out/bench_step_cuda.txt"
env -u OPENBLAS_CORETYPE "$gossip_bin" bench step --backend cuda --json > "$out/bench_step_cuda.json" ||
  status=1
env -u OPENBLAS_CORETYPE "$gossip_bin" bench step --json > "$out/bench_step_cpu.json" || status=1

echo "== 3. the quickstart on the GPU and on the CPU"
for backend in cuda cpu; do
  cfg="$out/quickstart-$backend.yaml"
  sed "s/^  backend: .*/  backend: $backend/" configs/quickstart.yaml > "$cfg"
  # Paths in a config are relative to it: point them back at the repository.
  sed -i "s#\.\./topologies/#$PWD/topologies/#; s#topology: topologies/#topology: $PWD/topologies/#" "$cfg"
  rm -rf "$out/quickstart-$backend"
  "$gossip_bin" run "$cfg" --out "$out/quickstart-$backend" --no-progress | tail -n 4 ||
    { echo "gpu-check: the quickstart on $backend FAILED"; status=1; }
done
grep -h '"test_accuracy"\|"wall_seconds"' "$out"/quickstart-*/summary.json

echo "== 4. peer 3 flips its sign; gossip.aggregate clipped and trimmed_mean, on the GPU and the CPU"
printf 'faults: [{round: 1, attack: [3], kind: sign_flip}]\n' > "$out/sign-flip.yaml"
for aggregate in clipped trimmed_mean; do
  for backend in cuda cpu; do
    run="$out/byzantine-$aggregate-$backend"
    rm -rf "$run"
    "$gossip_bin" run "$out/quickstart-$backend.yaml" --out "$run" --no-progress \
      --faults "$out/sign-flip.yaml" --aggregate "$aggregate" | tail -n 2 ||
      { echo "gpu-check: $aggregate on $backend FAILED"; status=1; }
    python3 -c 'import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print("gpu-check:", sys.argv[1].rsplit("/", 1)[-1], "test_accuracy", s["test_accuracy"],
      "wall_seconds", round(s["wall_seconds"], 2), "named (peer, event, subject, round):",
      [(e["peer"], e["event"], e["subject"], e["round"]) for e in s.get("byzantine", [])])' \
      "$run" || status=1
  done
done
echo "== 5. ResNet-20's step (configs/resnet20.yaml: batch norm, residual blocks) on the GPU"
env -u OPENBLAS_CORETYPE "$gossip_bin" bench step --backend cuda --model configs/resnet20.yaml \
  --steps 50 --json > "$out/bench_step_resnet20_cuda.json" || status=1
cat "$out/bench_step_resnet20_cuda.json"
echo "gpu-check: done (status $status); figures in $out/"
exit "$status"
