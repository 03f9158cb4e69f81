// attnscope analyze|generate --precision float32|bf16 and --device
// cpu|cuda|auto, end to end: bad values are usage errors (exit 2) naming the
// flag, the value and the accepted ones; --device cuda on this CPU-only
// build exits 1 saying why and what to do; auto runs on the CPU and gives
// the cpu numbers; bf16 stays within its tolerance of float32 and is not
// float32, and bf16 generation picks float32's tokens; blocks of query rows
// (automatic and explicit) agree with whole layers.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/model/attention_blocks.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/json_compare.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

const char kIds[] = "1,45,200,17,3,99,150,8,77,31,64,2";
// A prompt for the trained stories260K (vocabulary 512).
const char kStoryIds[] = "1,403,9,68,300,29,15,411,91,57,22,130";

std::vector<std::string> Analyze(std::vector<std::string> extra) {
  std::vector<std::string> args = {"analyze", "--model", Fixture("llama"), "--ids", kIds,
                                   "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json StatsOf(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  if (!j.is_discarded()) j.erase("forward_seconds");
  return j;
}

TEST(ComputeFlagsCliTest, UnknownValuesAreUsageErrors) {
  const CliResult precision = RunCli(Analyze({"--precision", "fp8"}));
  EXPECT_EQ(precision.exit_code, 2);
  EXPECT_THAT(precision.err, HasSubstr("--precision 'fp8' is not supported"));
  EXPECT_THAT(precision.err, HasSubstr("float32"));
  EXPECT_THAT(precision.err, HasSubstr("bf16"));
  EXPECT_THAT(precision.err, HasSubstr("auto"));
  const CliResult device = RunCli(Analyze({"--device", "tpu"}));
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_THAT(device.err, HasSubstr("--device 'tpu' is not supported; use cpu, cuda or auto"));
  const CliResult generate =
      RunCli({"generate", "--model", Fixture("llama"), "--ids", "1,45", "--precision", "half"});
  EXPECT_EQ(generate.exit_code, 2);
  EXPECT_THAT(generate.err, HasSubstr("--precision 'half'"));
}

TEST(ComputeFlagsCliTest, CudaOnACpuOnlyBuildFailsClearlyAndAutoPicksTheCpu) {
  const CliResult cuda = RunCli(Analyze({"--device", "cuda"}));
  EXPECT_EQ(cuda.exit_code, 1);
  EXPECT_THAT(cuda.err, HasSubstr("--device cuda: this attnscope was built against a libtorch "
                                  "without CUDA"));
  EXPECT_THAT(cuda.err, HasSubstr("Torch_DIR"));
  EXPECT_EQ(cuda.out, "");
  const nlohmann::json on_auto = StatsOf(RunCli(Analyze({"--device", "auto"})));
  const nlohmann::json on_cpu = StatsOf(RunCli(Analyze({"--device", "cpu"})));
  const nlohmann::json plain = StatsOf(RunCli(Analyze({})));
  // MaxJsonDiff, not ==: NaN is null on both sides, and null == null.
  std::string mismatch;
  EXPECT_EQ(test::MaxJsonDiff(on_auto, on_cpu, &mismatch), 0.0) << mismatch;
  EXPECT_EQ(test::MaxJsonDiff(on_cpu, plain, &mismatch), 0.0) << mismatch;
  const CliResult generate = RunCli(
      {"generate", "--model", Fixture("llama"), "--ids", "1,45", "--device", "cuda"});
  EXPECT_EQ(generate.exit_code, 1);
  EXPECT_THAT(generate.err, HasSubstr("without CUDA"));
}

TEST(ComputeFlagsCliTest, Bf16IsCloseToFloat32ButNotFloat32) {
  const nlohmann::json f32 = StatsOf(RunCli(Analyze({"--precision", "float32"})));
  const nlohmann::json bf16 = StatsOf(RunCli(Analyze({"--precision", "bf16"})));
  std::string mismatch;  // float32 is the default
  EXPECT_EQ(test::MaxJsonDiff(f32, StatsOf(RunCli(Analyze({}))), &mismatch), 0.0) << mismatch;
  // auto on an F32 checkpoint is float32 (model_test checks BF16 ones).
  EXPECT_EQ(test::MaxJsonDiff(f32, StatsOf(RunCli(Analyze({"--precision", "auto"}))), &mismatch),
            0.0)
      << mismatch;
  const double next = test::MaxJsonDiff(bf16["next_token_entropy_nats"],
                                        f32["next_token_entropy_nats"]);
  const double sinks = test::MaxJsonDiff(bf16["sink_score"], f32["sink_score"]);
  std::printf("llama fixture, 12 ids: max |bf16 - float32| next-token entropy %.3g, sink %.3g\n",
              next, sinks);
  // Measured 2.1e-3 and 3.6e-3 (oneDNN's bf16 kernels and ATTNSCOPE_GEMM=blas
  // alike); held to twice that, as Bf16FixtureTest holds each fixture.
  EXPECT_GT(next, 1e-5);
  EXPECT_TRUE(next <= 2 * 2.1e-3) << next;
  EXPECT_TRUE(sinks <= 2 * 3.6e-3) << sinks;
}

// Greedy generation on the trained stories260K: bf16 picks float32's tokens
// until float32 itself is nearly tied (there bf16 may pick the runner-up),
// with probabilities and entropies close to float32's but not equal.
// Measured on this prompt: 9 tokens agree, then a three-way tie (0.0059,
// 0.0057, 0.0055); up to there |entropy| differs by at most 0.042 and
// |p| by 0.027. Bounds: 0.15 and 0.1, a tie within 0.01.
TEST(ComputeFlagsCliTest, Bf16GenerationFollowsFloat32) {
  auto run = [](const char* precision) {
    const CliResult r = RunCli({"generate", "--model", Fixture("llama-stories260K"), "--ids",
                                kStoryIds, "--max-new-tokens", "24", "--ignore-eos",
                                "--alternatives", "3", "--precision", precision, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  };
  const nlohmann::json f32 = run("float32")["tokens"];
  const nlohmann::json bf16 = run("bf16")["tokens"];
  ASSERT_EQ(f32.size(), 24u);
  ASSERT_EQ(bf16.size(), 24u);
  size_t same = 0;
  while (same < 24 && bf16[same]["id"] == f32[same]["id"]) ++same;
  EXPECT_GE(same, 8u);
  if (same < 24) {
    // The first token that differs: bf16 chose one float32 nearly tied.
    const nlohmann::json& want = f32[same];
    bool tied = false;
    for (const nlohmann::json& alt : want["alternatives"]) {
      if (alt["id"] != bf16[same]["id"]) continue;
      const double gap = test::AbsDiff(alt["probability"].get<double>(),
                                       want["probability"].get<double>());
      tied = test::Within(gap, 0.01);
    }
    EXPECT_TRUE(tied) << "token " << same << ": bf16 " << bf16[same].dump() << " float32 "
                      << want.dump();
  }
  // Token `same` still follows the same context: its entropy compares too.
  double entropy = 0, probability = 0;
  for (size_t i = 0; i <= same && i < 24; ++i) {
    entropy = test::Worse(entropy, test::AbsDiff(bf16[i]["entropy_nats"].get<double>(),
                                                 f32[i]["entropy_nats"].get<double>()));
    if (i == same) break;
    probability = test::Worse(probability, test::AbsDiff(bf16[i]["probability"].get<double>(),
                                                         f32[i]["probability"].get<double>()));
  }
  std::printf("bf16 generation: %zu tokens as float32; max |entropy| %.3g, |p| %.3g\n", same,
              entropy, probability);
  EXPECT_GT(entropy, 1e-5);
  EXPECT_TRUE(test::Within(entropy, 0.15)) << entropy;
  EXPECT_TRUE(test::Within(probability, 0.1)) << probability;
}

// 300 tokens of stories260K (8 heads, 512 positions): the automatic choice
// runs each layer in blocks of kAutoMaxBlockRows = 128 rows (3 blocks; the
// same numbers as --block-size 128, bit for bit), --block-size 7 in 43; both
// against whole layers (--block-size 300). Blocks round differently from
// whole layers: up to 4.2e-5 (surprisal, entropy) seen; bound 2e-4. The
// ranks of nearly tied top predictions may swap, so those are left out.
TEST(ComputeFlagsCliTest, BlocksEqualWholeLayers) {
  static_assert(300 > model::kAutoMaxBlockRows, "the automatic choice must split the layer");
  std::string ids = "1";
  for (int i = 1; i < 300; ++i) ids += "," + std::to_string((i * 37 + 11 + (i * i) % 13) % 512);
  auto stats = [&](const std::string& block) {
    nlohmann::json j = StatsOf(RunCli({"analyze", "--model", Fixture("llama-stories260K"), "--ids",
                                       ids, "--json", "--block-size", block}));
    j.erase("top_predictions");
    return j;
  };
  const nlohmann::json whole = stats("300");
  const nlohmann::json automatic = stats("0");
  ASSERT_EQ(whole["input_ids"].size(), 300u);
  const double d_128 = test::MaxJsonDiff(automatic, stats(std::to_string(model::kAutoMaxBlockRows)));
  EXPECT_EQ(d_128, 0.0) << "automatic vs --block-size 128";
  const nlohmann::json sevens = stats("7");
  const double d_auto = test::MaxJsonDiff(automatic, whole);
  const double d_seven = test::MaxJsonDiff(sevens, whole);
  std::printf("blocks vs whole layers: automatic %.3g, 7 rows %.3g\n", d_auto, d_seven);
  EXPECT_TRUE(test::Within(d_auto, 2e-4)) << d_auto;
  EXPECT_TRUE(test::Within(d_seven, 2e-4)) << d_seven;
}

}  // namespace
}  // namespace attnscope::testing
