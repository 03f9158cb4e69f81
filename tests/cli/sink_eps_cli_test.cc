// Gu et al.'s first-token importance and Sink-epsilon in `analyze --json`,
// against the same numbers recomputed here from the attentions that
// `analyze --export` wrote (the bundled model, the same prompt).
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

constexpr char kPrompt[] = "The cat sat on the keyboard again, and the dog watched it from the door.";

TEST(SinkEpsilonCliTest, AnalyzeJsonMatchesTheExportedAttentions) {
  const std::string tensors = test::UniqueTempPath("sink-eps.safetensors");
  const testing::CliResult r = RunCli({"analyze", "--text", kPrompt, "--export", tensors, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json stats = json::parse(r.out);
  auto file = SafetensorsFile::Open(tensors);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorRef* a = (*file)->Find("attentions");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->shape.size(), 4u);
  const int64_t layers = a->shape[0], heads = a->shape[1], t = a->shape[2];
  const std::vector<float> att = testing::Floats(**file, "attentions");

  // alpha[l][h] = (1/T) sum_i A[l,h,i,0], in double, from the (L,H,T,T) tensor.
  ASSERT_EQ(stats["first_token_importance"].size(), static_cast<size_t>(layers));
  int above = 0, near_cut = 0;
  double worst = 0;
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t h = 0; h < heads; ++h) {
      double sum = 0;
      for (int64_t i = 0; i < t; ++i) sum += att[static_cast<size_t>(((l * heads + h) * t + i) * t)];
      const double alpha = sum / static_cast<double>(t);
      const json& got = stats["first_token_importance"][static_cast<size_t>(l)][static_cast<size_t>(h)];
      ASSERT_TRUE(got.is_number()) << l << "." << h;
      worst = test::Worse(worst, test::AbsDiff(got.get<double>(), alpha));
      above += alpha > 0.3;
      near_cut += test::AbsDiff(alpha, 0.3) < 1e-6;
    }
  }
  EXPECT_LE(worst, 1e-6) << "largest |alpha - recomputed|";
  // The check means something only if the cut splits the heads.
  ASSERT_EQ(near_cut, 0) << "a head sits on the cut; pick another prompt";
  ASSERT_GT(above, 0);
  ASSERT_LT(above, layers * heads);
  EXPECT_EQ(stats["sink_epsilon"].get<double>(), 0.3);
  EXPECT_EQ(stats["sink_eps"].get<double>(),
            static_cast<double>(above) / static_cast<double>(layers * heads));
  // alpha includes row 0 (A[0,0] = 1), the first-token mass does not:
  // alpha = ((T - 1) * mass + 1) / T.
  const double mass = stats["first_token_mass"][1][2].get<double>();
  EXPECT_LE(test::AbsDiff(stats["first_token_importance"][1][2].get<double>(),
                          ((static_cast<double>(t) - 1) * mass + 1) / static_cast<double>(t)),
            1e-9);
  std::cout << "T = " << t << ", " << above << " of " << layers * heads
            << " heads with alpha > 0.3; max |diff| " << worst << "\n";
}

// --sink-epsilon moves the cut: sink_eps is then the share of the same
// alphas above it; outside [0, 1] it is a usage error.
TEST(SinkEpsilonCliTest, AnalyzeTakesTheCutFromTheFlag) {
  const testing::CliResult r = RunCli({"analyze", "--text", kPrompt, "--json", "--sink-epsilon", "0.12"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json stats = json::parse(r.out);
  EXPECT_EQ(stats["sink_epsilon"].get<double>(), 0.12);
  int above = 0, heads = 0;
  for (const json& layer : stats["first_token_importance"]) {
    for (const json& alpha : layer) {
      ASSERT_TRUE(alpha.is_number());
      ASSERT_FALSE(test::AbsDiff(alpha.get<double>(), 0.12) < 1e-6) << "a head sits on the cut";
      above += alpha.get<double>() > 0.12;
      ++heads;
    }
  }
  ASSERT_GT(heads, 0);
  EXPECT_EQ(stats["sink_eps"].get<double>(), static_cast<double>(above) / heads);
  for (const char* bad : {"1.5", "-0.1", "nan"}) {
    const testing::CliResult refused = RunCli({"analyze", "--text", "hi", "--sink-epsilon", bad});
    EXPECT_EQ(refused.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find("--sink-epsilon"), std::string::npos) << refused.err;
  }
}

}  // namespace
}  // namespace attnscope
