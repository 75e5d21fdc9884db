#!/usr/bin/env bash
# Builds gossip (installing what is missing) and runs the main job. Until `gossip run` exists the
# main job is one peer on Fashion-MNIST: gossip train configs/single.yaml. Results in runs/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-runs/single}
./build/src/cli/gossip train configs/single.yaml --out "$out"
echo "results: $out/summary.json, $out/metrics.csv"
