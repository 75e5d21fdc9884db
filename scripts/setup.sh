#!/usr/bin/env bash
# Installs what gossip needs from Debian's packages (only what is missing), then configures and
# builds with Meson in build/ and installs `gossip` into /usr/local (bin/gossip, share/gossip/),
# so that it is on the PATH. Called by scripts/run.sh and scripts/test.sh; safe to run again.
# The launchers the tests start peers with come from Debian too: Open MPI's mpirun
# (openmpi-bin), a one-node Slurm cluster (slurm-wlm, munge); python3-yaml reads the
# Kubernetes manifests in their test. The Python module is built for Debian's /usr/bin/python3,
# the interpreter python3-torch is installed for (pybind11-dev; its tests use python3-pytest,
# and python3-protobuf parses the TensorBoard event files gossip writes). The dashboard's tests
# open it in a headless browser (chromium, chromium-driver, python3-selenium) and check every
# /metrics page with promtool (prometheus). `pip install .` is tested in a venv (python3-venv,
# python3-pip, meson-python from python3-mesonpy), the package type-checked with python3-mypy,
# and examples/torch_resnet.py uses torchvision's ResNet-18 (python3-torchvision).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build pkg-config g++ libasio-dev libyaml-cpp-dev libcereal-dev catch2
          libopenblas-dev libdnnl-dev libblis-dev libeigen3-dev zlib1g-dev libssl-dev openssl dataset-fashion-mnist
          gnuplot-nox iproute2 nftables clang libclang-rt-14-dev python3-yaml python3-kubernetes openmpi-bin slurm-wlm munge
          python3 python3-dev pybind11-dev python3-pybind11 python3-numpy python3-torch
          python3-pytest python3-protobuf chromium chromium-driver python3-selenium prometheus
          python3-venv python3-pip python3-mesonpy python3-mypy python3-torchvision)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# nvcc lives outside PATH on some machines; let Meson find it when the toolkit is installed.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release
fi
ninja -C build

# meson install: bin/gossip and share/gossip/ under the prefix (/usr/local unless configured).
prefix=$(meson introspect build --buildoptions | python3 -c \
  'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
if $sudo_cmd meson install -C build --no-rebuild --quiet >/dev/null; then
  echo "setup: installed gossip as $prefix/bin/gossip (configs and topologies in $prefix/share/gossip)"
else
  echo "setup: could not install into $prefix; the binary is build/src/cli/gossip" >&2
fi
