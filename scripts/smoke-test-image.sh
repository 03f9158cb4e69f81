#!/usr/bin/env bash
# Smoke test of the attnscope image on loopback: runs the container with the
# host's network, attnscope-server bound to 127.0.0.1 only, and checks
#   - it runs as the image's non-root user (uid 10001);
#   - attnscope health inside says SERVING, and the image's HEALTHCHECK is
#     that command (on the default port; this run uses another one, so that
#     it never collides with a server on the host's 50051);
#   - a checkpoint mounted read-only under /models is served by name;
#   - ListModels and Analyze from the CLI in the image, over an ipv4: target;
#   - Analyze from the host's CLI (build/bin/attnscope), if there is one;
#   - /metrics counts the requests;
#   - SIGTERM (podman stop) drains and exits 0.
# Usage: scripts/smoke-test-image.sh [IMAGE]   (default localhost/attnscope:latest)
# ATTNSCOPE_PODMAN_ARGS: extra `podman run` arguments (as for scripts/build-image.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:-localhost/attnscope:latest}"
GRPC_PORT="${ATTNSCOPE_SMOKE_PORT:-50151}"
METRICS_PORT="${ATTNSCOPE_SMOKE_METRICS_PORT:-9564}"
NAME="attnscope-smoke-$$"
# shellcheck disable=SC2206  # a list of arguments
PODMAN_ARGS=(${ATTNSCOPE_PODMAN_ARGS:-})

step() { echo "smoke: $*"; }
fail() { echo "smoke: FAILED: $*" >&2; podman logs "$NAME" >&2 || true; exit 1; }
cleanup() { podman rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "starting $IMAGE as $NAME on 127.0.0.1:$GRPC_PORT (metrics :$METRICS_PORT)"
podman run "${PODMAN_ARGS[@]}" -d --name "$NAME" --network host \
  -v "$ROOT/models/tiny-gpt2:/models/toy:ro" "$IMAGE" \
  --listen "127.0.0.1:$GRPC_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" --threads 1 \
  --model "tiny-gpt2=/opt/attnscope/models/tiny-gpt2" --model "toy=/models/toy" >/dev/null

in_image() { podman exec "$NAME" "$@"; }

for _ in $(seq 120); do
  if in_image attnscope --server "127.0.0.1:$GRPC_PORT" health --timeout 1 >/dev/null 2>&1; then break; fi
  podman container exists "$NAME" && [[ "$(podman inspect -f '{{.State.Running}}' "$NAME")" == true ]] \
    || fail "the container exited"
  sleep 1
done
health="$(in_image attnscope --server "127.0.0.1:$GRPC_PORT" health)" || fail "health: $health"
[[ "$health" == SERVING ]] || fail "health says $health"
step "health: $health"

uid="$(in_image id -u)"
[[ "$uid" == 10001 ]] || fail "runs as uid $uid"
step "runs as uid $uid"

check="$(podman image inspect "$IMAGE" | tr -d ' \n' | grep -o '"Healthcheck":{"Test":\[[^]]*\]')" \
  || fail "the image has no HEALTHCHECK (build with --format docker)"
[[ "$check" == *'"attnscope","--server","127.0.0.1:50051","health"'* ]] || fail "HEALTHCHECK is '$check'"
step "image HEALTHCHECK: $check (the same command on this run's port passed above)"

models="$(in_image attnscope --server "ipv4:127.0.0.1:$GRPC_PORT" models)" || fail "models: $models"
echo "$models"
grep -q '^tiny-gpt2 ' <<<"$models" || fail "tiny-gpt2 is not served"
grep -q '^toy ' <<<"$models" || fail "the model mounted at /models/toy is not served"

report="$(in_image attnscope --server "ipv4:127.0.0.1:$GRPC_PORT" analyze --model toy \
  --text "The cat sat on the keyboard again.")" || fail "analyze: $report"
grep -q 'Context health' <<<"$report" || fail "no report: $report"
step "analyze (CLI in the image, model from /models): $(grep 'Context health' <<<"$report")"

if [[ -x "$ROOT/build/bin/attnscope" ]]; then
  host_report="$("$ROOT/build/bin/attnscope" --server "127.0.0.1:$GRPC_PORT" analyze --json --text "Hello world")" \
    || fail "host analyze: $host_report"
  grep -q '"health"' <<<"$host_report" || fail "host analyze: $host_report"
  step "analyze (host CLI): ok"
fi

metrics="$(in_image bash -c "exec 3<>/dev/tcp/127.0.0.1/$METRICS_PORT; printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3; cat <&3")"
ok_line="$(grep '^attnscope_requests_total{.*rpc="Analyze"' <<<"$metrics" | grep 'code="OK"')" \
  || fail "no Analyze counter in /metrics"
step "metrics: $ok_line"

podman stop -t 30 "$NAME" >/dev/null
code="$(podman inspect -f '{{.State.ExitCode}}' "$NAME")"
[[ "$code" == 0 ]] || fail "exit code after SIGTERM: $code"
step "SIGTERM: drained, exit code $code"
step "PASSED"
