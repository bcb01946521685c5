#!/usr/bin/env bash
# Prepares, on a Debian 12 development machine, what a run on the GPU machine (the device tool) needs beside the
# working tree, in ignored folders to name in the call's `carry` (64 MiB in all; these take ~57):
#   .deps/        the Debian -dev packages of PCRE2, SQLite, utf8proc, nlohmann-json and CLI11 (the GPU machine has
#                 no apt) and the GoogleTest sources; scripts/device-run.sh unpacks them there
#   .streamdata/  the part of ../shared the GPU scripts read: data/, golden/, models/ref-tiny, models/ref-small,
#                 tokenizers/llama3
#   scripts/device-carry.sh            then, in the device call: bash scripts/device-run.sh SCRIPT [SCRIPT...]
# PARETO_SHARED (default ../shared).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${PARETO_SHARED:-$here/../shared}"
mkdir -p "$here/.deps"
(cd "$here/.deps" && apt-get download nlohmann-json3-dev libcli11-dev libpcre2-dev libpcre2-8-0 libpcre2-16-0 \
   libpcre2-32-0 libpcre2-posix3 libsqlite3-dev libsqlite3-0 libutf8proc-dev libutf8proc2 >/dev/null)
[ -f /usr/src/googletest/CMakeLists.txt ] || { echo "device-carry.sh: install libgtest-dev (the GoogleTest sources)" >&2; exit 1; }
rm -rf "$here/.deps/googletest" && cp -r /usr/src/googletest "$here/.deps/googletest"
rm -rf "$here/.streamdata/shared" && mkdir -p "$here/.streamdata/shared/models" "$here/.streamdata/shared/tokenizers"
cp -r "$shared/data" "$shared/golden" "$here/.streamdata/shared/"
cp -r "$shared/models/ref-tiny" "$shared/models/ref-small" "$here/.streamdata/shared/models/"
cp -r "$shared/tokenizers/llama3" "$here/.streamdata/shared/tokenizers/"
du -sh "$here/.deps" "$here/.streamdata"
