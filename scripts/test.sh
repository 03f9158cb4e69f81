#!/usr/bin/env bash
# Set up (packages, build), then run every test with CTest. Exits non-zero on
# any failure. Extra arguments go to ctest (e.g. -L unit, -R Tokenizer).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)" "$@"
