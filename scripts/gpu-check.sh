#!/usr/bin/env bash
# The GPU path, proven where there is a GPU. Builds gossip with its CUDA backend (the set-up
# script, then the Meson feature `cuda` forced on) and, on a machine with an NVIDIA GPU, runs
# the checks below, writing one table (gpu-check.md) and the same figures as JSON
# (gpu-figures.json: the card, the date, each figure under a named key) into
# ${GPU_CHECK_OUT:-runs/gpu-check}/:
#   tests      the CUDA tests (tests/test_cuda.cpp: every kernel, and cuDNN's convolutions at
#              each precision, against the CPU backend within the tolerances the tests state);
#   step       `gossip bench step --backend cuda`: the CNN (configs/cnn.yaml) at batch 32 (fp32,
#              tf32) and 256 and ResNet-20 (configs/resnet20.yaml) at batch 128 (fp32, tf32,
#              bf16), ours against PyTorch on
#              the same GPU at the same precision (fp32: TF32 off on both sides; tf32: on for
#              both; bf16: our bf16 products against torch.autocast(bfloat16)), and the CNN
#              with train.conv: im2col to show what cuDNN changed;
#   runs       the quickstart (8 peers sharing the GPU) on cuda in fp32 and bf16 and on the
#              machine's CPU cores; quickstart-cnn for 2 epochs on cuda and on the CPU;
#   resnet     ResNet-20 trained alone (`gossip train`, 15 epochs) on the GPU, its 8-peer
#              run (quickstart-resnet20, 1 epoch) on the GPU and on the CPU, and again on the
#              GPU under MPS and as the threads of one process, with and without CUDA graphs;
#   sim        the 16-peer sim of it on a ring (sim-ring-16-resnet20, 15 epochs) with its
#              virtual peers on the GPU, each replaying its step as a CUDA graph
#              (train.graphs: step; GPU_CHECK_SIM_WORKERS worker threads, a stream each,
#              default 4; GPU_CHECK_SIM_S, default 420 s);
#   byzantine  peer 3 flips its sign under gossip.aggregate clipped and trimmed_mean, on cuda
#              and on cpu (the distances taken on the GPU).
#   shared     8 peers on one GPU with and without CUDA MPS (train.mps: off, auto) and as the
#              threads of one process (train.peers_per_process: 8, one CUDA context): the
#              quickstart and quickstart-cnn, beside the CPU's, and again with each peer's
#              step replayed as a CUDA graph (train.graphs: step);
#              the quickstart's MLP step launched kernel by kernel and as a CUDA graph; and
#              half an epoch of the 16-peer ResNet-20 sim with 1, 2 and 4 worker threads.
#              (Every `step` benchmark times its step as a CUDA graph too: *_graph_us.)
# GPU_CHECK_STEPS picks and orders them (default "tests step runs resnet sim shared
# byzantine").
# --prebuilt: no set-up and no build: a GPU machine without Debian's packages, given what
# scripts/gpu-bundle.sh packed here (unpack it in the checkout first: build/ and gpu-bundle/).
# Its libraries go on LD_LIBRARY_PATH, its Fashion-MNIST where the configs read it, and
# cuDNN is taken from PyTorch's wheels when the library path has none.
# On a machine without a GPU it says so and exits 0, claiming nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${GPU_CHECK_OUT:-runs/gpu-check}"
steps="${GPU_CHECK_STEPS:-tests step runs resnet sim shared byzantine}"

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
    { echo "gpu-check: --prebuilt, but $gossip_bin or build/tests/test_cuda is missing" \
           "(unpack scripts/gpu-bundle.sh's tarball here first)"; exit 1; }
  export GOSSIP_CUDA_PLUGIN="${GOSSIP_CUDA_PLUGIN:-$PWD/build/src/compute/libgossip-cuda.so}"
  [ -d gpu-bundle/lib ] && export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for cuda_lib in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [ -d "$cuda_lib" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cuda_lib"
  done
  data=/usr/share/datasets/fashion-mnist
  if [ ! -f "$data/train-images-idx3-ubyte.gz" ] && [ -d gpu-bundle/fashion-mnist ]; then
    mkdir -p "$data" && cp gpu-bundle/fashion-mnist/*.gz "$data/"
  fi
  missing=$(ldd "$gossip_bin" build/src/compute/libgossip-cuda.so | grep 'not found' | sort -u)
  [ -z "$missing" ] || { echo "gpu-check: libraries missing here: $missing"; exit 1; }
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
# cuDNN: the library path's, else the one PyTorch's wheels carry (nvidia-cudnn-cu13).
if [ -z "${GOSSIP_CUDNN:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9'; then
  wheel_cudnn=$(python3 -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
  if [ -z "$wheel_cudnn" ] || [ ! -f "$wheel_cudnn/libcudnn.so.9" ]; then
    wheel_cudnn=$(dirname "$(find /opt /usr/local /usr/lib -name libcudnn.so.9 2>/dev/null | head -n 1)")
  fi
  if [ -n "$wheel_cudnn" ] && [ -f "$wheel_cudnn/libcudnn.so.9" ]; then
    export GOSSIP_CUDNN="$wheel_cudnn/libcudnn.so.9"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$wheel_cudnn"
  fi
fi
export GOSSIP_BENCH_DIR="$PWD/bench"
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
nproc > "$out/cpus.txt"
status=0

# A copy of configs/NAME.yaml beside it (its relative paths still hold) with train: fields set.
variant() {
  local name=$1 tag=$2; shift 2
  local cfg="configs/.gpu-check-$tag.yaml"
  python3 - "configs/$name.yaml" "$cfg" "$@" <<'EOF'
import sys
src, dst, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(src).read().splitlines()
keys = {}  # section -> {key: value}; a key without "section." is train's
for s in sets:
    k, v = s.split("=", 1)
    section, key = k.split(".", 1) if "." in k else ("train", k)
    keys.setdefault(section, {})[key] = v
out, section = [], None
for line in lines:
    if section in keys and line.startswith("  ") and line.strip().split(":")[0] in keys[section]:
        continue  # replaced below
    out.append(line)
    if line and not line.startswith(" ") and not line.startswith("#"):
        section = line.rstrip()[:-1] if line.rstrip().endswith(":") else None
        out += [f"  {k}: {v}" for k, v in keys.get(section, {}).items()]
open(dst, "w").write("\n".join(out) + "\n")
EOF
  echo "$cfg"
}
trap 'rm -f configs/.gpu-check-*.yaml' EXIT

step_tests() {
  echo "== tests: CUDA kernels and cuDNN's convolutions against the CPU backend"
  local expect=()
  [ -n "${GOSSIP_CUDNN:-}" ] || ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' &&
    expect=(env GOSSIP_EXPECT_CUDNN=1)
  "${expect[@]}" env GOSSIP_TEST_DATA="$PWD/tests/data" GOSSIP_SOURCE_DIR="$PWD" \
    GOSSIP_BIN="$PWD/$gossip_bin" build/tests/test_cuda 2>&1 | tee "$out/test_cuda.txt" | tail -n 4
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu-check: CUDA tests FAILED"; status=1; }
}

step_step() {
  echo "== step: ours against PyTorch on the same GPU, at each precision"
  local model batch precision
  for spec in cnn:32:fp32+tf32 cnn:256:fp32+tf32+bf16 resnet20:128:fp32+tf32+bf16; do
    IFS=: read -r model batch precisions <<< "$spec"
    for precision in ${precisions//+/ }; do
      env -u OPENBLAS_CORETYPE timeout 120 "$gossip_bin" bench step --backend cuda \
        --model "configs/$model.yaml" --batch "$batch" --precision "$precision" --steps 60 \
        --json > "$out/step_${model}_b${batch}_${precision}.json" ||
        { echo "gpu-check: bench step $model b$batch $precision FAILED"; status=1; }
      grep -o '"b[0-9]*_ours_us":[0-9.]*\|"b[0-9]*_torch_us":[0-9.]*\|"conv":"[^"]*"' \
        "$out/step_${model}_b${batch}_${precision}.json" | tr '\n' ' ' | sed "s/^/  $model $precision: /"
      echo
    done
  done
  env -u OPENBLAS_CORETYPE timeout 120 "$gossip_bin" bench step --backend cuda \
    --model configs/cnn.yaml --batch 256 --conv im2col --steps 60 --json \
    > "$out/step_cnn_b256_fp32_im2col.json" || status=1
}

# gossip run of a config variant on BACKEND (with extra train: fields), into $out/run-TAG.
run_variant() {
  local name=$1 tag=$2 backend=$3; shift 3
  local cfg
  cfg=$(variant "$name" "$tag" "backend=$backend" "$@")
  rm -rf "$out/run-$tag"
  timeout 240 "$gossip_bin" run "$cfg" --out "$out/run-$tag" --no-progress "${RUN_ARGS[@]}" \
    > "$out/run-$tag.log" 2>&1 || { echo "gpu-check: run $tag FAILED"; status=1; }
  tail -n 2 "$out/run-$tag.log"
  python3 scripts/gpu_figures.py "$out" > /dev/null 2>&1  # the figures so far
}

step_runs() {
  echo "== runs: the quickstart and quickstart-cnn on the GPU and on the CPU"
  RUN_ARGS=()
  run_variant quickstart quickstart-cuda cuda
  run_variant quickstart quickstart-cuda-bf16 cuda precision=bf16
  run_variant quickstart quickstart-cpu cpu
  RUN_ARGS=(--epochs 2)
  run_variant quickstart-cnn quickstart-cnn-cuda cuda
  run_variant quickstart-cnn quickstart-cnn-cpu cpu
}

step_resnet() {
  echo "== resnet: ResNet-20 alone on the GPU, and 8 peers on the GPU and on the CPU"
  local cfg
  cfg=$(variant resnet20 resnet20-cuda backend=cuda)
  rm -rf "$out/train-resnet20"
  timeout "${GPU_CHECK_TRAIN_S:-300}" "$gossip_bin" train "$cfg" --out "$out/train-resnet20" > "$out/train-resnet20.log" 2>&1 ||
    { echo "gpu-check: ResNet-20 training FAILED or ran out of time"; status=1; }
  tail -n 2 "$out/train-resnet20.log"
  RUN_ARGS=(--epochs 1)
  run_variant quickstart-resnet20 resnet20-8-cuda cuda
  run_variant quickstart-resnet20 resnet20-8-cpu cpu
  # The 8 peers sharing the GPU under MPS and as the threads of one process (a table, no target).
  run_variant quickstart-resnet20 shared-resnet20-8-cuda-mps cuda mps=auto
  run_variant quickstart-resnet20 shared-resnet20-8-cuda-threads cuda mps=off peers_per_process=8
  run_variant quickstart-resnet20 shared-resnet20-8-cuda-threads-graphs cuda mps=off \
    peers_per_process=8 graphs=step
}

step_sim() {
  echo "== sim: the 16-peer ResNet-20 ring in gossip sim, its virtual peers on the GPU"
  local cfg
  # GPU_CHECK_SIM_WORKERS worker threads (4), each with its own stream, peer p on worker p mod 4.
  cfg=$(variant sim-ring-16-resnet20 sim-resnet20-16-cuda backend=cuda graphs=step)
  rm -rf "$out/run-sim-resnet20-16-cuda"
  timeout "${GPU_CHECK_SIM_S:-420}" "$gossip_bin" sim "$cfg" --out "$out/run-sim-resnet20-16-cuda" \
    --workers "${GPU_CHECK_SIM_WORKERS:-4}" > "$out/run-sim-resnet20-16-cuda.log" 2>&1 ||
    { echo "gpu-check: the 16-peer ResNet-20 sim FAILED or ran out of time"; status=1; }
  tail -n 3 "$out/run-sim-resnet20-16-cuda.log"
}

# gossip sim of the 16-peer ResNet-20 ring for half an epoch on the GPU with 1, 2 and 4 worker
# threads (a stream each): what running virtual peers side by side gains (run-shared-sim-*).
sim_workers() {
  local cfg workers
  cfg=$(variant sim-ring-16-resnet20 shared-sim-resnet20 backend=cuda graphs=step)
  for workers in 1 2 4; do
    rm -rf "$out/run-shared-sim-resnet20-16-cuda-w$workers"
    timeout 120 "$gossip_bin" sim "$cfg" --epochs 0.5 --workers "$workers" \
      --out "$out/run-shared-sim-resnet20-16-cuda-w$workers" \
      > "$out/run-shared-sim-resnet20-16-cuda-w$workers.log" 2>&1 ||
      { echo "gpu-check: sim with $workers workers FAILED"; status=1; }
    grep -h "virtual peers ran on\|^average model" "$out/run-shared-sim-resnet20-16-cuda-w$workers.log"
  done
  grep -ho '"params_sha256": \["[0-9a-f]*' "$out"/run-shared-sim-resnet20-16-cuda-w*/summary.json |
    sort | uniq -c  # one line: the same parameters whatever the worker count
  python3 scripts/gpu_figures.py "$out" > /dev/null 2>&1
}

step_shared() {
  echo "== shared: 8 peers on one GPU, with and without CUDA MPS (train.mps), as threads of one"
  echo "   process (train.peers_per_process), beside the CPU"
  echo "nvidia-cuda-mps-control: $(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null || echo 'not found')"
  # The quickstart's MLP step (batch 32) launched kernel by kernel and as a CUDA graph.
  env -u OPENBLAS_CORETYPE timeout 120 "$gossip_bin" bench step --backend cuda \
    --model configs/quickstart.yaml --batch 32 --steps 200 --json > "$out/step_mlp_b32_fp32.json" ||
    { echo "gpu-check: bench step of the quickstart's MLP FAILED"; status=1; }
  grep -o '"b32_ours_us":[0-9.]*\|"b32_graph_us":[0-9.]*\|"graph_refusal":"[^"]*"' \
    "$out/step_mlp_b32_fp32.json" | tr '\n' ' ' | sed 's/^/  mlp: /'
  echo
  RUN_ARGS=()
  run_variant quickstart shared-quickstart-cuda-nomps cuda mps=off
  run_variant quickstart shared-quickstart-cuda-mps cuda mps=auto
  run_variant quickstart shared-quickstart-cuda-threads cuda mps=off peers_per_process=8
  run_variant quickstart shared-quickstart-cuda-threads-graphs cuda mps=off peers_per_process=8 \
    graphs=step
  run_variant quickstart shared-quickstart-cuda-mps-graphs cuda mps=auto graphs=step
  # gossip.overlap: each round's message copied on a side stream during the first step.
  run_variant quickstart shared-quickstart-cuda-threads-overlap cuda mps=off \
    peers_per_process=8 gossip.overlap=true
  run_variant quickstart shared-quickstart-cpu cpu
  RUN_ARGS=(--epochs 2)
  run_variant quickstart-cnn shared-quickstart-cnn-cuda-mps cuda mps=auto
  run_variant quickstart-cnn shared-quickstart-cnn-cuda-threads cuda mps=off peers_per_process=8
  run_variant quickstart-cnn shared-quickstart-cnn-cuda-threads-graphs cuda mps=off \
    peers_per_process=8 graphs=step
  run_variant quickstart-cnn shared-quickstart-cnn-cpu cpu
  sim_workers
  grep -ho '"graphs": "[^"]*"' "$out"/run-shared-*-graphs/peers/*/summary.json | sort | uniq -c
  grep -h "gossip run: .*MPS\|gossip run: .*GPU\|gossip run: .*processes of up to" "$out"/run-shared-*.log | sort | uniq -c
}

step_byzantine() {
  echo "== byzantine: peer 3 flips its sign; clipped and trimmed_mean, on the GPU and the CPU"
  printf 'faults: [{round: 1, attack: [3], kind: sign_flip}]\n' > "$out/sign-flip.yaml"
  local aggregate backend
  for aggregate in clipped trimmed_mean; do
    for backend in cuda cpu; do
      RUN_ARGS=(--faults "$out/sign-flip.yaml" --aggregate "$aggregate")
      run_variant quickstart "byzantine-$aggregate-$backend" "$backend"
    done
  done
}

for s in $steps; do
  case "$s" in
    tests|step|runs|resnet|sim|shared|byzantine) "step_$s" ;;
    *) echo "gpu-check: unknown step '$s' in GPU_CHECK_STEPS"; status=1 ;;
  esac
  # The figures so far, after every step: a check cut short by its machine's time limit still
  # leaves what it measured.
  python3 scripts/gpu_figures.py "$out" > /dev/null 2>&1
done
python3 scripts/gpu_figures.py "$out" || status=1
echo "gpu-check: done (status $status); figures in $out/gpu-check.md and $out/gpu-figures.json"
exit "$status"
