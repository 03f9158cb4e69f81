#!/usr/bin/env bash
# Installs what attnscope needs on Debian 12 (only the packages that are
# missing), then configures and builds into build/ (binaries in build/bin/).
# Idempotent: a second run with nothing changed takes a few seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-openmp
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev grpc-proto
  prometheus-cpp-dev prometheus
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb xauth
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libpcre2-dev
  chromium
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

# CI (CI=true) builds with warnings as errors; anyone can ask for it too.
WERROR="${ATTNSCOPE_WARNINGS_AS_ERRORS:-$([[ "${CI:-}" == "true" ]] && echo ON || echo OFF)}"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNSCOPE_WARNINGS_AS_ERRORS="$WERROR" >/dev/null
# libtorch translation units need ~1.5 GB each: cap parallel jobs by memory.
mem_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
jobs=$(( $(nproc) + 1 ))
(( jobs > mem_gb / 2 && mem_gb >= 2 )) && jobs=$(( mem_gb / 2 ))
cmake --build "$BUILD_DIR" -- -j "$jobs"
