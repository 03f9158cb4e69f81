#!/usr/bin/env bash
# Set up (packages, build), then run every test with CTest, then the extra
# suites: the fuzz smoke (scripts/fuzz.sh: every fuzz target for 30 s) and
# the sanitizer suites (scripts/sanitize.sh asan, tsan), each in its own build
# directory. Exits non-zero on any failure, after running every suite.
# Extra arguments go to the first ctest run (e.g. -L unit, -R Tokenizer).
# ATTNSCOPE_EXTRA_SUITES picks the extra suites (default "fuzz asan tsan";
# "none" skips them, for a quick local run; CI runs them all).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" || exit 1
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
failed=()
start=$SECONDS
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)" "$@" || failed+=(tests)
echo "attnscope test: tests took $((SECONDS - start)) s"

suites="${ATTNSCOPE_EXTRA_SUITES-fuzz asan tsan}"
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
if ((${#failed[@]})); then
  echo "attnscope test: FAILED: ${failed[*]}" >&2
  exit 1
fi
