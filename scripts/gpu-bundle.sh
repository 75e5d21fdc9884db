#!/usr/bin/env bash
# Packs what `scripts/gpu-check.sh --prebuilt` needs on a GPU machine that has the NVIDIA driver,
# CUDA 13 (cuBLAS, the CUDA runtime) and Python with PyTorch (and its cuDNN), but none of
# Debian's packages and no network: the binaries of this build (gossip, test_cuda, the CUDA
# plugin), the libraries they link that such a machine lacks (OpenBLAS, oneDNN, yaml-cpp and
# what those link; never glibc, libstdc++, libgcc, OpenSSL, zlib or CUDA's own, which it has),
# and Fashion-MNIST. One xz tarball, under 60 MB, unpacked in a checkout of the same commit:
#   bash scripts/gpu-bundle.sh [--no-build] [FILE]   (default runs/gpu-bundle.tar.xz)
#   then there:  tar xf FILE && bash scripts/gpu-check.sh --prebuilt
# It builds first (the set-up script's build, with the CUDA backend forced on); --no-build packs
# what the build folder (GOSSIP_BUILD_DIR, default build) has, and refuses one without the CUDA
# plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
build=0
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --no-build) build=1; shift ;;
esac
out="${1:-runs/gpu-bundle.tar.xz}"
limit=$((60 * 1000 * 1000))
dir="${GOSSIP_BUILD_DIR:-build}"

if [ "$build" -eq 0 ]; then
  if [ ! -d "$dir" ]; then bash scripts/setup.sh; fi
  command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
  meson configure "$dir" -Dcuda=enabled >/dev/null
  ninja -C "$dir" src/cli/gossip tests/test_cuda src/compute/libgossip-cuda.so >/dev/null
fi
for f in src/cli/gossip tests/test_cuda src/compute/libgossip-cuda.so; do
  [ -f "$dir/$f" ] || { echo "gpu-bundle: $dir/$f is missing (a build with the CUDA backend and its" \
                             "tests is what a GPU machine needs)" >&2; exit 1; }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/src/cli" "$stage/build/tests" "$stage/build/src/compute" \
         "$stage/gpu-bundle/lib" "$stage/gpu-bundle/fashion-mnist"
cp "$dir/src/cli/gossip" "$stage/build/src/cli/"
cp "$dir/tests/test_cuda" "$stage/build/tests/"
cp "$dir/src/compute/libgossip-cuda.so" "$stage/build/src/compute/"

# What the machine has already: the C and C++ runtimes, OpenSSL, zlib, and CUDA's libraries.
system='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libssl|libcrypto|libz|libcuda|libcudart|libcublas|libcublasLt)\.so'
for bin in "$dir/src/cli/gossip" "$dir/tests/test_cuda" "$dir/src/compute/libgossip-cuda.so"; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if ! [[ "$soname" =~ $system ]]; then cp -L "$path" "$stage/gpu-bundle/lib/$soname"; fi
done
cp /usr/share/datasets/fashion-mnist/*.gz "$stage/gpu-bundle/fashion-mnist/"
git rev-parse HEAD > "$stage/gpu-bundle/commit"
ls "$stage/gpu-bundle/lib" > "$stage/gpu-bundle/libraries"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" build gpu-bundle
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1000000)) MB: gossip, test_cuda, the CUDA plugin," \
     "$(wc -l < "$stage/gpu-bundle/libraries") libraries ($(tr '\n' ' ' < "$stage/gpu-bundle/libraries"))," \
     "Fashion-MNIST; commit $(cut -c1-12 "$stage/gpu-bundle/commit")"
if [ "$size" -ge "$limit" ]; then
  echo "gpu-bundle: $out is $size bytes, over the 60 MB a GPU machine's transfer allows" >&2
  exit 1
fi
