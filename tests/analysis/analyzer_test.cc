// PromptAnalyzer and its building blocks on hand-computed examples and edge
// cases: T = 1, all-structural prompts, degenerate (MAD 0) attention, the
// value-weighted share, the induction score and inconsistent event streams.
#include "service/analysis/prompt_analyzer.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/stats_json.h"
#include "service/analysis/token_stats.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope::analysis {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing_util::MakeTensors;
using testing_util::OwnedTensors;

constexpr double kTol = 1e-6;

// L = 2, H = 2, T = 3. Every map has the rows [1], [.5 .5], [.2 .3 .5];
// value norms: layer 0 head 0 (2, 1, 4), head 1 (1, 1, 1); layer 1 all 0.
OwnedTensors HandExample() {
  OwnedTensors t = MakeTensors(
      2, 2, 3, 3,
      [](int64_t, int64_t, int64_t i) {
        if (i == 0) return std::vector<double>{1};
        if (i == 1) return std::vector<double>{0.5, 0.5};
        return std::vector<double>{0.2, 0.3, 0.5};
      },
      [](int64_t s, int64_t i) { return 1.0 + s + i; });
  t.value_norms = {2, 1, 4, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  return t;
}

TEST(HandExampleTest, PerHeadAndPerTokenNumbers) {
  const OwnedTensors t = HandExample();
  AnalysisOptions options;
  options.want_value_norms = true;
  for (int64_t block : {0, 1, 2}) {
    absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options, block);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_NEAR(s->sink_score[1][1], 0.2, kTol);
    EXPECT_NEAR(s->first_token_mass[0][1], 0.35, kTol);
    EXPECT_NEAR(s->prev_token_score[1][0], 0.4, kTol);
    EXPECT_NEAR(s->attention_entropy[0][0], 0.5742667315415063, kTol);
    // Raw: mean of A[i,0]*||v_0|| over i = 1, 2; normalized by the row's
    // value-weighted total.
    EXPECT_NEAR(s->value_weighted_raw[0][0], (0.5 * 2 + 0.2 * 2) / 2, kTol);
    EXPECT_NEAR(s->value_weighted_normalized[0][0], (1.0 / 1.5 + 0.4 / 2.7) / 2, kTol);
    EXPECT_NEAR(s->value_weighted_raw[0][1], 0.35, kTol);
    EXPECT_NEAR(s->value_weighted_normalized[0][1], 0.35, kTol);
    EXPECT_NEAR(s->value_weighted_raw[1][0], 0.0, kTol);
    EXPECT_NEAR(s->value_weighted_normalized[1][1], 0.0, kTol);  // zero total: 0
    EXPECT_THAT(s->received, Pointwise(DoubleNear(kTol), {1.7 / 3, 0.8 / 2, 0.5 / 1}));
    EXPECT_NEAR(s->back_half_sink_share, 0.0, 0.0);  // sink scores 0.2 <= 0.5
    // Token norms 1 + s + i: the last state (s = L = 2) holds the max.
    EXPECT_THAT(s->max_norm, Pointwise(DoubleNear(kTol), {3.0, 4.0, 5.0}));
    EXPECT_EQ(s->massive_argmax, 2);
    EXPECT_NEAR(s->massive_ratio, 3.0 / 4.0, kTol);  // lower median of {4, 5}
    const nlohmann::json j = StatsToJson(*s);
    ASSERT_TRUE(j.contains("value_weighted_first_token_share"));
    EXPECT_NEAR(j["value_weighted_first_token_share"]["normalized"][0][0].get<double>(),
                0.4074074074074074, kTol);
    EXPECT_EQ(j["token_norms"].size(), 3u);
  }
}

// Gu et al.'s first-token importance averages every row, row 0 included:
// (1 + .5 + .2) / 3 for each head; Sink-epsilon counts heads strictly above
// the cut.
TEST(HandExampleTest, FirstTokenImportanceAndSinkEpsilon) {
  const OwnedTensors t = HandExample();
  for (const double epsilon : {0.3, 0.5, 1.7 / 3, 0.6}) {
    AnalysisOptions options;
    options.sink_epsilon = epsilon;
    for (int64_t block : {0, 1, 2}) {
      absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options, block);
      ASSERT_TRUE(s.ok()) << s.status();
      for (const auto& layer : s->first_token_importance) {
        EXPECT_THAT(layer, Pointwise(DoubleNear(kTol), {1.7 / 3, 1.7 / 3}));
      }
      // 1.7 / 3 = 0.5667: above 0.3 and 0.5, not above itself (float sums
      // land within 1e-7 of it, so that case is left to the exact grid below).
      if (epsilon != 1.7 / 3) {
        EXPECT_EQ(s->sink_eps, epsilon < 0.56 ? 1.0 : 0.0) << epsilon;
      }
      EXPECT_EQ(s->sink_epsilon, epsilon);
      const nlohmann::json j = StatsToJson(*s);
      EXPECT_EQ(j["sink_eps"].get<double>(), s->sink_eps);
      EXPECT_EQ(j["sink_epsilon"].get<double>(), epsilon);
      EXPECT_EQ(j["first_token_importance"].size(), 2u);
    }
  }
  EXPECT_EQ(SinkEpsilonShare({{0.3, 0.31}, {0.9, 0.0}}, 0.3), 0.5);  // strictly above
  EXPECT_EQ(SinkEpsilonShare({{0.3, 0.31, 0.5}}, 0.0), 1.0);
  EXPECT_EQ(SinkEpsilonShare({}, 0.3), 0.0);
}

TEST(HandExampleTest, NoValueWeightedKeyWithoutValueNorms) {
  OwnedTensors t = HandExample();
  t.value_norms.clear();
  absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), AnalysisOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->value_weighted_raw.empty());
  EXPECT_FALSE(StatsToJson(*s).contains("value_weighted_first_token_share"));
}

TEST(EdgeCaseTest, SingleToken) {
  OwnedTensors t = MakeTensors(
      2, 2, 1, 4, [](int64_t, int64_t, int64_t) { return std::vector<double>{1}; },
      [](int64_t s, int64_t) { return 3.0 + s; });
  t.value_norms.assign(4, 2.5f);
  AnalysisOptions options;
  options.want_value_norms = true;
  absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sink_score[1][1], 1.0);
  EXPECT_EQ(s->first_token_mass[0][0], 1.0);  // A[0,0] when T = 1
  EXPECT_EQ(s->first_token_importance[1][1], 1.0);
  EXPECT_EQ(s->sink_eps, 1.0);
  EXPECT_EQ(s->attention_entropy[0][1], 0.0);
  EXPECT_EQ(s->prev_token_score[1][0], 0.0);
  EXPECT_NEAR(s->value_weighted_raw[0][0], 2.5, kTol);  // i = 0 when T = 1
  EXPECT_NEAR(s->value_weighted_normalized[0][0], 1.0, kTol);
  EXPECT_EQ(s->back_half_sink_share, 1.0);
  EXPECT_EQ(s->massive_ratio, 1.0);
  EXPECT_EQ(s->massive_argmax, 0);
  EXPECT_NEAR(s->max_norm[0], 5.0, kTol);
  EXPECT_THAT(s->received, ElementsAre(1.0));
  EXPECT_THAT(s->z, ElementsAre(0.0));
  EXPECT_EQ(s->health, 10.0);
  EXPECT_TRUE(s->sinks.empty());
  EXPECT_EQ(s->num_candidates, 0);
  EXPECT_NEAR(s->next_token_entropy_nats[0], std::log(4.0), 1e-6);
  EXPECT_NEAR(s->next_token_entropy_normalized[0], 1.0, 1e-6);
}

TEST(EdgeCaseTest, AllStructuralPromptIsHealthyWithZeroZ) {
  OwnedTensors t = MakeTensors(
      1, 1, 5, 2,
      [](int64_t, int64_t, int64_t i) {
        std::vector<double> w(static_cast<size_t>(i + 1), 0.01);
        w[0] = 1.0;
        return w;
      },
      [](int64_t, int64_t) { return 1.0; });
  AnalysisOptions options;
  options.structural = {4, 3, 2, 1, 0, 7, -1, 3};  // out of range and repeats dropped
  options.threshold = 0.0;
  absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->structural, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(s->z, ElementsAre(0, 0, 0, 0, 0));
  EXPECT_EQ(s->health, 10.0);
  EXPECT_TRUE(s->sinks.empty());
  EXPECT_EQ(s->num_candidates, 0);
}

TEST(EdgeCaseTest, EverythingOnTheFirstTokenGivesZeroMadAndZeroZ) {
  OwnedTensors t = MakeTensors(
      4, 2, 6, 2,
      [](int64_t, int64_t, int64_t i) {
        std::vector<double> w(static_cast<size_t>(i + 1), 0.0);
        w[0] = 1.0;
        return w;
      },
      [](int64_t, int64_t) { return 1.0; });
  AnalysisOptions options;
  options.structural = {};
  options.threshold = 0.5;
  absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  // R = (1, 0, 0, 0, 0, 0): all but one candidate sit at log(1e-8), MAD = 0.
  EXPECT_THAT(s->received, ElementsAre(1, 0, 0, 0, 0, 0));
  EXPECT_THAT(s->z, ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_EQ(s->health, 10.0);
  EXPECT_EQ(s->num_candidates, 6);
  EXPECT_EQ(s->back_half_sink_share, 1.0);
  EXPECT_EQ(s->first_token_mass[3][1], 1.0);
  EXPECT_NEAR(s->prev_token_score[2][0], 1.0 / 5, kTol);  // only A[1,0]
  EXPECT_EQ(s->attention_entropy[0][0], 0.0);
  EXPECT_EQ(s->massive_ratio, 1.0);
}

TEST(TokenStatsTest, LogMadZUsesLowerMediansOverCandidates) {
  const std::vector<double> r = {1.0, std::exp(1.0), std::exp(2.0), std::exp(3.0),
                                 std::exp(10.0)};
  // Candidates x = 1, 2, 3, 10: m = 2 (lower median), MAD = 1 (of 1, 0, 1, 8).
  EXPECT_THAT(LogMadZ(r, {0}), Pointwise(DoubleNear(1e-9), {-2 / 1.4826, -1 / 1.4826, 0.0,
                                                             1 / 1.4826, 8 / 1.4826}));
  EXPECT_THAT(LogMadZ({0.0, 1e-12, 1.0}, {}), Pointwise(DoubleNear(1e-9), {0.0, 0.0, 0.0}));
  // Constant received attention: MAD 0, so z = 0 even for the structural 0.9.
  EXPECT_THAT(LogMadZ({0.9, 0.3, 0.3, 0.3}, {0}), ElementsAre(0.0, 0.0, 0.0, 0.0));
  EXPECT_THAT(LogMadZ({0.9, 0.3}, {0, 1}), ElementsAre(0.0, 0.0));  // no candidates
}

TEST(TokenStatsTest, ContextHealthFormula) {
  const std::vector<double> z = {-1.349, -0.674, 0.0, 0.674, 5.396};
  HealthResult h = ContextHealth(z, {0}, 5.0);
  EXPECT_THAT(h.sinks, ElementsAre(4));
  EXPECT_NEAR(h.health, 10.0 - 10.0 / 4 - 5.0, 1e-12);  // severity capped at 5
  h = ContextHealth(z, {0}, 0.5);
  EXPECT_THAT(h.sinks, ElementsAre(3, 4));
  EXPECT_NEAR(h.health, 10.0 - 5.0 - (0.674 + 5.396) / 2, 1e-12);
  h = ContextHealth({9, 9, 9}, {}, 1.0);
  EXPECT_EQ(h.health, 0.0);  // clamped
  h = ContextHealth({99, 0.1}, {0}, 1.0);
  EXPECT_EQ(h.health, 10.0);  // the structural z never counts
}

TEST(TokenStatsTest, MassiveRatioAndArgmax) {
  MassiveStats m = ComputeMassive({{10, 1, 2, 3, 4}, {0, 0, 0, 0, 0}});
  EXPECT_EQ(m.ratio, 5.0);  // lower median of {1, 2, 3, 4} is 2
  EXPECT_EQ(m.argmax, 0);
  m = ComputeMassive({{1, 5, 2, 2}, {0, 0, 5, 0}});
  EXPECT_EQ(m.argmax, 1);  // first of the tied maxima
  EXPECT_EQ(m.ratio, 0.2);  // 1 over the lower median of {5, 5, 2}
}

TEST(TokenStatsTest, NextTokenEntropy) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f),
                                     1000.0f, 0.0f, 0.0f};
  std::vector<double> nats, normalized;
  NextTokenEntropy(logits.data(), 2, 3, &nats, &normalized);
  EXPECT_NEAR(nats[0], 1.0114042647073518, 1e-6);
  EXPECT_NEAR(normalized[0], 1.0114042647073518 / std::log(3.0), 1e-6);
  EXPECT_NEAR(nats[1], 0.0, 1e-6);  // no overflow with large logits
  EXPECT_TRUE(std::isfinite(nats[1]));
}

TEST(InductionTest, ScoreOnAProbe) {
  // n = 2: BOS r1 r2 r1 r2; score = mean(A[3,2], A[4,3]).
  OwnedTensors t = MakeTensors(
      1, 2, 5, 2,
      [](int64_t, int64_t h, int64_t i) {
        std::vector<double> w(static_cast<size_t>(i + 1), 0.1);
        if (h == 0 && i >= 3) w[static_cast<size_t>(i - 1)] = 1.0 - 0.1 * i;
        return w;
      },
      [](int64_t, int64_t) { return 1.0; });
  AnalysisOptions options;
  options.induction_n = 2;
  for (int64_t block : {0, 3}) {
    absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options, block);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_NEAR(s->induction_score[0][0], (0.7 + 0.6) / 2, kTol);
    EXPECT_NEAR(s->induction_score[0][1], (1.0 / 4 + 1.0 / 5) / 2, kTol);
  }
  options.induction_n = 3;
  absl::StatusOr<PromptStats> s = AnalyzeTensors(t.View(), options);
  EXPECT_THAT(s.status().message(), HasSubstr("needs T = 7 tokens, got 5"));
}

}  // namespace
}  // namespace attnscope::analysis
