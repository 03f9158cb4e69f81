#!/usr/bin/env bash
# Quick start: set up (packages, build), then analyze a sample prompt with the
# bundled model. Extra arguments go to `attnscope analyze`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
if (($#)); then
  exec "$BUILD_DIR/bin/attnscope" analyze "$@"
fi
exec "$BUILD_DIR/bin/attnscope" analyze --text "The cat sat on the keyboard again."
