#!/usr/bin/env bash
# Installs what attnscope needs on Debian 12 (only the packages that are
# missing), then configures and builds into build/ (binaries in build/bin/).
# Usage: scripts/setup.sh [TARGET...]  (no target: build everything)
# Environment: ATTNSCOPE_BUILD_DIR (default build/), ATTNSCOPE_CMAKE_ARGS
# (extra configure arguments, e.g. the sanitizer builds' -DATTNSCOPE_SANITIZE=
# address: scripts/sanitize.sh), ATTNSCOPE_JOBS (parallel jobs; default from
# cores and memory).
# Idempotent: a second run with nothing changed takes a few seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libtorch-dev libopenblas0-openmp libdnnl-dev
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev grpc-proto
  prometheus-cpp-dev prometheus
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb xauth fonts-droid-fallback
  libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libsentencepiece-dev zlib1g-dev
  openssl
  python3 curl
  chromium
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "attnscope setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CI (CI=true) builds with warnings as errors; anyone can ask for it with
# ATTNSCOPE_WARNINGS_AS_ERRORS=ON. Otherwise the configured value is kept, so
# running the run and test commands one after the other never rebuilds.
WERROR_ARGS=()
if [[ -n "${ATTNSCOPE_WARNINGS_AS_ERRORS:-}" ]]; then
  WERROR_ARGS=(-DATTNSCOPE_WARNINGS_AS_ERRORS="$ATTNSCOPE_WARNINGS_AS_ERRORS")
elif [[ "${CI:-}" == "true" ]]; then
  WERROR_ARGS=(-DATTNSCOPE_WARNINGS_AS_ERRORS=ON)
fi
read -r -a EXTRA_ARGS <<<"${ATTNSCOPE_CMAKE_ARGS:-}"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${WERROR_ARGS[@]}" \
  "${EXTRA_ARGS[@]}" >/dev/null
# libtorch translation units need ~1.5 GB each: cap parallel jobs by memory.
mem_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
jobs=$(( $(nproc) + 1 ))
(( jobs > mem_gb / 2 && mem_gb >= 2 )) && jobs=$(( mem_gb / 2 ))
jobs="${ATTNSCOPE_JOBS:-$jobs}"
# Arguments name the targets to build (default: everything, tests included).
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" "${targets[@]}" -- -j "$jobs"
