// Next-token surprisal and top predictions (against an independent double
// computation), expected sinks, and their sections of the text report.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/stats_json.h"
#include "service/analysis/text_report.h"
#include "service/analysis/token_stats.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope::analysis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// ln softmax(row)[v], in long double.
double LogProb(const std::vector<float>& row, size_t v) {
  long double sum = 0;
  for (float x : row) sum += std::exp(static_cast<long double>(x));
  return static_cast<double>(static_cast<long double>(row[v]) - std::log(sum));
}

TEST(NextTokenPredictionsTest, SurprisalAndTopKAgreeWithSoftmax) {
  const int64_t t = 3, v = 5;
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 2.0f, 30.0f,   // tie 0/3, huge 4
                                     0.0f, 0.0f,  0.0f, 0.0f, 0.0f,    // uniform
                                     -3.0f, 7.25f, 1.0f, -9.0f, 0.0f};
  const std::vector<int64_t> ids = {4, 1, 3};
  std::vector<double> surprisal;
  std::vector<std::vector<Prediction>> top;
  NextTokenPredictions(logits.data(), t, v, ids, 3, &surprisal, &top);
  ASSERT_EQ(surprisal.size(), 2u) << "T-1 values: the last position has no next token";
  for (int64_t i = 0; i + 1 < t; ++i) {
    const std::vector<float> row(logits.begin() + i * v, logits.begin() + (i + 1) * v);
    const double expected = -LogProb(row, static_cast<size_t>(ids[static_cast<size_t>(i + 1)]));
    // Exponentials in float (vmath), summed in double: ~1e-7 relative.
    EXPECT_TRUE(std::fabs(surprisal[static_cast<size_t>(i)] - expected) <= 1e-6) << i;
  }
  EXPECT_NEAR(surprisal[1], std::log(5.0), 1e-12);  // uniform over 5
  ASSERT_EQ(top.size(), 3u);
  ASSERT_EQ(top[0].size(), 3u);
  EXPECT_EQ(top[0][0].id, 4);
  EXPECT_EQ(top[0][1].id, 0) << "ties: lower id first";
  EXPECT_EQ(top[0][2].id, 3);
  EXPECT_EQ(top[1][0].id, 0);
  EXPECT_EQ(top[1][2].id, 2);
  EXPECT_EQ(top[2][0].id, 1);
  for (int64_t i = 0; i < t; ++i) {
    const std::vector<float> row(logits.begin() + i * v, logits.begin() + (i + 1) * v);
    for (const Prediction& p : top[static_cast<size_t>(i)]) {
      const double expected = std::exp(LogProb(row, static_cast<size_t>(p.id)));
      EXPECT_TRUE(std::fabs(p.p - expected) <= 1e-6) << i << " id " << p.id;
    }
  }
}

TEST(NextTokenPredictionsTest, EdgeCases) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f};  // T = 2, V = 2
  std::vector<double> surprisal;
  std::vector<std::vector<Prediction>> top;
  NextTokenPredictions(logits.data(), 2, 2, {0}, 7, &surprisal, &top);
  EXPECT_TRUE(surprisal.empty()) << "ids of the wrong length: no surprisal";
  ASSERT_EQ(top[0].size(), 2u) << "k is capped at V";
  NextTokenPredictions(logits.data(), 2, 2, {0, 9}, 0, &surprisal, &top);
  ASSERT_EQ(surprisal.size(), 1u);
  EXPECT_TRUE(std::isnan(surprisal[0])) << "an id outside the vocabulary";
  EXPECT_TRUE(top[0].empty() && top[1].empty()) << "k = 0: none";
}

// The planted-sink fixture (L = 4, H = 3, T = 40, sinks 17 and 29) with
// position 17 declared structural: it becomes an expected sink.
class ExpectedSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<testing_util::OwnedTensors> t =
        testing_util::LoadReference(testing_util::DataPath("stats/planted_sinks.safetensors"));
    ASSERT_TRUE(t.ok()) << t.status();
    tensors_ = *std::move(t);
    AnalysisOptions options;
    options.structural = {0, 17};
    for (int64_t i = 0; i < 40; ++i) options.input_ids.push_back((i * 7) % tensors_.vocab);
    ids_ = options.input_ids;
    absl::StatusOr<PromptStats> s = AnalyzeTensors(tensors_.View(), options);
    ASSERT_TRUE(s.ok()) << s.status();
    stats_ = *std::move(s);
    for (int i = 0; i < 40; ++i) tokens_.push_back(" tok" + std::to_string(i));
  }
  testing_util::OwnedTensors tensors_;
  std::vector<int64_t> ids_;
  PromptStats stats_;
  std::vector<std::string> tokens_;
};

TEST_F(ExpectedSinkTest, StructuralPositionsAboveTheThresholdAreExpectedNotAnomalous) {
  ASSERT_GT(stats_.z[17], stats_.threshold);
  std::vector<int64_t> expected, anomalous;
  for (int64_t p = 0; p < stats_.num_tokens; ++p) {
    if (!(stats_.z[static_cast<size_t>(p)] > stats_.threshold)) continue;
    (p == 0 || p == 17 ? expected : anomalous).push_back(p);
  }
  EXPECT_THAT(expected, ::testing::Contains(17));
  EXPECT_EQ(stats_.expected_sinks, expected);
  EXPECT_EQ(stats_.sinks, anomalous) << "never a structural position";
  const nlohmann::json j = StatsToJson(stats_);
  EXPECT_EQ(j["expected_sinks"], nlohmann::json(expected));
  EXPECT_EQ(j["sinks"], nlohmann::json(anomalous));
}

TEST_F(ExpectedSinkTest, AnalyzerReportsSurprisalOfTheActualNextToken) {
  const int64_t t = stats_.num_tokens, v = stats_.vocab;
  ASSERT_EQ(stats_.next_token_surprisal_nats.size(), static_cast<size_t>(t - 1));
  ASSERT_EQ(stats_.top_predictions.size(), static_cast<size_t>(t));
  for (int64_t i = 0; i + 1 < t; ++i) {
    const std::vector<float> row(tensors_.logits.begin() + i * v, tensors_.logits.begin() + (i + 1) * v);
    const double expected = -LogProb(row, static_cast<size_t>(ids_[static_cast<size_t>(i + 1)]));
    EXPECT_TRUE(std::fabs(stats_.next_token_surprisal_nats[static_cast<size_t>(i)] - expected) <= 1e-6)
        << i;
    ASSERT_EQ(stats_.top_predictions[static_cast<size_t>(i)].size(), static_cast<size_t>(std::min<int64_t>(5, v)));
  }
  const nlohmann::json j = StatsToJson(stats_);
  ASSERT_EQ(j["next_token_surprisal_nats"].size(), static_cast<size_t>(t - 1));
  ASSERT_EQ(j["top_predictions"].size(), static_cast<size_t>(t));
  EXPECT_EQ(j["top_predictions"][3][0]["id"], stats_.top_predictions[3][0].id);
  EXPECT_TRUE(j["top_predictions"][3][0].contains("token"));
  EXPECT_TRUE(j["top_predictions"][3][0].contains("p"));
}

TEST_F(ExpectedSinkTest, ReportShowsExpectedSinksAndTheNextTokenSection) {
  const std::string report = RenderTextReport(stats_, tokens_);
  EXPECT_THAT(report, HasSubstr("Expected sinks (structural tokens with z > 6.0"));
  EXPECT_THAT(report, HasSubstr("#17 \" tok17\"  z = "));
  EXPECT_THAT(report, HasSubstr("expected sink"));
  EXPECT_THAT(report, HasSubstr("Next token at each position"));
  EXPECT_THAT(report, HasSubstr("surprisal"));
  EXPECT_THAT(report, Not(HasSubstr("most surprising"))) << "all rows by default";

  TextReportOptions cut;
  cut.max_prediction_rows = 3;
  const std::string short_report = RenderTextReport(stats_, tokens_, cut);
  EXPECT_THAT(short_report, HasSubstr("the 3 most surprising of 40 positions"));
  // The three positions with the largest surprisal are listed, no others.
  std::vector<int64_t> order(39);
  for (int64_t i = 0; i < 39; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return stats_.next_token_surprisal_nats[static_cast<size_t>(a)] >
           stats_.next_token_surprisal_nats[static_cast<size_t>(b)];
  });
  const std::string section = short_report.substr(short_report.find("Next token at each"));
  for (int64_t k = 0; k < 39; ++k) {
    const int64_t i = order[static_cast<size_t>(k)];
    const std::string row = "  #" + std::to_string(i) + " ";
    if (k < 3) {
      EXPECT_THAT(section, HasSubstr(row)) << i;
    } else {
      EXPECT_THAT(section, Not(HasSubstr(row))) << i;
    }
  }
}

}  // namespace
}  // namespace attnscope::analysis
