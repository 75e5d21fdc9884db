#!/usr/bin/env bash
# Builds gossip (installing what is missing) and runs the main job: the quickstart network of 8
# peer processes on a ring, training on Fashion-MNIST (configs/quickstart.yaml). Results in
# runs/quickstart (or the folder given as the first argument).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-runs/quickstart}
./build/src/cli/gossip run configs/quickstart.yaml --out "$out"
echo "results: $out/summary.json, $out/metrics.csv, peer logs in $out/peers/"
