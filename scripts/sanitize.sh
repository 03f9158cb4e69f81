#!/usr/bin/env bash
# The sanitizer suites (docs/testing.md "Sanitizers"), each in its own build directory:
#   scripts/sanitize.sh asan [CTEST ARGS...]  build-asan/: ASan + UBSan, the unit
#       tests, every family's forward pass against its reference (model_test),
#       and the real server under the security, limits, faults and eviction
#       tests (rpc_security_test, rpc_eviction_test)
#   scripts/sanitize.sh tsan [CTEST ARGS...]  build-tsan/: TSan, the tests
#       with threads: the rpc unit tests, the engine's cancellation and the
#       concurrency, cancellation, drain and feed cases of rpc_test (a TSan
#       attnscope-server)
# Builds only the test binaries (and the binaries they start), at -O1 -g1,
# then runs them with every report fatal; the suppressions in
# tests/sanitizers/ name what is not our code (libtorch, OpenMP, gRPC, c-ares,
# civetweb are not instrumented). Non-zero exit on any failure or report,
# and before running, on a selection (ctest -N) of fewer tests than the
# suite's expected_tests or with a tsan pattern that matches no test.
# Environment: those of scripts/setup.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUPP="$ROOT/tests/sanitizers"
kind="${1:?usage: scripts/sanitize.sh asan|tsan [CTEST ARGS...]}"
shift

select=()
patterns=()
case "$kind" in
  asan)
    build_dir="$ROOT/build-asan"
    # The unit and golden binaries count one test per GoogleTest suite
    # (ATTNSCOPE_CTEST_PER_SUITE): under ASan each process start with
    # libtorch costs about a second, more than most of their cases.
    cmake_args="-DATTNSCOPE_SANITIZE=address -DATTNSCOPE_BUILD_BENCH=OFF -DATTNSCOPE_CTEST_PER_SUITE=ON"
    # rpc_test runs under TSan (below); here the server runs under
    # rpc_security_test and rpc_eviction_test (CI's time: docs/testing.md "Sanitizers").
    targets=(test_common_test core_test engine_test rpc_unit_test kv_cache_test tensor_cache_test eviction_test
             deploy_test deploy_manifests_test metrics_test metrics_torch_test model_test
             gemm_test rpc_security_test rpc_eviction_test)
    # Every test of those binaries (the count check below).
    # The cases that mostly start CLI processes (flag and connection
    # errors, every remote command) run in the plain suite only: under ASan
    # each process start costs seconds, and the server side of TLS and
    # tokens stays covered by the other RpcSecurityTest cases here.
    select=(-E '^RpcSecurityTest\.(EveryRemoteCommandCarriesTls|ConnectionFailuresAreExplained|CliSendsTheToken|ServerSecurityFlagErrors|CliConnectionFlagErrors)')
    expected_tests=310
    # halt_on_error: a UBSan report fails the test (it recovers by default).
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp"
    export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
    ;;
  tsan)
    build_dir="$ROOT/build-tsan"
    cmake_args="-DATTNSCOPE_SANITIZE=thread -DATTNSCOPE_BUILD_BENCH=OFF"
    targets=(engine_test rpc_unit_test rpc_test tensor_cache_test analysis_test gemm_test)
    # What has threads: the tensor cache, the matrix products (primitives made
    # and run from several threads at once, and the primitive cache; the own
    # kernel's blocks handed out to a pool of std::threads), the rpc
    # unit tests of shared state (admission, the compute threads, the feed
    # hub, the layer streamer, per-client stream counts), the engine's
    # cancellation,
    # the statistics split over four std::threads (analysis_test; the TSan
    # build has no OpenMP, whose libgomp barriers TSan cannot see),
    # and the rpc_test cases that run the TSan server under concurrent,
    # cancelled, queued, drained and subscribed calls. Each case costs about
    # 10 s under TSan (process start with libtorch), so the other rpc_test
    # cases (single requests, errors, CLI output) run under ASan and plain.
    # Single-threaded cases (the other gemm and rpc unit tests) run under ASan
    # and plain only.
    # One pattern per suite (SUITE\.) or case; the selection is their union,
    # anchored at the start of the test name. Each must match a test.
    patterns=('TensorCacheTest\.' 'PackedMatrix\.ThreadsAtOnce' 'PackedMatrix\.ManyShapesOutlive'
              'Sgemm\.' 'Gemm\.' 'PanelGemm\.ThreadsGive' 'PanelGemm\.ModelShaped' 'AdmissionTest\.' 'ComputeThreadsTest\.' 'FeedHubTest\.' 'LayerStreamerTest\.'
              'ClientStreamsTest\.' 'GenerationCancelTest\.' 'LongPromptTest\.StatisticsOnThreads'
              'RpcTest\.ClientCancel' 'RpcTest\.DeadlineStops' 'RpcTest\.ConcurrentRequests'
              'RpcTest\.QueuedRequest' 'RpcTest\.SubscriberSees' 'RpcTest\.FeedCarries'
              'RpcTest\.SixteenConcurrent' 'RpcTest\.SigtermDrains' 'RpcTest\.DrainIsBounded'
              'RpcTest\.ClientCutOff' 'RpcTest\.HealthTurnsNotServing' 'RpcTest\.GenerateCancelled'
              'RpcTest\.GenerateStopsAtItsDeadline' 'RpcTest\.ConcurrentGenerate' 'RpcTest\.SlowSubscriber'
              'RpcTest\.MaxSubscribers' 'RpcTest\.ProbeCallsAreAdmissionLimited'
              'RpcTest\.EveryRequestIsRecorded' 'RpcTest\.PatchStopsWhenCancelled')
    expected_tests=62
    select=(-R "^($(IFS='|'; echo "${patterns[*]}"))")
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [CTEST ARGS...]" >&2
    exit 2
    ;;
esac

ATTNSCOPE_BUILD_DIR="$build_dir" ATTNSCOPE_CMAKE_ARGS="$cmake_args" \
  "$ROOT/scripts/setup.sh" "${targets[@]}"
# Only the binaries above are built, so only their tests carry a label (the
# others are CTest's label-less *_NOT_BUILT placeholders).
labels=(-L 'unit|integration|golden')

# The selection must not go empty or shrink unseen (a renamed test or suite
# leaves a -R pattern matching nothing, and ctest passes on no tests): count
# what it selects, without the extra CTEST ARGS, before running it.
listing=$(ctest --test-dir "$build_dir" -N "${labels[@]}" "${select[@]}")
found=$(sed -n 's/^Total Tests: *\([0-9][0-9]*\)$/\1/p' <<<"$listing")
names=$(sed -n 's/^ *Test *#[0-9]*: //p' <<<"$listing")
echo "attnscope sanitize $kind: $found tests selected (expected_tests=$expected_tests)"
if [[ -z "$found" ]] || ((found < expected_tests)); then
  echo "attnscope sanitize $kind: FAIL: ctest selects ${found:-no} tests, fewer than expected_tests=$expected_tests" \
       "in scripts/sanitize.sh (a test renamed, removed or not built?)" >&2
  exit 1
fi
if ((found > expected_tests)); then
  echo "attnscope sanitize $kind: note: more tests than expected_tests=$expected_tests; raise it to $found" >&2
fi
for p in "${patterns[@]}"; do
  if ! grep -Eq "^$p" <<<"$names"; then
    echo "attnscope sanitize $kind: FAIL: no test matches '$p' in scripts/sanitize.sh (renamed?)" >&2
    exit 1
  fi
done

ctest --test-dir "$build_dir" "${labels[@]}" "${select[@]}" --no-tests=error --output-on-failure \
  --timeout 1800 -j "$(nproc)" "$@"
