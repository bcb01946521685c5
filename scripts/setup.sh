#!/usr/bin/env bash
# Sets Pareto up on Debian 12: installs the Debian packages it builds against, configures and builds.
#   scripts/setup.sh [--no-gui] [--fuzz] [--build-dir DIR] [--skip-apt] [-- extra cmake args]
# --fuzz also installs clang and its libFuzzer runtime (scripts/test.sh asks for it: CI fuzzes briefly).
# Environment: PARETO_BUILD_DIR (default build), PARETO_JOBS (default: all cores),
#              CMAKE_PREFIX_PATH to build against another LibTorch (e.g. the one of your CUDA PyTorch).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${PARETO_BUILD_DIR:-$here/build}"
gui=ON
fuzz=0
apt=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gui) gui=OFF ;;
    --fuzz) fuzz=1 ;;
    --skip-apt) apt=0 ;;
    --build-dir) build_dir="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# libopenblas0-openmp: without it Debian's LibTorch runs on the reference BLAS, 25x slower.
packages=(build-essential cmake ninja-build pkg-config
          libtorch-dev libopenblas0-openmp nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libsqlite3-dev
          libgtest-dev libgmock-dev)
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
