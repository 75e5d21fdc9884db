#!/usr/bin/env bash
# Packs what `scripts/gpu-check.sh --prebuilt` needs on a GPU machine that has the NVIDIA driver,
# CUDA 13 (cuBLAS, the CUDA runtime) and Python with PyTorch (and its cuDNN), but none of
# Debian's packages and no network: the binaries of this build (gossip, test_cuda, the CUDA
# plugin), the libraries they link that such a machine lacks (OpenBLAS, oneDNN, yaml-cpp and
# what those link; never glibc, libstdc++, libgcc, OpenSSL, zlib or CUDA's own, which it has),
# Fashion-MNIST, and what scripts/python-build.sh needs there to build the Python package with
# that machine's compiler and Python (gpu-bundle/python/: gossip's rooms in one archive, their
# flags, the libraries to link). One xz tarball, under 60 MB, unpacked in a checkout of the
# same commit:
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

# For scripts/python-build.sh there: gossip's rooms that the Python extension links, their
# objects in one archive (the build's archives are thin), the flags they were compiled with,
# and the shared libraries the extension needs (those the machine lacks are in gpu-bundle/lib).
ext=$(ls "$dir"/python/gossip/_gossip*.so 2>/dev/null | head -n 1 || true)
if [ -z "$ext" ]; then
  echo "gpu-bundle: $dir has no Python extension (python/gossip/_gossip*.so; a build without" \
       "pybind11?)" >&2
  exit 1
fi
mkdir -p "$stage/gpu-bundle/python"
python3 - "$dir" "$stage/gpu-bundle/python" <<'PY'
import json, os, re, subprocess, sys
build, into = sys.argv[1], sys.argv[2]
ninja = open(os.path.join(build, "build.ninja")).read()
link = re.search(r"^build python/gossip/_gossip[^:]*\.so: cpp_LINKER .*?\n LINK_ARGS = (.*)$",
                 ninja, re.M)
objects = []
for room in dict.fromkeys(re.findall(r"(libgossip-[a-z]+\.a)", link.group(1))):
    listing = subprocess.run(["ar", "t", os.path.join(build, room)], check=True,
                             capture_output=True, text=True).stdout.split()
    # GNU ar names a thin archive's members by their path from here, or from the archive's
    # folder.
    objects += [m if os.path.exists(m) else os.path.join(build, m) for m in listing]
subprocess.run(["ar", "rcs", os.path.join(into, "libgossip-rooms.a")] + objects, check=True)
for c in json.load(open(os.path.join(build, "compile_commands.json"))):
    if c["file"].endswith("bindings.cpp"):
        keep = [w for w in c["command"].split()
                if w.startswith(("-D", "-std=", "-O", "-pthread", "-fvisibility"))]
        open(os.path.join(into, "flags"), "w").write(" ".join(keep) + "\n")
PY
[ -s "$stage/gpu-bundle/python/flags" ] ||
  { echo "gpu-bundle: no compile command for python/bindings.cpp in $dir" >&2; exit 1; }
readelf -d "$ext" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' |
  grep -Ev '^(ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)[.-]' \
  > "$stage/gpu-bundle/python/libraries"
git rev-parse HEAD > "$stage/gpu-bundle/commit"
ls "$stage/gpu-bundle/lib" > "$stage/gpu-bundle/libraries"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" build gpu-bundle
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1000000)) MB: gossip, test_cuda, the CUDA plugin," \
     "$(wc -l < "$stage/gpu-bundle/libraries") libraries ($(tr '\n' ' ' < "$stage/gpu-bundle/libraries"))," \
     "Fashion-MNIST, the Python extension's rooms; commit $(cut -c1-12 "$stage/gpu-bundle/commit")"
if [ "$size" -ge "$limit" ]; then
  echo "gpu-bundle: $out is $size bytes, over the 60 MB a GPU machine's transfer allows" >&2
  exit 1
fi
