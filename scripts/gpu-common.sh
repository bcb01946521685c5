# Sourced by the scripts/gpu-*.sh checks: the output folder, the LibTorch of the installed PyTorch, and one
# configure + build of build-gpu with the same arguments everywhere, so that running several of the scripts
# in one session builds once (different CUDA flags would rebuild every kernel).
#   PARETO_SHARED       the shared data (default ../shared)
#   PARETO_DEPS_PREFIX  extra prefix for the PCRE2/SQLite/utf8proc headers the GPU machine lacks
#   PARETO_CMAKE_ARGS   more configure arguments (e.g. -DPARETO_GTEST_SOURCE_DIR=...)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/build-gpu/results}"
mkdir -p "$out"
export PARETO_SHARED="${PARETO_SHARED:-$here/../shared}"
export PARETO_DB="$out/pareto.db"
cli="$here/build-gpu/app/cli/pareto-cli"
status=0
step() { echo; echo "== [${SECONDS}s] $*"; }
summary() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure|Expected|Which is|error:|parts from" "$1" | head -${2:-30}; }

# gpu_build TARGET...: configure (Release, no GUI, ptxas register report) and build the targets; exits on failure.
gpu_build() {
  local torch_prefix prefix
  torch_prefix="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
  prefix="$torch_prefix${PARETO_DEPS_PREFIX:+;$PARETO_DEPS_PREFIX}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
  step "configure+build $*"
  cmake -S "$here" -B "$here/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARETO_GUI=OFF \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_FLAGS="-Xptxas=-v" ${PARETO_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 \
    || { tail -40 "$out/configure.log"; exit 1; }
  cmake --build "$here/build-gpu" -j "$(nproc)" --target "$@" ${PARETO_EXTRA_TARGETS:-} >>"$out/build.log" 2>&1 \
    || { grep -B2 -A12 "error" "$out/build.log" | head -80; exit 1; }
  # Each target's compile time (ninja's log: start and end in ms, then the output): the build is a fifth of a
  # session's device time, and this says which files it goes to.
  cp "$here/build-gpu/.ninja_log" "$out/ninja-log.txt" 2>/dev/null || true
}
