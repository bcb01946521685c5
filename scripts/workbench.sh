#!/usr/bin/env bash
# Sets Pareto up (scripts/setup.sh) and opens the workbench; arguments go to `pareto` (e.g. a model folder).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
exec "${PARETO_BUILD_DIR:-$here/build}/app/gui/pareto" "$@"
