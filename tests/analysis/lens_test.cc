// The logit lens and attention rollout observers on the fixture models,
// against the independent float64 golden files of
// scripts/reference/lens_reference.py (tests/data/reference/lens-*.safetensors):
// probabilities, entropies and rollout rows within 1e-5; the last state's
// lens is the model's own softmax; the chunk size changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "service/analysis/attention_rollout.h"
#include "service/analysis/logit_lens.h"
#include "service/core/safetensors.h"
#include "service/model/gemm.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"
#include "tests/common/float_compare.h"
#include "tests/common/golden_tensors.h"

namespace attnscope::analysis {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using test::AbsDiff;
using test::Worse;
using ::testing::HasSubstr;

constexpr double kTolerance = 1e-5;

// A golden file's tensors, widened to double / int64.
struct Golden {
  std::vector<int64_t> input_ids, top_ids, next_rank, queries;
  std::vector<double> top_p, next_p, entropy, rollout;
  int64_t states = 0, tokens = 0, top_k = 0;
};

Golden LoadGolden(const std::string& fixture) {
  auto file = SafetensorsFile::Open(TestDataPath("reference/lens-" + fixture + ".safetensors"));
  EXPECT_TRUE(file.ok()) << file.status();
  Golden g;
  if (!file.ok()) return g;
  std::vector<int64_t> shape;
  g.input_ids = ReadTensor<int64_t>(**file, "input_ids");
  g.top_ids = ReadTensor<int64_t>(**file, "lens_top_ids", &shape);
  g.states = shape.at(0);
  g.tokens = shape.at(1);
  g.top_k = shape.at(2);
  g.top_p = ReadTensor<double>(**file, "lens_top_p");
  g.next_p = ReadTensor<double>(**file, "lens_next_p");
  g.next_rank = ReadTensor<int64_t>(**file, "lens_next_rank");
  g.entropy = ReadTensor<double>(**file, "lens_entropy");
  g.queries = ReadTensor<int64_t>(**file, "rollout_queries");
  g.rollout = ReadTensor<double>(**file, "rollout");
  return g;
}

std::unique_ptr<model::LanguageModel> LoadFixture(const std::string& fixture) {
  auto model = model::LoadLanguageModel(TestDataPath("models/" + fixture));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

LensReadOut ReadOut(const model::LanguageModel& model) {
  return [&model](int state, const float* x, int64_t rows, float* logits) {
    return model.HiddenStateLogits(state, x, rows, model::Precision::kFloat32, logits);
  };
}

// The lens (and, when `rollout` is given, the rollout) of one pass.
LogitLens RunLens(const model::LanguageModel& model, const std::vector<int64_t>& ids,
                  LensOptions options, AttentionRolloutObserver* rollout = nullptr,
                  std::vector<model::ForwardObserver*> more = {}) {
  options.input_ids = ids;
  const model::ModelConfig& config = model.config();
  LogitLensObserver lens(options, config.num_layers + 1, config.vocab_size, ReadOut(model));
  more.push_back(&lens);
  if (rollout != nullptr) more.push_back(rollout);
  const absl::Status status = model.Forward({ids}, {}, more);
  EXPECT_TRUE(status.ok()) << status;
  auto result = lens.Finish();
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : LogitLens();
}

class LensGoldenTest : public ::testing::TestWithParam<std::string> {};

// Top-k probabilities, next-token probability and rank, entropy of every
// (state, position), and the rollout rows of both queries, against float64.
TEST_P(LensGoldenTest, MatchesTheFloat64Reference) {
  const Golden g = LoadGolden(GetParam());
  auto model = LoadFixture(GetParam());
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(g.states, model->config().num_layers + 1);
  LensOptions options;
  options.top_k = g.top_k;
  RolloutOptions rollout_options;
  rollout_options.queries = g.queries;
  AttentionRolloutObserver rollout(rollout_options, model->config().num_layers);
  const LogitLens lens = RunLens(*model, g.input_ids, options, &rollout);
  ASSERT_EQ(static_cast<int64_t>(lens.cells.size()), g.states);
  double top = 0, next = 0, entropy = 0;
  for (int64_t s = 0; s < g.states; ++s) {
    ASSERT_EQ(static_cast<int64_t>(lens.cells[s].size()), g.tokens);
    for (int64_t i = 0; i < g.tokens; ++i) {
      const LensCell& cell = lens.cells[s][i];
      const int64_t at = s * g.tokens + i;
      ASSERT_EQ(static_cast<int64_t>(cell.top.size()), g.top_k);
      for (int64_t k = 0; k < g.top_k; ++k) {
        const auto r = static_cast<size_t>(at * g.top_k + k);
        top = Worse(top, AbsDiff(cell.top[k].p, g.top_p[r]));
        // Ids may only differ where the reference's neighbours tie within
        // the tolerance.
        if (cell.top[k].id != g.top_ids[r]) {
          const bool tie = (k > 0 && g.top_p[r - 1] - g.top_p[r] <= kTolerance) ||
                           (k + 1 < g.top_k && g.top_p[r] - g.top_p[r + 1] <= kTolerance);
          EXPECT_TRUE(tie) << "state " << s << " position " << i << " rank " << k;
        }
      }
      entropy = Worse(entropy, AbsDiff(cell.entropy, g.entropy[at]));
      if (i + 1 < g.tokens) {
        next = Worse(next, AbsDiff(cell.next_p, g.next_p[at]));
        EXPECT_EQ(cell.next_rank, g.next_rank[at]) << "state " << s << " position " << i;
      } else {
        EXPECT_TRUE(std::isnan(cell.next_p));
        EXPECT_EQ(cell.next_rank, -1);
      }
    }
  }
  auto rows = rollout.Finish();
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<double> flat;
  for (const auto& layer : rows->rows) {
    for (const auto& row : layer) flat.insert(flat.end(), row.begin(), row.end());
  }
  const double rollout_diff = test::MaxAbsDiff(flat, g.rollout);
  std::cout << GetParam() << ": max |diff| top-k p " << top << ", next-token p " << next
            << ", entropy " << entropy << ", rollout " << rollout_diff << "\n";
  EXPECT_TRUE(test::Within(top, kTolerance)) << top;
  EXPECT_TRUE(test::Within(next, kTolerance)) << next;
  EXPECT_TRUE(test::Within(entropy, kTolerance)) << entropy;
  EXPECT_TRUE(test::Within(rollout_diff, kTolerance)) << rollout_diff;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LensGoldenTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2"));

// The largest difference between the last state's lens and the model's own
// logits read the same way (LensRow), over every position.
double LastStateVsLogits(const std::string& fixture, std::vector<int64_t> ids = {}) {
  auto model = LoadFixture(fixture);
  if (model == nullptr) return test::kNaN;
  const model::ModelConfig& config = model->config();
  if (ids.empty()) {
    for (int64_t i = 0; i < 17; ++i) ids.push_back((i * 37 + 3) % config.vocab_size);
  }
  model::FullRecorder logits(config.num_layers, config.num_heads, {false, false, false, true});
  LensOptions options;
  options.top_k = 4;
  const LogitLens lens = RunLens(*model, ids, options, nullptr, {&logits});
  const auto last = static_cast<size_t>(config.num_layers);
  if (lens.cells.size() != last + 1) return test::kNaN;
  double worst = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t next = i + 1 < ids.size() ? ids[i + 1] : -1;
    const LensCell own = LensRow(logits.logits().data() + i * config.vocab_size,
                                 config.vocab_size, 4, next);
    const LensCell& cell = lens.cells[last][i];
    worst = Worse(worst, AbsDiff(cell.entropy, own.entropy));
    if (next >= 0) worst = Worse(worst, AbsDiff(cell.next_p, own.next_p));
    if (cell.top.size() != own.top.size()) return test::kInf;
    for (size_t k = 0; k < own.top.size(); ++k) {
      worst = Worse(worst, AbsDiff(cell.top[k].p, own.top[k].p));
    }
  }
  return worst;
}

class LensFamilyTest : public ::testing::TestWithParam<std::string> {};

// Hugging Face's hidden_states[L] is already after the final norm (and
// OPT's project_out): its lens is the model's softmax, not normed twice.
TEST_P(LensFamilyTest, LastStateIsTheModelsOwnSoftmax) {
  const double worst = LastStateVsLogits(GetParam());
  std::cout << GetParam() << ": last state vs the model's logits: max |diff| " << worst << "\n";
  EXPECT_TRUE(test::Within(worst, 1e-6)) << worst;
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, LensFamilyTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2", "mistral",
                                           "qwen2", "qwen3", "phi3", "gpt_neox", "opt"));

// oneDNN's AVX-512 kernels sum a row's products in an order that does not
// depend on how many rows are multiplied at once: the cells are equal. The
// BLAS (chosen on AVX2 CPUs) blocks its sums by the shape: there they agree
// to float32 rounding, which the softmax turns into relative differences of
// about 1e-6 (within the statistics' 1e-5).
bool ExactKernels() {
  return model::ChosenGemmBackend() == model::GemmBackend::kOneDnn && model::OneDnnHasAvx512();
}

void ExpectSame(double a, double b) {
  if (ExactKernels()) {
    EXPECT_EQ(a, b);
  } else {
    EXPECT_TRUE(test::Within(test::AbsDiff(a, b), 1e-5 * std::fabs(b) + 1e-9)) << a << " vs " << b;
  }
}

void ExpectSameCells(const LensCell& a, const LensCell& b) {
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t k = 0; k < a.top.size(); ++k) {
    EXPECT_EQ(a.top[k].id, b.top[k].id);
    ExpectSame(a.top[k].p, b.top[k].p);
  }
  ExpectSame(a.entropy, b.entropy);
  EXPECT_EQ(a.next_rank, b.next_rank);
  if (std::isnan(a.next_p) || std::isnan(b.next_p)) {
    EXPECT_TRUE(std::isnan(a.next_p) && std::isnan(b.next_p));
  } else {
    ExpectSame(a.next_p, b.next_p);
  }
}

// Reading out 2 or 3 rows at a time, or only some positions, gives the
// numbers of one chunk of every row (see ExpectSame).
TEST(LogitLensTest, ChunksAndPositionsChangeNothing) {
  const Golden g = LoadGolden("llama");
  auto model = LoadFixture("llama");
  ASSERT_NE(model, nullptr);
  const LogitLens whole = RunLens(*model, g.input_ids, {});
  for (int64_t chunk : {2, 3}) {
    LensOptions options;
    options.chunk_rows = chunk;
    const LogitLens chunked = RunLens(*model, g.input_ids, options);
    ASSERT_EQ(chunked.cells.size(), whole.cells.size());
    for (size_t s = 0; s < whole.cells.size(); ++s) {
      for (size_t i = 0; i < whole.cells[s].size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " state " << s << " row " << i);
        ExpectSameCells(chunked.cells[s][i], whole.cells[s][i]);
      }
    }
  }
  LensOptions some;
  some.positions = {0, 7, g.tokens - 1};
  some.chunk_rows = 2;
  const LogitLens chosen = RunLens(*model, g.input_ids, some);
  EXPECT_EQ(chosen.positions, some.positions);
  for (size_t s = 0; s < whole.cells.size(); ++s) {
    ASSERT_EQ(chosen.cells[s].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      ExpectSameCells(chosen.cells[s][k], whole.cells[s][static_cast<size_t>(some.positions[k])]);
    }
  }
}

TEST(LogitLensTest, RefusesPositionsOutsideThePrompt) {
  auto model = LoadFixture("gpt2-random-hub-layout");
  ASSERT_NE(model, nullptr);
  for (const std::vector<int64_t>& positions :
       std::vector<std::vector<int64_t>>{{0, 9}, {-1}, {3, 3}, {4, 2}}) {
    LensOptions options;
    options.positions = positions;
    LogitLensObserver lens(options, 4, 1000, ReadOut(*model));
    ASSERT_TRUE(model->Forward({{1, 2, 3, 4, 5, 6, 7, 8, 9}}, {}, {&lens}).ok());
    const auto result = lens.Finish();
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("position"));
  }
}

// Every reported row of R_l is a distribution over the keys up to its query,
// block by block as whole.
TEST(AttentionRolloutTest, RowsAreDistributionsAndBlocksChangeNothing) {
  auto model = LoadFixture("gemma2");
  ASSERT_NE(model, nullptr);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 13 + 5) % 256);
  RolloutOptions options;
  options.queries = {0, 11, 39};
  std::vector<std::vector<std::vector<double>>> results;
  for (int64_t block : {0, 7}) {
    AttentionRolloutObserver rollout(options, model->config().num_layers);
    model::ForwardOptions forward;
    forward.query_block_size = block;
    ASSERT_TRUE(model->Forward({ids}, forward, {&rollout}).ok());
    auto result = rollout.Finish();
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->rows.size(), 4u);
    for (const auto& layer : result->rows) {
      for (size_t k = 0; k < options.queries.size(); ++k) {
        double sum = 0;
        for (size_t j = 0; j < layer[k].size(); ++j) {
          if (static_cast<int64_t>(j) > options.queries[k]) {
            EXPECT_EQ(layer[k][j], 0.0);
          }
          EXPECT_GE(layer[k][j], 0.0);
          sum += layer[k][j];
        }
        EXPECT_TRUE(test::Within(std::fabs(sum - 1), 1e-5)) << sum;
      }
    }
    std::vector<std::vector<double>> flat;
    for (const auto& layer : result->rows) flat.insert(flat.end(), layer.begin(), layer.end());
    results.push_back(flat);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t r = 0; r < results[0].size(); ++r) {
    EXPECT_TRUE(test::Within(test::MaxAbsDiff(results[0][r], results[1][r]), 1e-6));
  }
}

TEST(AttentionRolloutTest, RefusesPromptsBeyondTheLimitAndBadQueries) {
  auto model = LoadFixture("gpt2-random-hub-layout");
  ASSERT_NE(model, nullptr);
  RolloutOptions options;
  options.max_tokens = 4;
  AttentionRolloutObserver rollout(options, 3);
  (void)model->Forward({{1, 2, 3, 4, 5}}, {}, {&rollout});
  auto result = rollout.Finish();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("the limit is 4 tokens"));
  RolloutOptions bad;
  bad.queries = {2, 5};
  AttentionRolloutObserver out_of_range(bad, 3);
  (void)model->Forward({{1, 2, 3, 4, 5}}, {}, {&out_of_range});
  EXPECT_THAT(out_of_range.Finish().status().message(), HasSubstr("rollout query 5"));
}

}  // namespace
}  // namespace attnscope::analysis
