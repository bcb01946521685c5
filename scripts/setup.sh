#!/usr/bin/env bash
# Sets Pareto up on Debian 12: installs the Debian packages it builds against, configures and builds.
#   scripts/setup.sh [--no-gui] [--fuzz] [--llama-cpp] [--build-dir DIR] [--skip-apt] [-- extra cmake args]
# --fuzz also installs clang and its libFuzzer runtime (scripts/test.sh asks for it: CI fuzzes briefly).
# --llama-cpp installs the npm package node-llama-cpp (llama.cpp's prebuilt CPU binary) into BUILD/node-llama-cpp,
# never the repo: the GGUF export test scores exported files with it (scripts/test.sh asks for it). Needs Node >= 20.
# Environment: PARETO_BUILD_DIR (default build), PARETO_JOBS (default: all cores),
#              CMAKE_PREFIX_PATH to build against another LibTorch (e.g. the one of your CUDA PyTorch).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${PARETO_BUILD_DIR:-$here/build}"
gui=ON
fuzz=0
llama_cpp=0
apt=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gui) gui=OFF ;;
    --fuzz) fuzz=1 ;;
    --llama-cpp) llama_cpp=1 ;;
    --skip-apt) apt=0 ;;
    --build-dir) build_dir="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# libopenblas0-openmp: without it Debian's LibTorch runs on the reference BLAS, 25x slower. libgloo-dev: the gloo
# headers LibTorch's c10d ProcessGroupGloo needs (compress --processes on the CPU; its code is in libtorch_cpu).
packages=(build-essential cmake ninja-build pkg-config
          libtorch-dev libopenblas0-openmp nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libsqlite3-dev
          libgloo-dev libgtest-dev libgmock-dev)
if [ "$gui" = ON ]; then packages+=(qt6-base-dev qt6-svg-dev libqcustomplot-dev libgl-dev); fi
if [ "$fuzz" = 1 ]; then packages+=(clang libclang-rt-14-dev); fi

if [ "$apt" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}" >&2
    sudo_cmd=()
    if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

jobs="${PARETO_JOBS:-$(nproc)}"
cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARETO_GUI="$gui" "${extra[@]}"
cmake --build "$build_dir" -j "$jobs"

# node-llama-cpp pinned to one version (its prebuilt linux-x64 CPU binary runs on Debian 12), installed beside the
# build so that a test which cannot find it fails instead of skipping.
if [ "$llama_cpp" = 1 ]; then
  node_major="$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')"
  if [ -z "$node_major" ] || [ "$node_major" -lt 20 ]; then
    echo "setup.sh: node-llama-cpp needs Node.js 20 or newer (found: $(node --version 2>/dev/null || echo none)); Debian 12's" \
         "nodejs is 18: install Node 20 from nodejs.org or NodeSource, then run this again" >&2
    exit 1
  fi
  llama_dir="$build_dir/node-llama-cpp"
  version=3.21.1
  if [ "$(node -p "require('$llama_dir/node_modules/node-llama-cpp/package.json').version" 2>/dev/null)" != "$version" ]; then
    echo "setup.sh: installing node-llama-cpp@$version into $llama_dir" >&2
    mkdir -p "$llama_dir"
    [ -f "$llama_dir/package.json" ] || echo '{"private": true}' >"$llama_dir/package.json"
    (cd "$llama_dir" && npm install --no-audit --no-fund --loglevel=error -E "node-llama-cpp@$version")
  fi
fi
