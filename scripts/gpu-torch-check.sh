#!/usr/bin/env bash
# PyTorch models on a GPU through gossip, on a GPU machine without Debian's packages, given
# what scripts/gpu-bundle.sh packs (unpacked here: build/, gpu-bundle/). It checks, into
# ${GPU_CHECK_OUT:-runs/gpu-torch}/:
#   1. the Python package built here, by this machine's compiler for its python3
#      (scripts/python-build.sh into build-python/python; GOSSIP_PYTHONPATH names a package
#      folder built elsewhere instead), and `import gossip` beside its torch and CUDA;
#   2. the Python front end's CUDA and overlap tests (tests/python/test_torch_frontend.py);
#   3. ResNet-18 (examples/torch_resnet.py) with 8 ranks on one GPU, batch 32, over 1.1 epochs
#      of Fashion-MNIST: each rank's mean step time over steps 50-250 with gossip's round
#      replaced by nothing, with the synchronous round and with the overlapped one, a round
#      every step, in fp32 and under bf16 autocast; a round every 4 steps (gossip.period 4,
#      local SGD) synchronous and overlapped, every 8 overlapped, and every step overlapped
#      with bf16 messages (gossip.wire bf16); each run's average model's accuracy at the end
#      (10,000 test images) and its wall time;
# GPU_TORCH_RUNS names a subset of the runs (e.g. "none-fp32 sync-fp32 overlap-fp32"; default
# all: none-fp32 overlap-fp32 sync-fp32 none-bf16 overlap-bf16 overlap4-fp32 sync4-fp32
# overlap8-fp32 overlap-wire16).
# It writes gpu-torch.json (the card, the date, built_on_gpu, import_on_gpu, and each ratio
# of a schedule's step time to the no-round one under a key naming it, e.g.
# resnet18_overlap_overhead, and the accuracy of the overlapped schedule less the synchronous
# one's, resnet18_overlap_minus_sync_accuracy).
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
out="${GPU_CHECK_OUT:-runs/gpu-torch}"
mkdir -p "$out"
pythonpath="${GOSSIP_PYTHONPATH:-build-python/python}"
export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOSSIP_BIN="$PWD/build/src/cli/gossip"
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ] && [ -d gpu-bundle/fashion-mnist ]; then
  mkdir -p "$data" && cp gpu-bundle/fashion-mnist/*.gz "$data/"
fi
nvidia-smi -L > "$out/gpus.txt" 2>&1

echo "== 1. build the Python package here, and import gossip"
if [ -z "${GOSSIP_PYTHONPATH:-}" ]; then
  timeout "${GPU_TORCH_BUILD_S:-240}" bash scripts/python-build.sh "$pythonpath" 2>&1 |
    tee "$out/python-build.txt"
fi
export PYTHONPATH="$PWD/$pythonpath"
python3 -c 'import sys, torch, gossip, gossip.torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      "gossip", gossip.__file__)' 2>&1 | tee "$out/import.txt"

echo "== 2. the front end's CUDA and overlap tests"
(cd tests/python && timeout "${GPU_TORCH_TEST_S:-120}" python3 -m pytest -q -x test_torch_frontend.py \
   -k "cuda or overlap" -p no:cacheprovider) 2>&1 | tail -n 15 | tee "$out/pytest.txt"

# The figures so far into gpu-torch.json (after every run, so a run cut short by its machine's
# time limit still leaves what it measured), printed when PRINT is 1.
summarize() {
  PRINT=$1 python3 - "$out" <<'EOF'
import datetime, glob, json, os, re, sys
out = sys.argv[1]
res = {"card": open(os.path.join(out, "gpus.txt")).read().split(":")[1].split("(")[0].strip()
       if os.path.exists(os.path.join(out, "gpus.txt")) else None,
       "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
       "import_on_gpu": "gossip/__init__.py" in open(os.path.join(out, "import.txt")).read(),
       "built_on_gpu": os.path.exists(os.path.join(out, "python-build.txt")) and
                       "import gossip works" in open(os.path.join(out, "python-build.txt")).read(),
       "pytest": open(os.path.join(out, "pytest.txt")).read().strip().splitlines()[-1:]}
means = {}
runs = ["none-fp32", "sync-fp32", "overlap-fp32", "none-bf16", "overlap-bf16", "overlap4-fp32",
        "sync4-fp32", "overlap8-fp32", "overlap-wire16"]
for run in runs:
    key = "resnet18_" + run.replace("-", "_")
    ms = []
    for log in glob.glob(os.path.join(out, f"resnet18-{run}", "peers", "*", "peer.log")):
        m = re.search(r"steps 50-250: ([0-9.]+) ms/step(.*)", open(log).read())
        if m:
            ms.append(float(m.group(1)))
    if ms:
        means[run] = sum(ms) / len(ms)
        res[key + "_ms"] = means[run]
        res[key + "_ranks"] = len(ms)
    try:  # the average model's accuracy at the end (10,000 test images), and the run's time
        summary = json.load(open(os.path.join(out, f"resnet18-{run}", "summary.json")))
        res[key + "_accuracy"] = summary.get("test_accuracy")
        res[key + "_wall_s"] = summary.get("wall_seconds")
    except (OSError, ValueError):
        pass
for run, key in [("sync-fp32", "resnet18_sync_overhead"), ("overlap-fp32", "resnet18_overlap_overhead"),
                 ("overlap-bf16", "resnet18_overlap_overhead_bf16"),
                 ("overlap4-fp32", "resnet18_overlap_period4_overhead"),
                 ("sync4-fp32", "resnet18_sync_period4_overhead"),
                 ("overlap8-fp32", "resnet18_overlap_period8_overhead"),
                 ("overlap-wire16", "resnet18_overlap_wire_bf16_overhead")]:
    base = "none-bf16" if run.endswith("bf16") else "none-fp32"
    if run in means and base in means:
        res[key] = means[run] / means[base]
for run, against, key in [("overlap-fp32", "sync-fp32", "resnet18_overlap_minus_sync_accuracy"),
                          ("overlap4-fp32", "sync4-fp32",
                           "resnet18_overlap_period4_minus_sync_accuracy")]:
    a, b = res.get(f"resnet18_{run.replace('-', '_')}_accuracy"), \
        res.get(f"resnet18_{against.replace('-', '_')}_accuracy")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        res[key] = a - b
json.dump(res, open(os.path.join(out, "gpu-torch.json"), "w"), indent=1, sort_keys=True)
if os.environ.get("PRINT") == "1":
    print(json.dumps(res, indent=1, sort_keys=True))
EOF
}

echo "== 3. ResNet-18, 8 ranks on one GPU"
trap 'rm -f configs/.gpu-torch-resnet*.yaml' EXIT
# name: schedule (none: gossip's round replaced by nothing), gossip.period, autocast, wire
runs="none-fp32:none:1:off:fp32 overlap-fp32:overlap:1:off:fp32 sync-fp32:sync:1:off:fp32
none-bf16:none:1:bf16:fp32 overlap-bf16:overlap:1:bf16:fp32 overlap4-fp32:overlap:4:off:fp32
sync4-fp32:sync:4:off:fp32 overlap8-fp32:overlap:8:off:fp32 overlap-wire16:overlap:1:off:bf16"
for spec in $runs; do
  IFS=: read -r run schedule period autocast wire <<< "$spec"
  # GPU_TORCH_RUNS: the names of the runs to make, in the order above (default: all of them).
  if [ -n "${GPU_TORCH_RUNS:-}" ] && ! [[ " $GPU_TORCH_RUNS " == *" $run "* ]]; then continue; fi
  cfg=configs/.gpu-torch-resnet-p$period.yaml
  sed -e 's#^exec: .*#exec: python3 examples/torch_resnet.py#' -e 's/^  limit_train: .*/  limit_train: 0/' \
      -e 's/^  epochs: .*/  epochs: 1.1/' -e "s/^  period: .*/  period: $period/" \
      configs/torch-resnet-short.yaml > "$cfg"
  env GOSSIP_NO_ROUNDS=$([ "$schedule" = none ] && echo 1 || echo 0) \
      GOSSIP_OVERLAP=$([ "$schedule" = overlap ] && echo 1 || echo 0) \
      GOSSIP_AUTOCAST=$autocast GOSSIP_EVAL_LIMIT=10000 \
      timeout "${GPU_TORCH_RUN_S:-60}" "$GOSSIP_BIN" run "$cfg" --out "$out/resnet18-$run" \
      --wire "$wire" --no-progress > "$out/resnet18-$run.log" 2>&1 ||
    echo "gpu-torch: run $run FAILED"
  echo "$run: $(grep -h 'steps 50-250' "$out/resnet18-$run"/peers/*/peer.log 2>/dev/null | head -n 1)"
  summarize 0
done
summarize 1
