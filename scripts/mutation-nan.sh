#!/usr/bin/env bash
# A mutation run for the test suite's NaN rule (docs/testing.md): plants NaN
# in the statistics (PromptAnalyzer::Finish: every sink score, attention
# entropy, next-token entropy and the health), rebuilds, and runs the tests
# that compare the project with itself (blocks vs whole layers, threads,
# heads, bf16 repeats, --device auto vs cpu, files vs stdin, local vs
# remote). Each must now FAIL: both sides are NaN (written as JSON null),
# and a comparison that passes on that cannot catch a regression. Then the
# source is restored and rebuilt. Exits 0 when every selected test failed,
# 1 when one passed (listed), 2 on a set-up error.
# Usage: scripts/mutation-nan.sh   (needs a configured build/, as after
# scripts/setup.sh; takes a few minutes: the analysis library and the test
# binaries are rebuilt twice).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ATTNSCOPE_BUILD_DIR:-$ROOT/build}"
SRC="$ROOT/service/analysis/prompt_analyzer.cc"
MARK='  out.top_predictions = top_;'

# Tests that compare one run of the project with another run of it.
TESTS=(
  'LongPromptTest\.(LlamaFixtureBlocksEqualWholeLayersAtItsPositions|RandomLlamaBlocksEqualWholeLayersAtT1536|StatisticsOnThreadsEqualOneThreadExactly|HeadsTakenInTheKernelEqualWholeBlocksExactly|EntropiesFromTheSoftmaxEqualEntropiesFromTheProbabilities)'
  'PrecisionTest\.DefaultIsFloat32AndBf16IsRepeatable'
  'DeviceTest\.CpuAndAutoLoadAndCudaIsRefusedOnACpuBuild'
  'PromptInputTest\.AnalyzeAndGenerateReadFilesAndStdin'
  'RpcCliTest\.AnalyzeJsonEqualsTheLocalOutput'
  'RpcRemoteCliTest\.AnalyzeExportAndViewerEqualTheLocalFilesOn(TheBundledModel|Llama)'
  'RpcPrecisionTest\.(RequestPrecisionWinsOverTheServerDefault|CliSendsItsPrecisionToTheServer)'
  'ComputeFlagsCliTest\.(CudaOnACpuOnlyBuildFailsClearlyAndAutoPicksTheCpu|Bf16IsCloseToFloat32ButNotFloat32|BlocksEqualWholeLayers)'
)

grep -qF "$MARK" "$SRC" || { echo "mutation-nan: '$MARK' not found in $SRC" >&2; exit 2; }
[[ -f "$BUILD_DIR/build.ninja" ]] || { echo "mutation-nan: no configured $BUILD_DIR" >&2; exit 2; }

backup="$(mktemp)"
cp "$SRC" "$backup"
restore() {
  cp "$backup" "$SRC"
  rm -f "$backup"
  echo "mutation-nan: source restored; rebuilding"
  cmake --build "$BUILD_DIR" >/dev/null
}
trap restore EXIT

python3 - "$SRC" "$MARK" <<'EOF'
import sys
path, mark = sys.argv[1], sys.argv[2]
plant = (mark + "\n"
         "  {  // mutation-nan.sh: planted NaN\n"
         "    const double nan = std::numeric_limits<double>::quiet_NaN();\n"
         "    for (auto* grid : {&out.sink_score, &out.attention_entropy})\n"
         "      for (auto& row : *grid) for (double& v : row) v = nan;\n"
         "    for (double& v : out.next_token_entropy_nats) v = nan;\n"
         "    out.health = nan;\n"
         "  }")
src = open(path).read().replace(mark, plant, 1)
if "#include <limits>" not in src:
    src = "#include <limits>\n" + src
open(path, "w").write(src)
EOF
echo "mutation-nan: NaN planted in $SRC; building"
cmake --build "$BUILD_DIR" >/dev/null || { echo "mutation-nan: build failed" >&2; exit 2; }

passed=()
for t in "${TESTS[@]}"; do
  n=$(ctest --test-dir "$BUILD_DIR" -N -R "$t" | awk '/Total Tests:/ {print $3}')
  if [[ -z "$n" || "$n" == 0 ]]; then
    echo "mutation-nan: no test matches '$t'" >&2
    exit 2
  fi
  # Each matching test on its own: every one of them must fail.
  while read -r name; do
    if ctest --test-dir "$BUILD_DIR" -R "^${name//./\\.}\$" --timeout 900 >/dev/null 2>&1; then
      passed+=("$name")
      echo "mutation-nan: PASSED on NaN: $name"
    else
      echo "mutation-nan: failed on NaN, as it must: $name"
    fi
  done < <(ctest --test-dir "$BUILD_DIR" -N -R "$t" | sed -n 's/^ *Test *#[0-9]*: //p')
done
if ((${#passed[@]})); then
  echo "mutation-nan: ${#passed[@]} test(s) passed with NaN statistics: ${passed[*]}" >&2
  exit 1
fi
echo "mutation-nan: every selected test failed on the planted NaN"
