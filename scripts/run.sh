#!/usr/bin/env bash
# Quick start: set up (packages, build), then run attnscope-server with the
# bundled model in the foreground (Ctrl+C drains and stops it). Extra
# arguments go to attnscope-server (see attnscope-server --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" attnscope-server attnscope attnscope-dashboard
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
echo "Try: $BUILD_DIR/bin/attnscope --server 127.0.0.1:50051 analyze --text \"The cat sat on the keyboard again.\""
exec "$BUILD_DIR/bin/attnscope-server" "$@"
