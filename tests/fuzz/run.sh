#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, PARETO_FUZZ=ON) in their own build folder and runs each for a
# fixed time, with seed corpora made from the shared reference files (tests/fuzz/make_seeds.py).
#
#   tests/fuzz/run.sh [--time SECONDS] [--build-only] [--if-available] [TARGET...]
#
# --if-available: exit 0 with a note (instead of failing) where clang or its libFuzzer runtime is missing; this is
# how scripts/test.sh runs the short CI fuzz pass.
# TARGET: fuzz_safetensors fuzz_config fuzz_tokenizer fuzz_recipe (default: all, one after another). Environment:
# PARETO_FUZZ_BUILD_DIR (default build-fuzz), PARETO_FUZZ_TIME (default 60 s per target), PARETO_JOBS (build
# parallelism, default 2), PARETO_SHARED (default ../shared). The corpus each run grows is kept in
# $build/fuzz-corpus/TARGET and reused by the next run; a crashing input is saved as $build/fuzz-artifacts/
# TARGET-crash-* and the script exits 1. One summary line per target goes to stdout (and $build/fuzz-summary.txt).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${PARETO_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${PARETO_FUZZ_TIME:-60}"
shared="${PARETO_SHARED:-$root/../shared}"
build_only=0
if_available=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --time) seconds="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --if-available) if_available=1; shift ;;
    fuzz_*) targets+=("$1"); shift ;;
    *) echo "usage: $0 [--time SECONDS] [--build-only] [fuzz_safetensors|fuzz_config|fuzz_tokenizer|fuzz_recipe ...]" >&2
       exit 2 ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_safetensors fuzz_config fuzz_tokenizer fuzz_recipe)

unavailable() {
  if [[ $if_available == 1 ]]; then echo "fuzz: skipped: $1" >&2; exit 0; fi
  echo "fuzz: $1" >&2
  exit 2
}
for tool in clang clang++ cmake python3; do
  command -v "$tool" >/dev/null || unavailable "$tool not found (Debian: apt-get install clang cmake python3)"
done
# clang without its runtime libraries (Debian: libclang-rt-NN-dev, pulled in by the clang package) cannot link.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>/dev/null ||
  unavailable "clang++ cannot link -fsanitize=fuzzer,address,undefined (libFuzzer runtime missing)"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPARETO_GUI=OFF -DPARETO_TESTS=OFF -DPARETO_CUDA=OFF -DPARETO_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j "${PARETO_JOBS:-2}" --target "${targets[@]}"
[[ $build_only == 1 ]] && exit 0

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
python3 "$here/make_seeds.py" "$shared" "$root" "$seeds"
mkdir -p "$build/fuzz-artifacts"

# Longest input per target: a few times the largest seed, so mutations can grow it without slowing every run.
declare -A max_len=([fuzz_safetensors]=16384 [fuzz_config]=4096 [fuzz_tokenizer]=16384 [fuzz_recipe]=4096)

status=0
: > "$build/fuzz-summary.txt"
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  log="$build/fuzz-$t.log"
  set +e
  ASAN_OPTIONS="allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len="${max_len[$t]}" \
    -dict="$here/json.dict" -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1 \
    "$corpus" "$seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  line="$t: ${seconds}s, ${execs:-?} execs, coverage ${cov:-?} edges, corpus $(ls "$corpus" | wc -l) inputs, "
  if [[ $rc -eq 0 ]]; then
    line+="no findings"
  else
    line+="FINDING (exit $rc; see $log and $build/fuzz-artifacts/)"
    status=1
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error|uncaught exception' "$log" >&2 || true
  fi
  echo "$line" | tee -a "$build/fuzz-summary.txt"
done
exit $status
