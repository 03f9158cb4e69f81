#!/usr/bin/env bash
# Quick start: set up (packages, build), then run attnscope-server with the
# bundled model in the foreground (Ctrl+C drains and stops it). Extra
# arguments go to attnscope-server (see attnscope-server --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" attnscope-server attnscope attnscope-dashboard
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
# OpenBLAS 0.3.21 does not recognise some (virtual) CPU models and falls back
# to generic kernels several times slower; name the right ones unless the
# environment already does (see docs/performance.md).
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
  [[ -n "${OPENBLAS_CORETYPE:-}" ]] && echo "Using OpenBLAS kernels OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
fi
echo "Try: $BUILD_DIR/bin/attnscope --server 127.0.0.1:50051 analyze --text \"The cat sat on the keyboard again.\""
exec "$BUILD_DIR/bin/attnscope-server" "$@"
