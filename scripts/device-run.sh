#!/usr/bin/env bash
# Runs GPU scripts on the GPU machine (the device tool) with what scripts/device-carry.sh prepared: unpacks the
# carried Debian packages, points the build at them and the scripts at the carried shared data, runs each
# SCRIPT (a scripts/gpu-*.sh, with its environment) into one log folder, and leaves in $OUT the console of each
# and all logs and JSON results in one archive (the device returns at most 8 files).
#   bash scripts/device-run.sh scripts/gpu-streaming.sh [scripts/gpu-decode.sh ...]
# PARETO_DEVICE_SCRIPT_TIMEOUT (seconds) bounds each script, so that a call near the device's time limit still
# archives what the script wrote before it was stopped.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
mkdir -p .deps/root && for f in .deps/*.deb; do dpkg-deb -x "$f" .deps/root; done
export PARETO_DEPS_PREFIX="$here/.deps/root/usr" PARETO_CMAKE_ARGS="-DPARETO_GTEST_SOURCE_DIR=$here/.deps/googletest" \
       PARETO_SHARED="${PARETO_SHARED:-$here/.streamdata/shared}"
export LD_LIBRARY_PATH="$here/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=/tmp/device-run; mkdir -p "$log"
out_dir="${OUT:-$log/out}"; mkdir -p "$out_dir"
rc=0
for script in "$@"; do
  name="$(basename "$script" .sh)"
  timeout -k 5 "${PARETO_DEVICE_SCRIPT_TIMEOUT:-0}" bash "$script" "$log" 2>&1 | tee "$out_dir/$name.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
done
tar czf "$out_dir/logs.tgz" -C "$log" --exclude='*.db' --exclude=build.log . 2>/dev/null
grep -B2 -A12 "error" "$log/build.log" 2>/dev/null | head -60 >"$out_dir/build-errors.txt"
exit $rc
