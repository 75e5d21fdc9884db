#!/usr/bin/env bash
# Builds gossip's Python package where GPU users are: a machine with a C++ compiler, Python
# (with its headers: Python.h) and pip's pybind11, but none of Debian's packages and no
# network. It compiles python/bindings.cpp with THIS machine's compiler for THIS machine's
# python3, and links it against what scripts/gpu-bundle.sh packed on a machine that has the
# packages (unpack its tarball in a checkout of the same commit first):
#   gpu-bundle/python/libgossip-rooms.a  gossip's rooms (the library the extension calls), PIC
#   gpu-bundle/python/flags              the compile flags of the build that made them
#   gpu-bundle/python/libraries          the shared libraries the extension needs (sonames)
#   gpu-bundle/lib/                      those the machine lacks (OpenBLAS, oneDNN, yaml-cpp...)
# The package lands in OUT/gossip/ (default build-python/python): PYTHONPATH=OUT imports it,
# with gpu-bundle/lib on LD_LIBRARY_PATH. The extension's C++ calls only gossip's public headers
# (include/gossip/, the standard library and our own types), so no third-party header is needed.
#   bash scripts/python-build.sh [OUT]      PYTHON (default python3), CXX (default c++),
#                                           GOSSIP_BUNDLE_DIR (default gpu-bundle)
# It ends by importing the package in that python and printing where it was loaded from.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
out="${1:-build-python/python}"
py="${PYTHON:-python3}"
cxx="${CXX:-c++}"
bundle="${GOSSIP_BUNDLE_DIR:-gpu-bundle}"
fail() { echo "python-build: $*" >&2; exit 1; }

for f in libgossip-rooms.a flags libraries; do
  [ -f "$bundle/python/$f" ] ||
    fail "$bundle/python/$f is missing (unpack scripts/gpu-bundle.sh's tarball here first)"
done
command -v "$cxx" >/dev/null 2>&1 || fail "no C++ compiler '$cxx' (set CXX)"
command -v "$py" >/dev/null 2>&1 || fail "no python '$py' (set PYTHON)"
include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] ||
  fail "$py has no Python.h in $include (install its development headers, e.g. python3-dev)"
pybind11=$("$py" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null) ||
  fail "$py cannot import pybind11 (pip install pybind11)"
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
version=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')

mkdir -p "$out/gossip"
# Every file of the package: its modules, the extension's type stub and the py.typed marker.
cp python/gossip/*.py python/gossip/_gossip.pyi python/gossip/py.typed "$out/gossip/"
libraries=()
while read -r soname; do
  [ -n "$soname" ] && libraries+=("-l:$soname")
done < "$bundle/python/libraries"
read -r -a flags < "$bundle/python/flags"
echo "python-build: compiling python/bindings.cpp for Python $version with $("$cxx" --version | head -n 1)"
"$cxx" "${flags[@]}" -Iinclude -I"$include" -I"$pybind11" -shared -fPIC python/bindings.cpp \
  -o "$out/gossip/_gossip$suffix" \
  -Wl,--start-group "$bundle/python/libgossip-rooms.a" -Wl,--end-group \
  -L"$bundle/lib" -Wl,-rpath-link,"$bundle/lib" -Wl,--allow-shlib-undefined \
  "${libraries[@]}" -pthread
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PYTHONPATH="$out" "$py" -c 'import gossip, sys
print("python-build: import gossip works in Python", sys.version.split()[0], "from", gossip.__file__)'
