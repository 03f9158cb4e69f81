// The reference fixtures: the tensors of three small models and of a planted
// sink pattern, fed through PromptAnalyzer whole and block-wise, reproduce
// the PyTorch reference's stats.json key by key.
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/stats_json.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope::analysis {
namespace {

using ::testing::ElementsAre;
using testing_util::DataPath;
using testing_util::LoadReference;
using testing_util::MaxJsonDiff;
using testing_util::OwnedTensors;
using testing_util::ReadJson;

// Compares every key of `expected` (except input_ids, which the CLI adds)
// with the analyzer's JSON; prints the largest difference per key. The keys
// the reference predates are checked against what the fixture implies
// (expected_sinks: its structural positions with z > threshold) or in
// predictions_test.cc (surprisal and top predictions need input ids);
// first_token_importance from the fixture's first_token_mass (row 0 gives
// token 0 all of its attention: alpha = ((T - 1) mass + 1) / T), and
// sink_eps from that.
void ExpectMatchesFixture(const nlohmann::json& actual, nlohmann::json expected,
                          const std::string& label) {
  expected.erase("input_ids");
  ASSERT_GE(expected.size(), 14u) << label << ": the fixture's statistics";
  const auto t = static_cast<double>(expected["z"].size());
  nlohmann::json importance = expected["first_token_mass"];
  double above = 0, heads = 0;
  for (auto& layer : importance) {
    for (auto& v : layer) {
      v = t > 1 ? ((t - 1) * v.get<double>() + 1) / t : 1.0;
      above += v.get<double>() > 0.3 ? 1 : 0;
      heads += 1;
    }
  }
  expected["first_token_importance"] = importance;
  expected["sink_epsilon"] = 0.3;
  expected["sink_eps"] = above / heads;
  ASSERT_FALSE(expected["structural"].empty()) << label;
  for (const auto& [key, value] : actual.items()) {
    if (key == "expected_sinks" || key == "next_token_surprisal_nats" || key == "top_predictions") {
      continue;
    }
    EXPECT_TRUE(expected.contains(key)) << label << ": key " << key << " not in the fixture";
  }
  nlohmann::json expected_sinks = nlohmann::json::array();
  for (const auto& p : expected["structural"]) {
    if (expected["z"][p.get<size_t>()].get<double>() > expected["threshold"].get<double>()) {
      expected_sinks.push_back(p);
    }
  }
  EXPECT_EQ(actual["expected_sinks"], expected_sinks) << label;
  std::cout << label << ":";
  for (const auto& [key, value] : expected.items()) {
    ASSERT_TRUE(actual.contains(key)) << label << ": missing key " << key;
    const double diff = MaxJsonDiff(actual[key], value, label + "." + key);
    const double tolerance = key == "z" ? 1e-4 : 1e-5;
    EXPECT_LE(diff, tolerance) << label << ": key " << key;
    std::cout << " " << key << "=" << diff;
  }
  std::cout << "\n";
}

class ModelFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFixtureTest, MatchesReferenceStatsWholeAndBlockwise) {
  const std::string dir = DataPath("models/" + GetParam());
  absl::StatusOr<OwnedTensors> tensors = LoadReference(dir + "/reference.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  const nlohmann::json expected = ReadJson(dir + "/stats.json");
  AnalysisOptions options;
  options.structural = {0};
  options.threshold = 6.0;
  for (int64_t block : {0, 1, 7, 16}) {
    absl::StatusOr<PromptStats> stats = AnalyzeTensors(tensors->View(), options, block);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->num_layers, tensors->num_layers);
    EXPECT_EQ(stats->num_heads, tensors->num_heads);
    EXPECT_EQ(stats->num_tokens, tensors->num_tokens);
    ExpectMatchesFixture(StatsToJson(*stats), expected,
                         GetParam() + " (block " + std::to_string(block) + ")");
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, ModelFixtureTest,
                         ::testing::Values("gpt2-random-hub-layout", "gpt2-random-sharded-fp16",
                                           "llama-stories260K"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

class PlantedSinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<OwnedTensors> loaded =
        LoadReference(DataPath("stats/planted_sinks.safetensors"));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tensors_ = *std::move(loaded);
  }
  absl::StatusOr<PromptStats> Analyze(double threshold, int64_t block) const {
    AnalysisOptions options;
    options.structural = {0, 1, 2, 3, 38, 39};
    options.threshold = threshold;
    return AnalyzeTensors(tensors_.View(), options, block);
  }
  OwnedTensors tensors_;
};

TEST_F(PlantedSinksTest, Threshold6FindsThePlantedSinks) {
  const nlohmann::json expected = ReadJson(DataPath("stats/planted_sinks_threshold6.json"));
  for (int64_t block : {0, 1, 7, 16}) {
    absl::StatusOr<PromptStats> stats = Analyze(6.0, block);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_THAT(stats->sinks, ElementsAre(17, 29));
    EXPECT_NEAR(stats->health, 10.0 - 10.0 * 2 / 34 - 5.0, 1e-9);
    EXPECT_EQ(stats->num_candidates, 34);
    ExpectMatchesFixture(StatsToJson(*stats), expected,
                         "planted t6 (block " + std::to_string(block) + ")");
  }
}

TEST_F(PlantedSinksTest, Threshold2AddsAWeakerSink) {
  const nlohmann::json expected = ReadJson(DataPath("stats/planted_sinks_threshold2.json"));
  for (int64_t block : {0, 5}) {
    absl::StatusOr<PromptStats> stats = Analyze(2.0, block);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_THAT(stats->sinks, ElementsAre(5, 17, 29));
    EXPECT_NEAR(stats->health, 4.117647058823529, 1e-9);
    // Position 0 has z > 2 but is structural: reported, never a sink.
    EXPECT_GT(stats->z[0], 2.0);
    ExpectMatchesFixture(StatsToJson(*stats), expected,
                         "planted t2 (block " + std::to_string(block) + ")");
  }
}

}  // namespace
}  // namespace attnscope::analysis
