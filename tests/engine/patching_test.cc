// Activation patching (engine::RunPatching) against the independent float64
// golden files of scripts/reference/patch_reference.py on the GPT-2, Llama
// and Gemma-2 fixtures (every head's and every (layer, position) residual
// patch: metric and recovery within 1e-4); on every family, patching the
// embeddings of the one changed position recovers the clean run exactly;
// the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "service/core/safetensors.h"
#include "service/engine/patching_run.h"
#include "tests/common/float_compare.h"
#include "tests/common/golden_tensors.h"
#include "tests/engine/engine_test_util.h"

namespace attnscope::engine {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using test::AbsDiff;
using test::Worse;
using ::testing::HasSubstr;

Prompt IdsPrompt(const std::vector<int64_t>& ids) {
  Prompt p;
  p.ids = ids;
  return p;
}

// Largest difference of a [layer][column] grid from a flat reference.
double GridDiff(const std::vector<std::vector<double>>& grid, const std::vector<double>& want) {
  double worst = 0;
  size_t i = 0;
  for (const auto& row : grid) {
    for (double x : row) {
      if (i >= want.size()) return test::kInf;
      worst = Worse(worst, AbsDiff(x, want[i++]));
    }
  }
  return i == want.size() ? worst : test::kInf;
}

class PatchingReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PatchingReferenceTest, MatchesTheFloat64Reference) {
  auto file = SafetensorsFile::Open(TestDataPath("reference/patch-" + GetParam() + ".safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  const auto clean = ReadTensor<int64_t>(**file, "clean_ids");
  const auto corrupted = ReadTensor<int64_t>(**file, "corrupted_ids");
  const auto targets = ReadTensor<int64_t>(**file, "targets");
  const auto metrics = ReadTensor<double>(**file, "metrics");
  ASSERT_EQ(targets.size(), 2u);
  ASSERT_EQ(metrics.size(), 2u);
  auto loaded = LoadModelBundle(TestDataPath("models/" + GetParam()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ModelBundle* bundle = loaded->get();
  const int64_t layers = bundle->config().num_layers;
  for (PatchTarget what : {PatchTarget::kHeads, PatchTarget::kResidual}) {
    const bool heads = what == PatchTarget::kHeads;
    PatchSettings settings;
    settings.what = what;
    int64_t reported = 0, total = 0, baselines = 0;
    std::vector<PatchStep> steps;
    settings.on_baseline = [&](const PatchRun& baseline) {
      ++baselines;
      EXPECT_EQ(reported, 0);  // before any patched pass
      EXPECT_EQ(baseline.token_a, targets[0]);
      EXPECT_TRUE(test::Within(AbsDiff(baseline.clean_metric, metrics[0]), 1e-4));
    };
    settings.progress = [&](const PatchStep& step) {
      EXPECT_EQ(step.done, reported + 1);
      reported = step.done;
      total = step.total;
      steps.push_back(step);
    };
    auto run = RunPatching(*bundle, IdsPrompt(clean), IdsPrompt(corrupted), settings);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(baselines, 1);
    // Each step carries its own cell of the final grids, layer-major.
    for (size_t i = 0; i < steps.size(); ++i) {
      const PatchStep& s = steps[i];
      const int64_t columns = static_cast<int64_t>(run->metric[0].size());
      EXPECT_EQ(s.layer * columns + s.column, static_cast<int64_t>(i));
      EXPECT_EQ(s.metric, run->metric[s.layer][s.column]);
      EXPECT_EQ(s.recovery, run->recovery[s.layer][s.column]);
    }
    EXPECT_EQ(run->token_a, targets[0]);
    EXPECT_EQ(run->token_b, targets[1]);
    const int64_t columns =
        heads ? bundle->config().num_heads : static_cast<int64_t>(clean.size());
    EXPECT_EQ(run->passes, layers * columns);
    EXPECT_EQ(reported, layers * columns);
    EXPECT_EQ(total, layers * columns);
    double worst = Worse(AbsDiff(run->clean_metric, metrics[0]),
                         AbsDiff(run->corrupted_metric, metrics[1]));
    const std::string name = heads ? "heads" : "residual";
    worst = Worse(worst, GridDiff(run->metric, ReadTensor<double>(**file, name + "_metric")));
    worst = Worse(worst, GridDiff(run->recovery, ReadTensor<double>(**file, name + "_recovery")));
    std::cout << name << ": max |diff| from the float64 reference " << worst << "\n";
    EXPECT_TRUE(test::Within(worst, 1e-4)) << name << " " << worst;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt2LlamaGemma2, PatchingReferenceTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2"));

// The embeddings of the one changed position are all that differ: patching
// them in recovers the clean metric exactly, on every family.
class PatchingFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PatchingFamilyTest, PatchingTheChangedEmbeddingRecoversTheCleanRun) {
  auto bundle = LoadModelBundle(TestDataPath("models/" + GetParam()));
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const int64_t vocab = (*bundle)->config().vocab_size;
  std::vector<int64_t> clean;
  for (int64_t i = 0; i < 9; ++i) clean.push_back((i * 37 + 3) % vocab);
  std::vector<int64_t> corrupted = clean;
  corrupted[3] = (corrupted[3] + vocab / 2) % vocab;
  PatchSettings settings;
  settings.what = PatchTarget::kResidual;
  // Two fixed targets: a random toy's top prediction may be the same on both.
  settings.token_a = 1;
  settings.token_b = 2;
  auto run = RunPatching(**bundle, IdsPrompt(clean), IdsPrompt(corrupted), settings);
  ASSERT_TRUE(run.ok()) << run.status();
  for (int64_t p = 0; p < 9; ++p) {
    const double want = p == 3 ? 1.0 : 0.0;
    EXPECT_TRUE(test::Within(AbsDiff(run->recovery[0][p], want), 1e-6))
        << "position " << p << ": " << run->recovery[0][p];
  }
  // Head patching runs on every family (GQA, post-attention norms,
  // parallel residual) and gives a number for every head.
  settings.what = PatchTarget::kHeads;
  auto heads = RunPatching(**bundle, IdsPrompt(clean), IdsPrompt(corrupted), settings);
  ASSERT_TRUE(heads.ok()) << heads.status();
  ASSERT_EQ(heads->recovery.size(), static_cast<size_t>((*bundle)->config().num_layers));
  for (const auto& row : heads->recovery) {
    for (double r : row) EXPECT_TRUE(std::isfinite(r)) << r;
  }
}

// Passes that start at layer l from the corrupted run's residual stream
// (reuse_prefix, the default) give the numbers of passes that run every
// layer, on every family, for both kinds of patch.
TEST_P(PatchingFamilyTest, ReusingTheUnchangedPrefixChangesNoNumber) {
  auto bundle = LoadModelBundle(TestDataPath("models/" + GetParam()));
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const int64_t vocab = (*bundle)->config().vocab_size;
  std::vector<int64_t> clean, corrupted;
  for (int64_t i = 0; i < 7; ++i) clean.push_back((i * 53 + 11) % vocab);
  corrupted = clean;
  corrupted[2] = (corrupted[2] + 7) % vocab;
  corrupted[5] = (corrupted[5] + vocab / 3) % vocab;
  for (const PatchTarget what : {PatchTarget::kHeads, PatchTarget::kResidual}) {
    PatchSettings settings;
    settings.what = what;
    settings.token_a = 1;
    settings.token_b = 2;
    // should_stop is asked before every layer a pass runs: it counts them.
    int64_t layers_run = 0;
    settings.should_stop = [&layers_run] {
      ++layers_run;
      return false;
    };
    auto reused = RunPatching(**bundle, IdsPrompt(clean), IdsPrompt(corrupted), settings);
    const int64_t reused_layers = layers_run;
    layers_run = 0;
    settings.reuse_prefix = false;
    auto full = RunPatching(**bundle, IdsPrompt(clean), IdsPrompt(corrupted), settings);
    ASSERT_TRUE(reused.ok()) << reused.status();
    ASSERT_TRUE(full.ok()) << full.status();
    // Two baseline passes, then a pass per patch: from layer l on when reused.
    const int64_t layers = (*bundle)->config().num_layers;
    const auto columns = static_cast<int64_t>(full->metric[0].size());
    EXPECT_EQ(layers_run, 2 * layers + layers * columns * layers);
    EXPECT_EQ(reused_layers, 2 * layers + columns * layers * (layers + 1) / 2);
    ASSERT_EQ(reused->metric.size(), full->metric.size());
    double worst = 0;
    for (size_t l = 0; l < full->metric.size(); ++l) {
      ASSERT_EQ(reused->metric[l].size(), full->metric[l].size());
      for (size_t c = 0; c < full->metric[l].size(); ++c) {
        worst = Worse(worst, AbsDiff(reused->metric[l][c], full->metric[l][c]));
      }
    }
    EXPECT_TRUE(test::Within(worst, 0.0)) << "largest |metric difference| " << worst;
    std::cout << GetParam() << (what == PatchTarget::kHeads ? " heads" : " residual")
              << ": largest |metric difference| " << worst << "\n";
  }
}

// A resumed pass is refused where it cannot be right.
TEST(PatchingTest, ResumedPassesAreChecked) {
  const ModelBundle* bundle = testing::SharedBundle(testing::HubFixtureDir());
  ASSERT_NE(bundle, nullptr);
  const model::ModelConfig& config = bundle->config();
  std::vector<float> state(static_cast<size_t>(4 * config.hidden_size), 0.0f);
  model::ForwardOptions options;
  options.resume = {static_cast<int>(config.num_layers), state.data(), static_cast<int64_t>(state.size())};
  absl::Status status = bundle->model->Forward({{5, 6, 7, 8}}, options, {});
  EXPECT_THAT(std::string(status.message()), HasSubstr("resumed at layer"));
  options.resume = {1, state.data(), static_cast<int64_t>(state.size()) - 1};
  status = bundle->model->Forward({{5, 6, 7, 8}}, options, {});
  EXPECT_THAT(std::string(status.message()), HasSubstr("values of the residual stream"));
  options.resume = {1, state.data(), static_cast<int64_t>(state.size())};
  status = bundle->model->Forward({{5, 6, 7, 8}, {5, 6, 7, 8}}, options, {});
  EXPECT_THAT(std::string(status.message()), HasSubstr("one sequence"));
  EXPECT_TRUE(bundle->model->Forward({{5, 6, 7, 8}}, options, {}).ok());
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, PatchingFamilyTest,
                         ::testing::Values("gpt2-random-hub-layout", "llama", "gemma2", "mistral",
                                           "qwen2", "qwen3", "phi3", "gpt_neox", "opt"));

TEST(PatchingTest, BadPromptsAndTargetsAreClearErrors) {
  const ModelBundle* bundle = testing::SharedBundle(testing::HubFixtureDir());
  ASSERT_NE(bundle, nullptr);
  const std::vector<int64_t> clean = {5, 6, 7, 8};
  auto run = RunPatching(*bundle, IdsPrompt(clean), IdsPrompt({5, 6, 7}), {});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("the clean prompt has 4 tokens and the corrupted one 3"));
  PatchSettings settings;
  settings.token_a = 1000;
  run = RunPatching(*bundle, IdsPrompt(clean), IdsPrompt({5, 9, 7, 8}), settings);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("target id 1000 is outside"));
  run = RunPatching(*bundle, IdsPrompt(clean), IdsPrompt(clean), {});
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(run.status()));
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("nothing to recover"));
}

}  // namespace
}  // namespace attnscope::engine
