#!/bin/sh
# Entrypoint of the attnscope image: picks OpenBLAS's kernels as
# scripts/run.sh does (OpenBLAS 0.3.21 falls back to generic kernels on CPU
# models it does not know), then runs attnscope-server with the arguments.
set -e
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
exec /usr/local/bin/attnscope-server "$@"
