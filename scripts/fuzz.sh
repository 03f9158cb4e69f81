#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz, docs/testing.md "Fuzzing"): builds them into
# build-fuzz/ with clang (ASan + UBSan + coverage, no libtorch), then runs them.
#
#   scripts/fuzz.sh [smoke] [CTEST ARGS...]
#       every target for 30 s from its seed corpus (CTest label fuzz; what
#       scripts/test.sh and CI run). Non-zero exit on any crash, and before
#       running, on fewer fuzz tests registered than expected_targets.
#   scripts/fuzz.sh long SECONDS [TARGET...]
#       longer runs (all targets unless named), two at a time under nice -n 19,
#       each growing its own corpus in build-fuzz/fuzz-long/TARGET/ (kept
#       between runs) and writing its log beside it; prints one summary line
#       per target (executions, exec/s, coverage, features, corpus, crashes).
#       A crashing input is left as build-fuzz/fuzz-long/TARGET/crash-*.
# Environment: ATTNSCOPE_FUZZ_BUILD_DIR (default build-fuzz/), and those of
# scripts/setup.sh (ATTNSCOPE_JOBS, ATTNSCOPE_WARNINGS_AS_ERRORS, CI).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ATTNSCOPE_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
TARGETS=(safetensors_header_fuzz safetensors_index_fuzz model_config_fuzz tokenizer_json_fuzz
         tokenize_fuzz chat_template_fuzz request_fuzz)
# The smoke fails if fewer targets than this are listed above or registered
# with CTest (label fuzz): it must not pass on no target.
expected_targets=7

mode="${1:-smoke}"
[[ $# -gt 0 ]] && shift

ATTNSCOPE_BUILD_DIR="$BUILD_DIR" \
ATTNSCOPE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DATTNSCOPE_FUZZ=ON" \
  "$ROOT/scripts/setup.sh" "${TARGETS[@]}"

# Leaks fail a run too; the suppressions name what is not ours (the CTest
# tests set the same).
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"

case "$mode" in
  smoke)
    listing=$(ctest --test-dir "$BUILD_DIR" -N -L fuzz)
    found=$(sed -n 's/^Total Tests: *\([0-9][0-9]*\)$/\1/p' <<<"$listing")
    names=$(sed -n 's/^ *Test *#[0-9]*: //p' <<<"$listing")
    echo "attnscope fuzz smoke: $found fuzz tests registered, ${#TARGETS[@]} targets listed" \
         "(expected_targets=$expected_targets)"
    if [[ -z "$found" ]] || ((found < expected_targets || ${#TARGETS[@]} < expected_targets)); then
      echo "attnscope fuzz smoke: FAIL: ${found:-no} fuzz tests registered and ${#TARGETS[@]} targets listed," \
           "fewer than expected_targets=$expected_targets in scripts/fuzz.sh" >&2
      exit 1
    fi
    for t in "${TARGETS[@]}"; do
      if ! grep -Fxq "$t" <<<"$names"; then
        echo "attnscope fuzz smoke: FAIL: target $t has no CTest test with label fuzz" >&2
        exit 1
      fi
    done
    exec ctest --test-dir "$BUILD_DIR" -L fuzz --no-tests=error --output-on-failure -j "$(nproc)" "$@"
    ;;
  long)
    seconds="${1:?usage: scripts/fuzz.sh long SECONDS [TARGET...]}"
    shift
    (($# > 0)) && TARGETS=("$@")
    status=0
    run_one() {
      local t="$1" dir="$BUILD_DIR/fuzz-long/$1" timeout=10
      # The nested-loops seed of chat_template_fuzz stays within the
      # renderer's loop budget but takes 2 s alone and over 10 s under
      # nice -n 19 on a busy machine: a slow input, not a finding.
      [[ "$t" == chat_template_fuzz ]] && timeout=60
      mkdir -p "$dir/corpus"
      nice -n 19 "$BUILD_DIR/bin/$t" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" \
        "$ROOT/tests/fuzz/corpus/$t" >"$dir/log.txt" 2>&1
    }
    summary() {
      local t="$1" rc="$2" log="$BUILD_DIR/fuzz-long/$1/log.txt"
      local execs rate cov ft corp crashes
      execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log")
      rate=$(awk '/stat::average_exec_per_sec:/ {print $2}' "$log")
      cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
      crashes=$(find "$BUILD_DIR/fuzz-long/$t" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' \
                -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
      printf '%-24s exit %-3s %12s execs %8s exec/s  cov %6s  ft %7s  corpus %-12s findings %s\n' \
        "$t" "$rc" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes"
    }
    # Two at a time: the machines this runs on are shared.
    for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
      pids=() names=()
      for t in "${TARGETS[@]:i:2}"; do
        run_one "$t" &
        pids+=($!) names+=("$t")
      done
      for k in "${!pids[@]}"; do
        rc=0
        wait "${pids[k]}" || rc=$?
        ((rc == 0)) || status=1
        summary "${names[k]}" "$rc"
      done
    done
    exit "$status"
    ;;
  *)
    echo "usage: scripts/fuzz.sh [smoke [CTEST ARGS...] | long SECONDS [TARGET...]]" >&2
    exit 2
    ;;
esac
