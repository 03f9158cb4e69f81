// Direct logit attribution on the fixture models, against the independent
// float64 golden files of scripts/reference/dla_reference.py
// (tests/data/reference/dla-*.safetensors): every contribution within 1e-4;
// on every family the parts sum to the model's own logit of the target;
// positions, targets and their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "service/analysis/logit_attribution.h"
#include "service/core/safetensors.h"
#include "service/model/language_model.h"
#include "tests/common/float_compare.h"
#include "tests/common/golden_tensors.h"

namespace attnscope::analysis {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using test::AbsDiff;
using test::Worse;
using ::testing::HasSubstr;

constexpr double kTolerance = 1e-4;

std::unique_ptr<model::LanguageModel> LoadFixture(const std::string& fixture) {
  auto model = model::LoadLanguageModel(TestDataPath("models/" + fixture));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

AttributionModel Bind(const model::LanguageModel& m) {
  AttributionModel a;
  a.head_writes = [&m](int layer, const float* mix, const float* raw, int64_t rows, float* out) {
    return m.HeadWrites(layer, mix, raw, rows, model::Precision::kFloat32, out);
  };
  a.readout_directions = [&m](const float* r, const int64_t* t, int64_t rows, float* dir,
                              double* offset) {
    return m.ReadoutDirections(r, t, rows, dir, offset);
  };
  a.last_state_logits = [&m](const float* x, int64_t rows, float* logits) {
    return m.HiddenStateLogits(static_cast<int>(m.config().num_layers), x, rows,
                               model::Precision::kFloat32, logits);
  };
  a.num_layers = m.config().num_layers;
  a.num_heads = m.config().num_heads;
  a.vocab = m.config().vocab_size;
  return a;
}

absl::StatusOr<LogitAttribution> Attribute(const model::LanguageModel& m,
                                           const std::vector<int64_t>& ids,
                                           AttributionOptions options) {
  options.input_ids = ids;
  LogitAttributionObserver observer(options, Bind(m));
  const absl::Status pass = m.Forward({ids}, {}, {&observer});
  if (!observer.status().ok()) return observer.status();
  if (!pass.ok()) return pass;
  return observer.Finish();
}

std::vector<int64_t> SomeIds(const model::LanguageModel& m, int64_t count) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) ids.push_back((i * 37 + 3) % m.config().vocab_size);
  return ids;
}

// Gemma-2's final soft-capping; the identity elsewhere.
double Cap(const model::LanguageModel& m, double z) {
  const double c = m.config().decoder.final_softcap;
  return c > 0 ? std::tanh(z / c) * c : z;
}

class DlaGoldenTest : public ::testing::TestWithParam<std::string> {};

// Every part's contribution at both positions, the default targets (the
// next token; the top prediction at the last position) and the sum.
TEST_P(DlaGoldenTest, MatchesTheFloat64Reference) {
  auto file = SafetensorsFile::Open(TestDataPath("reference/dla-" + GetParam() + ".safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  const auto ids = ReadTensor<int64_t>(**file, "input_ids");
  const auto positions = ReadTensor<int64_t>(**file, "positions");
  const auto targets = ReadTensor<int64_t>(**file, "targets");
  const auto embedding = ReadTensor<double>(**file, "embedding");
  const auto heads = ReadTensor<double>(**file, "heads");  // (P, L, H)
  const auto bias = ReadTensor<double>(**file, "attention_bias");
  const auto mlp = ReadTensor<double>(**file, "mlp");
  const auto offset = ReadTensor<double>(**file, "offset");
  const auto total = ReadTensor<double>(**file, "logit_before_cap");
  auto model = LoadFixture(GetParam());
  ASSERT_NE(model, nullptr);
  const int64_t layers = model->config().num_layers, h = model->config().num_heads;
  ASSERT_EQ(positions.size(), 2u);
  ASSERT_EQ(static_cast<int64_t>(heads.size()), 2 * layers * h);
  AttributionOptions options;
  options.positions = positions;
  auto result = Attribute(*model, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->positions.size(), 2u);
  double worst = 0, sum = 0;
  for (size_t k = 0; k < 2; ++k) {
    const PositionAttribution& a = result->positions[k];
    EXPECT_EQ(a.position, positions[k]);
    EXPECT_EQ(a.target, targets[k]);
    EXPECT_EQ(a.source, k == 0 ? TargetSource::kNextToken : TargetSource::kTopPrediction);
    ASSERT_EQ(static_cast<int64_t>(a.heads.size()), layers);
    worst = Worse(worst, AbsDiff(a.embedding, embedding[k]));
    worst = Worse(worst, AbsDiff(a.offset, offset[k]));
    for (int64_t l = 0; l < layers; ++l) {
      ASSERT_EQ(static_cast<int64_t>(a.heads[l].size()), h);
      for (int64_t j = 0; j < h; ++j) {
        worst = Worse(worst, AbsDiff(a.heads[l][j], heads[(k * layers + l) * h + j]));
      }
      worst = Worse(worst, AbsDiff(a.attention_bias[l], bias[k * layers + l]));
      worst = Worse(worst, AbsDiff(a.mlp[l], mlp[k * layers + l]));
    }
    worst = Worse(worst, AbsDiff(a.total, total[k]));
    // The sum check: the parts give the model's own logit.
    sum = Worse(sum, AbsDiff(Cap(*model, a.total), a.logit));
  }
  std::cout << GetParam() << ": max |diff| of a contribution " << worst
            << ", of the capped sum from the model's logit " << sum << "\n";
  EXPECT_TRUE(test::Within(worst, kTolerance)) << worst;
  EXPECT_TRUE(test::Within(sum, kTolerance)) << sum;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DlaGoldenTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2"));

class DlaFamilyTest : public ::testing::TestWithParam<std::string> {};

// On every family, at every position of a 17-token prompt: the parts sum to
// the model's logit of the target (Hugging Face's layouts: parallel
// residual, post-sublayer norms, biases, GQA); heads carry the attention.
TEST_P(DlaFamilyTest, PartsSumToTheModelsLogit) {
  auto model = LoadFixture(GetParam());
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> ids = SomeIds(*model, 17);
  AttributionOptions options;
  for (int64_t i = 0; i < 17; ++i) options.positions.push_back(i);
  auto result = Attribute(*model, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->positions.size(), 17u);
  double worst = 0, head_mass = 0;
  for (const PositionAttribution& a : result->positions) {
    worst = Worse(worst, AbsDiff(Cap(*model, a.total), a.logit));
    for (const auto& layer : a.heads) {
      for (double c : layer) head_mass += std::fabs(c);
    }
  }
  std::cout << GetParam() << ": max |capped sum - logit| " << worst << ", sum |head| "
            << head_mass << "\n";
  EXPECT_TRUE(test::Within(worst, kTolerance)) << worst;
  EXPECT_GT(head_mass, 0.0);
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, DlaFamilyTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2", "mistral",
                                           "qwen2", "qwen3", "phi3", "gpt_neox", "opt"));

// Given targets go with their positions in any order; one target serves
// every position; a given target's attribution sums to its own logit.
TEST(DlaOptionsTest, GivenTargetsFollowTheirPositions) {
  auto model = LoadFixture("llama");
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> ids = SomeIds(*model, 12);
  AttributionOptions options;
  options.positions = {9, 2};
  options.targets = {100, 7};
  auto result = Attribute(*model, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->positions.size(), 2u);
  EXPECT_EQ(result->positions[0].position, 2);
  EXPECT_EQ(result->positions[0].target, 7);
  EXPECT_EQ(result->positions[1].position, 9);
  EXPECT_EQ(result->positions[1].target, 100);
  for (const PositionAttribution& a : result->positions) {
    EXPECT_EQ(a.source, TargetSource::kGiven);
    EXPECT_TRUE(test::Within(AbsDiff(a.total, a.logit), kTolerance)) << a.total << " " << a.logit;
  }
  options.targets = {5};
  result = Attribute(*model, ids, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->positions[0].target, 5);
  EXPECT_EQ(result->positions[1].target, 5);
}

TEST(DlaOptionsTest, BadPositionsAndTargetsAreClearErrors) {
  auto model = LoadFixture("gpt2-random-hub-layout");
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> ids = SomeIds(*model, 8);
  auto expect = [&](AttributionOptions options, const std::string& message) {
    auto result = Attribute(*model, ids, options);
    ASSERT_FALSE(result.ok()) << message;
    EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(message));
  };
  AttributionOptions o;
  o.positions = {8};
  expect(o, "position 8 is outside the prompt's 8 tokens");
  o.positions = {1, 1};
  expect(o, "position 1 is given twice");
  o.positions = {1, 2, 3};
  o.targets = {4, 5};
  expect(o, "2 targets for 3 positions");
  o.targets = {1000};
  expect(o, "target id 1000 is outside the vocabulary [0, 1000)");
  o = AttributionOptions();
  for (int64_t i = 0; i < 8; ++i) o.positions.push_back(i);
  o.max_positions = 4;
  expect(o, "ask for at most 4");
}

}  // namespace
}  // namespace attnscope::analysis
