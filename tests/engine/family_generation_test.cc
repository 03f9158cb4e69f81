// Generation with the KV cache on every decoder family (rotary positions,
// sliding windows, soft-capping, learned positions with an offset) against
// independent full forward passes over the growing sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "service/engine/generation.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"

namespace attnscope::engine {
namespace {

std::string FamilyDir(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

class FamilyGenerationTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ModelBundle>> b = LoadModelBundle(FamilyDir(GetParam()));
    ASSERT_TRUE(b.ok()) << b.status();
    bundle_ = *std::move(b);
    const int64_t vocab = bundle_->config().vocab_size;
    std::vector<int64_t> ids;
    for (int64_t id : {5, 17, 300, 42, 999, 0, 123}) ids.push_back(id % vocab);
    absl::StatusOr<Prompt> p = PromptFromIds(*bundle_, ids);
    ASSERT_TRUE(p.ok()) << p.status();
    prompt_ = *p;
  }
  int64_t vocab() const { return bundle_->config().vocab_size; }

  std::unique_ptr<ModelBundle> bundle_;
  Prompt prompt_;
};

// 7 prompt tokens + 14 new ones: past every fixture's sliding window (12, 16).
constexpr int kNewTokens = 14;

TEST_P(FamilyGenerationTest, CachedDecodingEqualsFullPasses) {
  for (double temperature : {0.0, 1.0}) {
    GenerationSettings s;
    s.max_new_tokens = kNewTokens;
    s.stop_at_eos = false;
    s.layer_sink_scores = true;
    s.sampling.temperature = temperature;
    s.sampling.seed = 11;
    absl::StatusOr<GenerationResult> r = Generate(*bundle_, prompt_, s);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->tokens.size(), static_cast<size_t>(kNewTokens));
    std::vector<int64_t> seq = prompt_.ids;
    for (const GeneratedToken& token : r->tokens) seq.push_back(token.id);
    // One full pass over the whole sequence gives every step's distribution
    // and attention rows (causal: later tokens do not change earlier rows).
    const model::FullRecorder full = testing::FullPass(*bundle_, seq, /*attention=*/true);
    const int64_t t = static_cast<int64_t>(seq.size());
    const int64_t layers = bundle_->config().num_layers, heads = bundle_->config().num_heads;
    double worst_p = 0, worst_sink = 0;
    for (const GeneratedToken& token : r->tokens) {
      const float* row = full.logits().data() + (token.position - 1) * vocab();
      const std::vector<double> lp = testing::ReferenceLogProbs(row, vocab());
      if (temperature == 0.0) {
        ASSERT_EQ(token.id, testing::ReferenceArgMax(row, vocab())) << "token " << token.index;
      }
      worst_p = test::Worse(worst_p, test::AbsDiff(token.probability, std::exp(lp[token.id])));
      ASSERT_EQ(token.sink_scores.size(), static_cast<size_t>(layers * heads));
      for (int64_t i = 0; i < layers * heads; ++i) {
        const double want = full.attentions()[(i * t + token.position) * t];
        worst_sink = test::Worse(worst_sink, test::AbsDiff(token.sink_scores[i], want));
      }
    }
    std::printf("%s temperature %.0f: max |dp| %.3g, max |d sink| %.3g\n", GetParam().c_str(),
                temperature, worst_p, worst_sink);
    EXPECT_LE(worst_p, 1e-5);
    EXPECT_LE(worst_sink, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGenerationTest,
                         ::testing::Values("llama", "llama-stories260K", "mistral", "qwen2",
                                           "qwen3", "gemma2", "phi3", "gpt_neox", "opt"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace attnscope::engine
