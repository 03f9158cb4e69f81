#!/usr/bin/env bash
# Builds the attnscope container image with podman (or buildah) on Debian 12
# without pulling anything from a container registry: the Debian 12 base image
# is made with debootstrap from Debian's own package mirror and imported as
# localhost/debian:bookworm, then the multi-stage Dockerfile builds on it.
#
# Usage: scripts/build-image.sh [IMAGE]      (default IMAGE: localhost/attnscope:latest)
#        scripts/build-image.sh --base-only  (only make localhost/debian:bookworm)
# Environment:
#   ATTNSCOPE_DEBIAN_MIRROR  mirror for debootstrap (default http://deb.debian.org/debian)
#   ATTNSCOPE_BASE_IMAGE     use this base instead of making one (e.g. docker.io/library/debian:12)
#   ATTNSCOPE_BUILD_JOBS     parallel compile jobs in the build stage (default: nproc)
#   ATTNSCOPE_PODMAN_ARGS    extra arguments for `podman build`. Inside a container with
#                            cgroup v1 and capped rlimits (the project's build machine) crun
#                            refuses to start; what worked there:
#                            "--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
# Needs root (or rootless podman with subuids) and: apt-get install podman buildah debootstrap
# Idempotent: an existing localhost/debian:bookworm is reused.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_ONLY=0
if [[ "${1:-}" == --base-only ]]; then BASE_ONLY=1; shift; fi
IMAGE="${1:-localhost/attnscope:latest}"
BASE="${ATTNSCOPE_BASE_IMAGE:-localhost/debian:bookworm}"
MIRROR="${ATTNSCOPE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
JOBS="${ATTNSCOPE_BUILD_JOBS:-$(nproc)}"

for tool in podman; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool not found (apt-get install podman buildah debootstrap)" >&2; exit 1; }
done

if [[ "$BASE" == localhost/debian:bookworm ]] && ! podman image exists "$BASE"; then
  command -v debootstrap >/dev/null || { echo "build-image: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
  rootfs="$(mktemp -d /tmp/attnscope-rootfs-XXXXXX)"
  trap 'rm -rf "$rootfs"' EXIT
  echo "build-image: debootstrap bookworm from $MIRROR into $rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR"
  # The same sources the project's machines use (main + updates + security).
  cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE"
  echo "build-image: imported $BASE"
fi

((BASE_ONLY)) && exit 0

echo "build-image: building $IMAGE from $BASE with $JOBS jobs"
# shellcheck disable=SC2086  # ATTNSCOPE_PODMAN_ARGS is a list of arguments
podman build ${ATTNSCOPE_PODMAN_ARGS:-} --format docker --network host --build-arg BASE_IMAGE="$BASE" --build-arg JOBS="$JOBS" \
  -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT"
echo "build-image: built $IMAGE; smoke test: scripts/smoke-test-image.sh $IMAGE"
