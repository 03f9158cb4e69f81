#!/usr/bin/env bash
# Set up (packages, build), then run every test with CTest, then the extra
# suites: the fuzz smoke (scripts/fuzz.sh: every fuzz target for 30 s) and
# the sanitizer suites (scripts/sanitize.sh tsan, asan), each in its own build
# directory. Exits non-zero on any failure, after running every suite.
# Extra arguments go to the first ctest run (e.g. -L unit, -R Tokenizer).
# ATTNSCOPE_EXTRA_SUITES picks the extra suites (default "fuzz asan tsan",
# what CI runs: docs/testing.md "Sanitizers"; "none" or "" for the plain suite only;
# with ctest arguments the default is none).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" || exit 1
echo "attnscope test: set-up and build took $SECONDS s"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
failed=()
start=$SECONDS
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)" "$@" || failed+=(tests)
echo "attnscope test: tests took $((SECONDS - start)) s"

# With ctest arguments (a selection of tests) the extra suites default to none.
default_suites="fuzz asan tsan"
(($# > 0)) && default_suites=""
suites="${ATTNSCOPE_EXTRA_SUITES-$default_suites}"
[[ "$suites" == "none" ]] && suites=""
for suite in $suites; do
  start=$SECONDS
  case "$suite" in
    fuzz) "$ROOT/scripts/fuzz.sh" smoke ;;
    asan | tsan) "$ROOT/scripts/sanitize.sh" "$suite" ;;
    *) echo "attnscope test: unknown suite '$suite' in ATTNSCOPE_EXTRA_SUITES" >&2; false ;;
  esac || failed+=("$suite")
  echo "attnscope test: suite $suite (build and run) took $((SECONDS - start)) s"
done
echo "attnscope test: $SECONDS s in all"
if ((${#failed[@]})); then
  echo "attnscope test: FAILED: ${failed[*]}" >&2
  exit 1
fi
