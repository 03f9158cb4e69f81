// The shared comparison helpers fail on NaN, infinities and size mismatches,
// and pass only on what is really close.
#include "tests/common/float_compare.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "service/analysis/prompt_stats.h"
#include "service/analysis/stats_json.h"
#include "tests/common/json_compare.h"

namespace attnscope::test {
namespace {

const float kFloatNaN = std::numeric_limits<float>::quiet_NaN();
const float kFloatInf = std::numeric_limits<float>::infinity();

TEST(FloatCompareTest, CloseVectorsPass) {
  const std::vector<float> a = {1.0f, 2.0f, 3.0f};
  const std::vector<double> b = {1.0, 2.0 + 1e-7, 3.0 - 2e-7};
  EXPECT_NEAR(MaxAbsDiff(a, b), 2e-7, 1e-9);
  EXPECT_TRUE(AllClose(a, b, 1e-6));
  EXPECT_FALSE(AllClose(a, b, 1e-8));
  ExpectAllClose(a, b, 1e-6);
}

TEST(FloatCompareTest, NaNAnywhereFails) {
  // NaN first, in the middle and last: a fold with std::max (or with
  // `if (!(d <= worst)) worst = d;`) loses it whenever a later finite
  // difference follows.
  for (size_t where = 0; where < 3; ++where) {
    std::vector<float> a = {1.0f, 2.0f, 3.0f};
    const std::vector<float> b = {1.0f, 2.5f, 3.0f};
    a[where] = kFloatNaN;
    EXPECT_TRUE(std::isnan(MaxAbsDiff(a, b))) << where;
    EXPECT_FALSE(MaxAbsDiff(a, b) <= 1e9) << where;
    EXPECT_FALSE(AllClose(a, b, 1e9)) << where;
    EXPECT_FALSE(AllClose(b, a, 1e9)) << where;
  }
  const std::vector<float> all_nan(4, kFloatNaN);
  EXPECT_TRUE(std::isnan(MaxAbsDiff(all_nan, all_nan)));
  EXPECT_FALSE(AllClose(all_nan, all_nan, 1.0));
}

TEST(FloatCompareTest, InfinitiesFail) {
  const std::vector<float> a = {0.0f, kFloatInf};
  EXPECT_EQ(MaxAbsDiff(a, std::vector<float>{0.0f, 1.0f}), kInf);
  EXPECT_FALSE(AllClose(a, std::vector<float>{0.0f, 1.0f}, 1e30));
  // The same infinity on both sides is not "close" either: a statistic that
  // overflowed is a defect whatever the reference says.
  EXPECT_FALSE(AllClose(a, a, 1e30));
  EXPECT_FALSE(Within(MaxAbsDiff(a, a), 1e30));
}

TEST(FloatCompareTest, SizeMismatchFails) {
  const std::vector<float> a = {1.0f, 2.0f};
  const std::array<float, 3> b = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(MaxAbsDiff(a, b), kInf);
  const ::testing::AssertionResult r = AllClose(a, b, 1.0);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("size 2 != expected size 3"), std::string::npos)
      << r.message();
  EXPECT_EQ(MaxAbsDiff(std::vector<float>{}, std::vector<float>{}), 0.0);
}

TEST(FloatCompareTest, WorseKeepsNaNOnceSeen) {
  double worst = 0.0;
  for (double d : {0.1, kNaN, 0.5, 0.2}) worst = Worse(worst, d);
  EXPECT_TRUE(std::isnan(worst));
  EXPECT_EQ(Worse(Worse(0.0, 0.3), 0.2), 0.3);
  EXPECT_FALSE(Within(kNaN, kInf));
  EXPECT_TRUE(Within(0.0, 0.0));
}

TEST(FloatCompareTest, ExpectAllCloseReportsTheOffendingElement) {
  const std::vector<float> a = {1.0f, kFloatNaN}, b = {1.0f, 2.0f};
  EXPECT_NONFATAL_FAILURE(ExpectAllClose(a, b, 1e-3, 0.0, "logits"), "logits: element 1");
}

TEST(FloatCompareTest, RelativeToleranceScalesWithTheExpectedValue) {
  const std::vector<double> big = {1000.0}, off = {1000.5};
  EXPECT_FALSE(AllClose(off, big, 0.1));
  EXPECT_TRUE(AllClose(off, big, 0.0, 1e-3));
}

TEST(JsonCompareTest, NaNInsideArraysAndObjectsFails) {
  nlohmann::json expected = {{"heads", {{0.5, 0.25}, {0.125, 1.0}}}, {"n", 3}};
  nlohmann::json actual = expected;
  EXPECT_EQ(MaxJsonDiff(actual, expected), 0.0);
  actual["heads"][0][0] = kNaN;  // first, followed by finite differences
  actual["heads"][1][1] = 1.5;
  EXPECT_TRUE(std::isnan(MaxJsonDiff(actual, expected)));
  EXPECT_FALSE(MaxJsonDiff(actual, expected) <= 1e9);
}

// Statistics of a 2-layer, 2-head, 3-token prompt, every value finite.
analysis::PromptStats SmallStats() {
  analysis::PromptStats s;
  s.num_layers = 2;
  s.num_heads = 2;
  s.num_tokens = 3;
  s.vocab = 10;
  s.sink_score = {{0.9, 0.2}, {0.7, 0.6}};
  s.first_token_mass = {{0.8, 0.1}, {0.6, 0.5}};
  s.attention_entropy = {{0.3, 1.0}, {0.5, 0.7}};
  s.prev_token_score = {{0.1, 0.4}, {0.2, 0.3}};
  s.back_half_sink_share = 1.0;
  s.token_norms = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}, {7.0, 8.0, 9.0}};
  s.max_norm = {7.0, 8.0, 9.0};
  s.massive_ratio = 7.0 / 8.0;
  s.massive_argmax = 2;
  s.received = {1.5, 0.8, 0.7};
  s.z = {3.0, -0.5, -0.6};
  s.health = 9.5;
  s.next_token_entropy_nats = {1.2, 1.1, 0.9};
  s.next_token_entropy_normalized = {0.52, 0.48, 0.39};
  return s;
}

// The project writes NaN as null: two runs that both came out NaN at the
// same place must not compare equal, nor a NaN run with a finite one.
TEST(JsonCompareTest, NullsWrittenByTheProjectNeverCompareEqual) {
  const nlohmann::json finite = analysis::StatsToJson(SmallStats());
  EXPECT_EQ(MaxJsonDiff(finite, finite), 0.0);

  analysis::PromptStats planted = SmallStats();
  planted.health = std::numeric_limits<double>::quiet_NaN();
  planted.sink_score[1][0] = std::numeric_limits<double>::quiet_NaN();
  // Round trip through text, as the CLI tests read --json output.
  const nlohmann::json nan_a = nlohmann::json::parse(analysis::StatsToJson(planted).dump());
  const nlohmann::json nan_b = nlohmann::json::parse(analysis::StatsToJson(planted).dump());
  ASSERT_TRUE(nan_a["health"].is_null());
  ASSERT_TRUE(nan_a["sink_score"][1][0].is_null());

  std::string where;
  EXPECT_TRUE(std::isnan(MaxJsonDiff(nan_a, nan_b, &where)));  // both sides NaN
  EXPECT_FALSE(MaxJsonDiff(nan_a, nan_b) <= 1e9);
  EXPECT_EQ(where.rfind("$.", 0), 0u) << where;
  EXPECT_NE(where.find("null"), std::string::npos) << where;
  EXPECT_TRUE(std::isnan(MaxJsonDiff(nan_a, finite)));  // NaN against a number
  EXPECT_TRUE(std::isnan(MaxJsonDiff(finite, nan_a)));  // and the other way round
  EXPECT_TRUE(std::isnan(MaxJsonDiff(nan_a["sink_score"], nan_b["sink_score"])));
  // The other members still compare as numbers.
  EXPECT_EQ(MaxJsonDiff(nan_a["first_token_mass"], finite["first_token_mass"]), 0.0);

  // One infinity is written as null too.
  analysis::PromptStats inf = SmallStats();
  inf.z[0] = std::numeric_limits<double>::infinity();
  const nlohmann::json inf_json = analysis::StatsToJson(inf);
  EXPECT_FALSE(MaxJsonDiff(inf_json["z"], inf_json["z"]) <= 1e9);
}

TEST(JsonCompareTest, NullInAnyPositionFails) {
  // Null first, in the middle and last, against numbers and against nulls.
  for (size_t where = 0; where < 3; ++where) {
    nlohmann::json a = {1.0, 2.0, 3.0}, b = {1.0, 2.5, 3.0};
    a[where] = nullptr;
    EXPECT_FALSE(MaxJsonDiff(a, b) <= 1e9) << where;
    EXPECT_FALSE(MaxJsonDiff(b, a) <= 1e9) << where;
    EXPECT_FALSE(MaxJsonDiff(a, a) <= 1e9) << where;
  }
  EXPECT_FALSE(MaxJsonDiff(nlohmann::json(), nlohmann::json()) <= 1e9);
  EXPECT_FALSE(MaxJsonDiff(nlohmann::json{{"x", nullptr}}, nlohmann::json{{"x", nullptr}}) <= 1e9);
}

TEST(JsonCompareTest, ShapeAndKeyMismatchesAreInfiniteAndNamed) {
  const nlohmann::json expected = {{"a", {1, 2}}, {"b", "x"}};
  std::string where;
  EXPECT_EQ(MaxJsonDiff(nlohmann::json{{"a", {1, 2, 3}}, {"b", "x"}}, expected, &where), kInf);
  EXPECT_EQ(where, "$.a: array of 3 vs 2");
  where.clear();
  EXPECT_EQ(MaxJsonDiff(nlohmann::json{{"a", {1, 2}}}, expected, &where), kInf);
  EXPECT_EQ(where, "$: missing key b");
  where.clear();
  EXPECT_EQ(MaxJsonDiff(nlohmann::json{{"a", {1, 2}}, {"b", "x"}, {"c", 1}}, expected, &where),
            kInf);
  EXPECT_EQ(where, "$: unexpected key c");
  EXPECT_EQ(MaxJsonDiff(nlohmann::json{{"a", {1, 2}}, {"b", "y"}}, expected), kInf);
}

}  // namespace
}  // namespace attnscope::test
