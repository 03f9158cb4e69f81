// Generation with the KV cache against independent full forward passes, on
// the bundled tiny-gpt2 (with a tokenizer) and the random hub-layout fixture
// (no tokenizer, vocab 1000, 64 positions).
#include "service/engine/generation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"
#include "tests/engine/engine_test_util.h"

namespace attnscope::engine {
namespace {

Prompt PromptFor(const ModelBundle& bundle) {
  absl::StatusOr<Prompt> p =
      bundle.tokenizer != nullptr
          ? PromptFromText(bundle, "The cat sat on the mat and")
          : PromptFromIds(bundle, {5, 17, 300, 42, 999, 0, 123});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Prompt{};
}

GenerationSettings Greedy(int max_new_tokens) {
  GenerationSettings s;
  s.max_new_tokens = max_new_tokens;
  s.stop_at_eos = false;
  return s;
}

GenerationSettings Sampled(int max_new_tokens, uint64_t seed, double temperature = 1.0) {
  GenerationSettings s = Greedy(max_new_tokens);
  s.sampling.temperature = temperature;
  s.sampling.seed = seed;
  return s;
}

GenerationResult Generated(const ModelBundle& bundle, const Prompt& prompt,
                     const GenerationSettings& settings) {
  absl::StatusOr<GenerationResult> r = Generate(bundle, prompt, settings);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : GenerationResult{};
}

std::vector<int64_t> Ids(const GenerationResult& r) {
  std::vector<int64_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

class GenerationTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    bundle_ = testing::SharedBundle(GetParam());
    ASSERT_NE(bundle_, nullptr);
    prompt_ = PromptFor(*bundle_);
    ASSERT_FALSE(prompt_.ids.empty());
  }
  int64_t vocab() const { return bundle_->config().vocab_size; }

  const ModelBundle* bundle_ = nullptr;
  Prompt prompt_;
};

TEST_P(GenerationTest, GreedyEqualsALoopOfFullForwardPasses) {
  const int n = 10;
  const GenerationResult r = Generated(*bundle_, prompt_, Greedy(n));
  ASSERT_EQ(r.tokens.size(), static_cast<size_t>(n));
  EXPECT_EQ(r.stop_reason, "max_new_tokens");
  std::vector<int64_t> seq = prompt_.ids;
  for (int i = 0; i < n; ++i) {
    const model::FullRecorder rec = testing::FullPass(*bundle_, seq);
    const float* last = rec.logits().data() + (seq.size() - 1) * vocab();
    const int64_t expected = testing::ReferenceArgMax(last, vocab());
    const std::vector<double> lp = testing::ReferenceLogProbs(last, vocab());
    const GeneratedToken& t = r.tokens[i];
    ASSERT_EQ(t.id, expected) << "new token " << i;
    EXPECT_EQ(t.index, i);
    EXPECT_EQ(t.position, static_cast<int64_t>(seq.size()));
    EXPECT_NEAR(t.probability, std::exp(lp[expected]), 1e-5);
    EXPECT_NEAR(t.entropy_nats, testing::ReferenceEntropy(lp), 1e-5);
    EXPECT_NEAR(t.entropy_normalized,
                testing::ReferenceEntropy(lp) / std::log(static_cast<double>(vocab())), 1e-5);
    ASSERT_FALSE(t.alternatives.empty());
    EXPECT_EQ(t.alternatives[0].id, expected);
    seq.push_back(expected);
  }
}

TEST_P(GenerationTest, TextIsTheDecodedIds) {
  const GenerationResult r = Generated(*bundle_, prompt_, Greedy(8));
  ASSERT_EQ(r.tokens.size(), 8u);
  EXPECT_TRUE(ValidateUtf8(r.text).ok());
  std::string expected;
  if (bundle_->tokenizer != nullptr) {
    expected = *bundle_->tokenizer->Decode(Ids(r));
  } else {
    for (int64_t id : Ids(r)) expected += absl::StrCat("#", id);
  }
  EXPECT_EQ(r.text, expected);
  for (const GeneratedToken& t : r.tokens) {
    EXPECT_TRUE(ValidateUtf8(t.text).ok()) << t.id;
    if (bundle_->tokenizer == nullptr) {
      EXPECT_EQ(t.text, absl::StrCat("#", t.id));
    }
  }
}

TEST_P(GenerationTest, PromptEntropiesComeFromThePrefillLogits) {
  const GenerationResult r = Generated(*bundle_, prompt_, Greedy(1));
  const model::FullRecorder rec = testing::FullPass(*bundle_, prompt_.ids);
  ASSERT_EQ(r.prompt_entropy_nats.size(), prompt_.ids.size());
  ASSERT_EQ(r.prompt_entropy_normalized.size(), prompt_.ids.size());
  for (size_t i = 0; i < prompt_.ids.size(); ++i) {
    const double h = testing::ReferenceEntropy(
        testing::ReferenceLogProbs(rec.logits().data() + i * vocab(), vocab()));
    EXPECT_NEAR(r.prompt_entropy_nats[i], h, 1e-5) << "position " << i;
    EXPECT_NEAR(r.prompt_entropy_normalized[i], h / std::log(static_cast<double>(vocab())),
                1e-6);
  }
  // The last prompt position predicts the first new token.
  EXPECT_NEAR(r.prompt_entropy_nats.back(), r.tokens[0].entropy_nats, 1e-5);
  EXPECT_GE(r.prefill_seconds, 0.0);
  EXPECT_GE(r.decode_seconds, 0.0);
}

TEST_P(GenerationTest, SinkScoresEqualTheFullPassAttentionToTheFirstToken) {
  GenerationSettings s = Greedy(6);
  s.layer_sink_scores = true;
  const GenerationResult r = Generated(*bundle_, prompt_, s);
  ASSERT_EQ(r.tokens.size(), 6u);
  std::vector<int64_t> seq = prompt_.ids;
  for (int64_t id : Ids(r)) seq.push_back(id);
  const model::FullRecorder rec = testing::FullPass(*bundle_, seq, /*attention=*/true);
  const int64_t layers = bundle_->config().num_layers, heads = bundle_->config().num_heads;
  const int64_t t = static_cast<int64_t>(seq.size());
  for (const GeneratedToken& tok : r.tokens) {
    ASSERT_EQ(tok.sink_scores.size(), static_cast<size_t>(layers * heads));
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t h = 0; h < heads; ++h) {
        const double got = tok.sink_scores[l * heads + h];
        const double want = rec.attentions()[((l * heads + h) * t + tok.position) * t + 0];
        EXPECT_GE(got, 0.0);
        EXPECT_LE(got, 1.0);
        EXPECT_NEAR(got, want, 1e-5) << "token " << tok.index << " layer " << l << " head " << h;
      }
    }
  }
  // Without the flag: no scores, same tokens.
  const GenerationResult plain = Generated(*bundle_, prompt_, Greedy(6));
  ASSERT_EQ(Ids(plain), Ids(r));
  for (const GeneratedToken& tok : plain.tokens) EXPECT_TRUE(tok.sink_scores.empty());
}

TEST_P(GenerationTest, SameSeedSameTokensDifferentSeedsDifferentTokens) {
  const GenerationResult a = Generated(*bundle_, prompt_, Sampled(8, 7));
  const GenerationResult b = Generated(*bundle_, prompt_, Sampled(8, 7));
  EXPECT_EQ(Ids(a), Ids(b));
  std::set<std::vector<int64_t>> distinct;
  for (uint64_t seed : {1, 2, 3, 4}) {
    distinct.insert(Ids(Generated(*bundle_, prompt_, Sampled(8, seed))));
  }
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_NE(Ids(a), Ids(Generated(*bundle_, prompt_, Greedy(8))));
}

TEST_P(GenerationTest, TopKOneEqualsGreedy) {
  GenerationSettings s = Sampled(12, 99, 3.0);
  s.sampling.top_k = 1;
  EXPECT_EQ(Ids(Generated(*bundle_, prompt_, s)), Ids(Generated(*bundle_, prompt_, Greedy(12))));
}

TEST_P(GenerationTest, SampledTokensStayWithinTopK) {
  GenerationSettings s = Sampled(12, 5, 2.0);
  s.sampling.top_k = 4;
  s.num_alternatives = 4;
  const GenerationResult r = Generated(*bundle_, prompt_, s);
  ASSERT_EQ(r.tokens.size(), 12u);
  int not_argmax = 0;
  for (const GeneratedToken& t : r.tokens) {
    ASSERT_EQ(t.alternatives.size(), 4u);
    bool found = false;
    for (const Alternative& a : t.alternatives) found |= a.id == t.id;
    EXPECT_TRUE(found) << "token " << t.index << " id " << t.id << " is not in the top 4";
    not_argmax += t.id != t.alternatives[0].id;
  }
  EXPECT_GT(not_argmax, 0);  // it did sample
}

TEST_P(GenerationTest, SampledTokensStayWithinTheNucleus) {
  GenerationSettings s = Sampled(10, 8, 1.0);
  s.sampling.top_p = 0.3;
  const GenerationResult r = Generated(*bundle_, prompt_, s);
  ASSERT_EQ(r.tokens.size(), 10u);
  std::vector<int64_t> seq = prompt_.ids;
  int not_argmax = 0;
  for (const GeneratedToken& t : r.tokens) {
    // The nucleus of the full pass's distribution: most likely first until
    // the mass reaches top_p.
    const model::FullRecorder rec = testing::FullPass(*bundle_, seq);
    const std::vector<double> lp =
        testing::ReferenceLogProbs(rec.logits().data() + (seq.size() - 1) * vocab(), vocab());
    std::vector<std::pair<double, int64_t>> ranked;
    for (int64_t i = 0; i < vocab(); ++i) ranked.emplace_back(-lp[i], i);
    std::sort(ranked.begin(), ranked.end());
    double mass = 0;
    std::set<int64_t> nucleus;
    for (size_t i = 0; i < ranked.size() && mass < s.sampling.top_p; ++i) {
      mass += std::exp(-ranked[i].first);
      nucleus.insert(ranked[i].second);
    }
    EXPECT_EQ(nucleus.count(t.id), 1u)
        << "token " << t.index << " id " << t.id << " outside a nucleus of " << nucleus.size();
    not_argmax += t.id != ranked[0].second;
    seq.push_back(t.id);
  }
  EXPECT_GT(not_argmax, 0);  // it did sample
}

TEST_P(GenerationTest, AlternativesAreSortedAndBounded) {
  GenerationSettings s = Sampled(8, 3, 1.0);
  s.num_alternatives = 20;
  const GenerationResult r = Generated(*bundle_, prompt_, s);
  ASSERT_EQ(r.tokens.size(), 8u);
  for (const GeneratedToken& t : r.tokens) {
    ASSERT_EQ(t.alternatives.size(), 20u);
    double sum = 0;
    for (size_t i = 0; i < t.alternatives.size(); ++i) {
      const Alternative& a = t.alternatives[i];
      sum += a.probability;
      EXPECT_GT(a.probability, 0.0);
      if (i > 0) {
        EXPECT_LE(a.probability, t.alternatives[i - 1].probability);
      }
      if (a.id == t.id) {
        EXPECT_NEAR(a.probability, t.probability, 1e-12);
      }
      EXPECT_TRUE(ValidateUtf8(a.text).ok());
      EXPECT_FALSE(a.text.empty());
    }
    EXPECT_LE(sum, 1.0 + 1e-9);
    EXPECT_LE(t.probability, t.alternatives[0].probability);
  }
  s.num_alternatives = 0;
  const GenerationResult none = Generated(*bundle_, prompt_, s);
  ASSERT_EQ(none.tokens.size(), 8u);
  for (const GeneratedToken& t : none.tokens) EXPECT_TRUE(t.alternatives.empty());
}

TEST_P(GenerationTest, OnTokenSeesEveryTokenOnceInOrder) {
  for (bool sinks : {false, true}) {
    GenerationSettings s = Sampled(9, 21, 1.0);
    s.layer_sink_scores = sinks;
    std::vector<GeneratedToken> seen;
    absl::StatusOr<GenerationResult> r =
        Generate(*bundle_, prompt_, s, [&](const GeneratedToken& t) { seen.push_back(t); });
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->tokens.size(), 9u);
    ASSERT_EQ(seen.size(), r->tokens.size());
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].index, static_cast<int>(i));
      EXPECT_EQ(seen[i].id, r->tokens[i].id);
      EXPECT_EQ(seen[i].probability, r->tokens[i].probability);
      EXPECT_EQ(seen[i].sink_scores, r->tokens[i].sink_scores);
      EXPECT_EQ(seen[i].sink_scores.empty(), !sinks);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GenerationTest,
                         ::testing::Values(testing::TinyModelDir(), testing::HubFixtureDir()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == testing::TinyModelDir() ? "TinyGpt2" : "HubFixture";
                         });

}  // namespace
}  // namespace attnscope::engine
