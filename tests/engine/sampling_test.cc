// The model-free arithmetic of decoding: distributions, greedy and sampled
// choices (temperature, top-k, top-p) and the stopping rule.
#include "service/engine/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

namespace attnscope::engine {
namespace {

// Logits whose softmax is `probs` exactly (up to rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)) + 3.0f);
  return logits;
}

// Relative frequency of each id over `draws` choices.
std::map<int64_t, double> Frequencies(const std::vector<float>& logits, SamplingSettings s,
                                      int draws) {
  std::mt19937_64 rng(s.seed);
  std::map<int64_t, double> freq;
  for (int i = 0; i < draws; ++i) {
    freq[ChooseToken(logits.data(), static_cast<int64_t>(logits.size()), s, rng)] += 1.0 / draws;
  }
  return freq;
}

TEST(DistributionTest, MatchesSoftmaxAndEntropy) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  const RowDistribution d = Distribution(logits.data(), 4);
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  double entropy = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = std::exp(static_cast<double>(logits[i])) / z;
    EXPECT_NEAR(std::exp(d.log_probs[i]), p, 1e-12);
    entropy -= p * std::log(p);
  }
  EXPECT_NEAR(d.entropy_nats, entropy, 1e-12);
  EXPECT_NEAR(EntropyNats(logits.data(), 4), entropy, 1e-12);
}

TEST(DistributionTest, UniformHasEntropyLogVAndNormalizedOne) {
  const std::vector<float> logits(50, 7.25f);
  const RowDistribution d = Distribution(logits.data(), 50);
  EXPECT_NEAR(d.entropy_nats, std::log(50.0), 1e-12);
  EXPECT_NEAR(NormalizedEntropy(d.entropy_nats, 50), 1.0, 1e-12);
  EXPECT_EQ(NormalizedEntropy(0.0, 1), 0.0);
}

TEST(DistributionTest, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {10000.0f, 9999.0f, -10000.0f};
  const RowDistribution d = Distribution(logits.data(), 3);
  const double p0 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(std::exp(d.log_probs[0]), p0, 1e-12);
  EXPECT_NEAR(std::exp(d.log_probs[1]), 1 - p0, 1e-12);
  EXPECT_TRUE(std::isfinite(d.entropy_nats));
  EXPECT_GT(d.entropy_nats, 0.5);
}

TEST(DistributionTest, NonFiniteLogitsGiveAValidAnswer) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {nan, 1.0f, inf, nan};
  const RowDistribution d = Distribution(logits.data(), 4);
  EXPECT_EQ(d.log_probs[2], 0.0);
  EXPECT_EQ(d.entropy_nats, 0.0);
  EXPECT_EQ(ArgMax(logits.data(), 4), 2);
  SamplingSettings s;
  s.temperature = 1.0;
  s.top_p = 0.5;
  std::mt19937_64 rng(1);
  const int64_t id = ChooseToken(logits.data(), 4, s, rng);
  EXPECT_EQ(id, 2);
  const std::vector<float> all_nan(3, nan);
  const int64_t any = ChooseToken(all_nan.data(), 3, s, rng);
  EXPECT_GE(any, 0);
  EXPECT_LT(any, 3);
}

TEST(TopIdsTest, MostLikelyFirstLowestIdOnTies) {
  const std::vector<double> lp = {-2.0, -1.0, -3.0, -1.0, -0.5};
  EXPECT_EQ(TopIds(lp, 3), (std::vector<int64_t>{4, 1, 3}));
  EXPECT_EQ(TopIds(lp, 99).size(), 5u);
  EXPECT_TRUE(TopIds(lp, 0).empty());
}

TEST(ChooseTokenTest, GreedyTakesLowestIdAmongEqualMaxima) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  std::mt19937_64 rng(3);
  SamplingSettings greedy;
  EXPECT_EQ(ChooseToken(logits.data(), 4, greedy, rng), 1);
  SamplingSettings top1;
  top1.temperature = 5.0;
  top1.top_k = 1;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ChooseToken(logits.data(), 4, top1, rng), 1);
}

TEST(ChooseTokenTest, TemperatureOneFollowsTheDistribution) {
  SamplingSettings s;
  s.temperature = 1.0;
  s.seed = 11;
  const auto freq = Frequencies(LogitsOf({0.5, 0.3, 0.2}), s, 20000);
  EXPECT_NEAR(freq.at(0), 0.5, 0.015);
  EXPECT_NEAR(freq.at(1), 0.3, 0.015);
  EXPECT_NEAR(freq.at(2), 0.2, 0.015);
}

TEST(ChooseTokenTest, TemperatureFlattens) {
  SamplingSettings s;
  s.temperature = 2.0;
  s.seed = 12;
  // p^(1/2), renormalized.
  const double a = std::sqrt(0.81), b = std::sqrt(0.09), c = std::sqrt(0.1);
  const auto freq = Frequencies(LogitsOf({0.81, 0.09, 0.1}), s, 20000);
  EXPECT_NEAR(freq.at(0), a / (a + b + c), 0.015);
  EXPECT_NEAR(freq.at(1), b / (a + b + c), 0.015);
  EXPECT_NEAR(freq.at(2), c / (a + b + c), 0.015);
}

TEST(ChooseTokenTest, TopKKeepsTheKMostLikelyRenormalized) {
  SamplingSettings s;
  s.temperature = 1.0;
  s.top_k = 2;
  s.seed = 13;
  const auto freq = Frequencies(LogitsOf({0.1, 0.4, 0.2, 0.3}), s, 20000);
  EXPECT_EQ(freq.count(0), 0u);
  EXPECT_EQ(freq.count(2), 0u);
  EXPECT_NEAR(freq.at(1), 0.4 / 0.7, 0.015);
  EXPECT_NEAR(freq.at(3), 0.3 / 0.7, 0.015);
}

TEST(ChooseTokenTest, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingSettings s;
  s.temperature = 1.0;
  s.seed = 14;
  const std::vector<float> logits = LogitsOf({0.15, 0.5, 0.05, 0.3});
  s.top_p = 0.7;  // 0.5 + 0.3 = 0.8 >= 0.7
  auto freq = Frequencies(logits, s, 20000);
  EXPECT_EQ(freq.size(), 2u);
  EXPECT_NEAR(freq.at(1), 0.5 / 0.8, 0.015);
  EXPECT_NEAR(freq.at(3), 0.3 / 0.8, 0.015);
  s.top_p = 0.85;  // needs the third token: 0.95
  freq = Frequencies(logits, s, 20000);
  EXPECT_EQ(freq.size(), 3u);
  EXPECT_NEAR(freq.at(0), 0.15 / 0.95, 0.015);
  EXPECT_EQ(freq.count(2), 0u);
  s.top_p = 0.01;  // at least one token
  freq = Frequencies(logits, s, 500);
  EXPECT_EQ(freq.size(), 1u);
  EXPECT_EQ(freq.count(1), 1u);
}

TEST(ChooseTokenTest, TopKThenTopP) {
  SamplingSettings s;
  s.temperature = 1.0;
  s.seed = 15;
  s.top_k = 3;     // keeps 0.4, 0.3, 0.2 -> renormalized 4/9, 3/9, 2/9
  s.top_p = 0.75;  // 4/9 + 3/9 = 0.78 >= 0.75
  const auto freq = Frequencies(LogitsOf({0.1, 0.2, 0.3, 0.4}), s, 20000);
  EXPECT_EQ(freq.size(), 2u);
  EXPECT_NEAR(freq.at(3), 4.0 / 7, 0.015);
  EXPECT_NEAR(freq.at(2), 3.0 / 7, 0.015);
}

TEST(ChooseTokenTest, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  const std::vector<float> logits = LogitsOf(std::vector<double>(100, 0.01));
  SamplingSettings s;
  s.temperature = 1.0;
  auto draws = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 30; ++i) out.push_back(ChooseToken(logits.data(), 100, s, rng));
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

TEST(StopReasonTest, EosFirstThenLengthElseContinue) {
  GenerationSettings s;
  s.max_new_tokens = 4;
  EXPECT_EQ(StopReasonAfter(7, 0, 7, s), "eos");
  EXPECT_EQ(StopReasonAfter(7, 3, 7, s), "eos");
  EXPECT_EQ(StopReasonAfter(6, 0, 7, s), "");
  EXPECT_EQ(StopReasonAfter(6, 2, 7, s), "");
  EXPECT_EQ(StopReasonAfter(6, 3, 7, s), "max_new_tokens");
  EXPECT_EQ(StopReasonAfter(7, 1, -1, s), "");  // the model names no eos
  s.stop_at_eos = false;
  EXPECT_EQ(StopReasonAfter(7, 1, 7, s), "");
  EXPECT_EQ(StopReasonAfter(7, 3, 7, s), "max_new_tokens");
}

}  // namespace
}  // namespace attnscope::engine
