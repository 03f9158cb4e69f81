// Generate with a bounded KV-cache policy against independent references
// built from full forward passes without a cache: for every generated token,
// the greedy choice, its probability and the entropy of the logits row the
// engine decided from.
//  - original positions: one full pass over prompt + generated tokens with
//    the attention mask the policy implies (exact for any depth);
//  - cache positions: a one-layer model, where a cached token's key and
//    value depend only on the token and its cache index, so step t equals a
//    full pass over the kept tokens followed by the fed token, at positions
//    0 .. |C_t|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "service/engine/generation.h"
#include "service/engine/streaming_cache.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"
#include "tests/model/test_models.h"

namespace attnscope::engine {
namespace {

using model::CachePositions;

// Entropy and probability from float32 passes of different shapes (one
// token vs the whole sequence): differences up to about 2e-5 on the trained
// stories260K (activations up to about 12) and 2e-7 on the random one-layer
// llama.
constexpr double kTrainedTol = 1e-4;
constexpr double kTol = 1e-5;

std::string FixtureDir(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

std::unique_ptr<ModelBundle> Load(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ModelBundle>> b = LoadModelBundle(dir);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// BOS, then deterministic ids in [0, vocab) that are not all alike.
std::vector<int64_t> PromptIds(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids = {1};
  for (int64_t i = 1; i < n; ++i) ids.push_back((i * 37 + 11 + (i * i) % 13) % vocab);
  return ids;
}

EvictionPolicy Policy(const std::string& text) {
  absl::StatusOr<EvictionPolicy> p = ParseEvictionPolicy(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : EvictionPolicy{};
}

GenerationResult GenerateGreedy(const ModelBundle& b, const std::vector<int64_t>& prompt_ids,
                                const std::string& policy, CachePositions positions,
                                int new_tokens) {
  GenerationSettings s;
  s.max_new_tokens = new_tokens;
  s.stop_at_eos = false;
  s.num_alternatives = 0;
  s.cache_policy = Policy(policy);
  s.cache_positions = positions;
  absl::StatusOr<Prompt> prompt = PromptFromIds(b, prompt_ids);
  EXPECT_TRUE(prompt.ok()) << prompt.status();
  if (!prompt.ok()) return {};
  absl::StatusOr<GenerationResult> r = Generate(b, *prompt, s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : GenerationResult{};
}

// Logits (T, V) of one full pass over `ids` with `hidden` (T x T, 1 = masked;
// empty: causal only).
std::vector<float> PassLogits(const ModelBundle& b, const std::vector<int64_t>& ids,
                              const std::vector<uint8_t>& hidden = {}) {
  model::ObserverNeeds needs;
  needs.logits = true;
  model::FullRecorder rec(b.config().num_layers, b.config().num_heads, needs);
  model::ForwardOptions options;
  options.hidden_keys = hidden;
  const absl::Status s = b.model->Forward({ids}, options, {&rec});
  EXPECT_TRUE(s.ok()) << s;
  return rec.logits();
}

struct Worst {
  double entropy = 0, probability = 0;
};

// Token `i` of `r` against the reference logits `row`: the same greedy
// choice, and its probability and the row's entropy within `tol`.
void ExpectTokenMatchesRow(const GeneratedToken& token, const float* row, int64_t vocab,
                           double tol, Worst& worst, const std::string& what) {
  const std::vector<double> lp = testing::ReferenceLogProbs(row, vocab);
  EXPECT_EQ(token.id, testing::ReferenceArgMax(row, vocab)) << what << " token " << token.index;
  const double de = test::AbsDiff(token.entropy_nats, testing::ReferenceEntropy(lp));
  const double dp = test::AbsDiff(token.probability, std::exp(lp[token.id]));
  EXPECT_LE(de, tol) << what << " token " << token.index;
  EXPECT_LE(dp, tol) << what << " token " << token.index;
  worst.entropy = test::Worse(worst.entropy, de);
  worst.probability = test::Worse(worst.probability, dp);
}

// sinks:S+R with original positions on the trained stories260K (5 layers):
// the prefill sees the whole prompt; the token fed at position t >= P sees
// the first S, the R before it and itself. The mask is written from the
// policy's definition, not from the run.
TEST(EvictionGenerationTest, SinksWithOriginalPositionsEqualAMaskedFullPass) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(b, nullptr);
  const int64_t p = 12, sinks = 2, recent = 6, vocab = b->config().vocab_size;
  const int n = 40;
  const std::vector<int64_t> prompt = PromptIds(p, vocab);
  const GenerationResult r = GenerateGreedy(*b, prompt, "sinks:2+6", CachePositions::kOriginal, n);
  ASSERT_EQ(r.tokens.size(), static_cast<size_t>(n));

  // Every token but the last is fed: rows 0 .. p + n - 2.
  std::vector<int64_t> seq = prompt;
  for (int i = 0; i + 1 < n; ++i) seq.push_back(r.tokens[i].id);
  const int64_t len = static_cast<int64_t>(seq.size());
  std::vector<uint8_t> hidden(len * len, 0);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t j = 0; j < len; ++j) {
      const bool visible = j <= t && (t < p || j < sinks || j >= t - recent);
      hidden[t * len + j] = !visible;
    }
  }
  const std::vector<float> logits = PassLogits(*b, seq, hidden);
  ASSERT_EQ(logits.size(), static_cast<size_t>(len * vocab));
  Worst worst;
  for (int i = 0; i < n; ++i) {
    ExpectTokenMatchesRow(r.tokens[i], logits.data() + (p - 1 + i) * vocab, vocab, kTrainedTol,
                          worst, "sinks:2+6 original");
  }
  std::printf("stories260K sinks:2+6 original: max |entropy - masked pass| %.3g, |p| %.3g\n",
              worst.entropy, worst.probability);

  // The cache: S + R after every eviction; the prefill drops S .. p-R-1,
  // then each fed token the oldest recent one.
  std::vector<int64_t> want = {};
  for (int64_t j = sinks; j <= p - recent; ++j) want.push_back(j);
  EXPECT_EQ(r.tokens[0].evicted_positions, want);
  for (int i = 1; i + 1 < n; ++i) {
    EXPECT_EQ(r.tokens[i].evicted_positions, std::vector<int64_t>{p - recent + i}) << i;
  }
  EXPECT_TRUE(r.tokens[n - 1].evicted_positions.empty());
  for (const GeneratedToken& t : r.tokens) EXPECT_EQ(t.cache_tokens, sinks + recent) << t.index;

  // The policy matters here: the full cache decides from other rows.
  const GenerationResult full = GenerateGreedy(*b, prompt, "full", CachePositions::kOriginal, n);
  ASSERT_EQ(full.tokens.size(), static_cast<size_t>(n));
  double differs = 0;
  for (int i = 0; i < n; ++i) {
    differs = test::Worse(differs,
                          test::AbsDiff(full.tokens[i].entropy_nats, r.tokens[i].entropy_nats));
  }
  EXPECT_GT(differs, 1e-2);
}

// detected/heavy with original positions: the evictions the run reports,
// replayed as a mask, give the same tokens. The prompt fits the cache, so
// every eviction follows a fed token and token i's report is what the
// token fed after it no longer sees.
TEST(EvictionGenerationTest, AttentionRankedPoliciesEqualTheirMaskedFullPass) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(b, nullptr);
  const int64_t p = 5, vocab = b->config().vocab_size;
  const int n = 30;
  const std::vector<int64_t> prompt = PromptIds(p, vocab);
  for (const std::string policy : {"detected:2+4", "heavy:2+4"}) {
    const GenerationResult r = GenerateGreedy(*b, prompt, policy, CachePositions::kOriginal, n);
    ASSERT_EQ(r.tokens.size(), static_cast<size_t>(n)) << policy;
    std::vector<int64_t> seq = prompt;
    for (int i = 0; i + 1 < n; ++i) seq.push_back(r.tokens[i].id);
    const int64_t len = static_cast<int64_t>(seq.size());
    std::vector<uint8_t> hidden(len * len, 1);
    std::set<int64_t> cached;
    int64_t evictions = 0;
    for (int64_t t = 0; t < len; ++t) {
      cached.insert(t);
      for (int64_t j : cached) hidden[t * len + j] = 0;
      if (t >= p) {
        const std::vector<int64_t>& gone = r.tokens[t - p].evicted_positions;
        for (int64_t j : gone) EXPECT_EQ(cached.erase(j), 1u) << policy << " position " << j;
        evictions += static_cast<int64_t>(gone.size());
        EXPECT_LE(static_cast<int64_t>(cached.size()), 6) << policy << " after " << t;
      }
    }
    EXPECT_GT(evictions, 10) << policy;
    const std::vector<float> logits = PassLogits(*b, seq, hidden);
    ASSERT_EQ(logits.size(), static_cast<size_t>(len * vocab));
    Worst worst;
    for (int i = 0; i < n; ++i) {
      ExpectTokenMatchesRow(r.tokens[i], logits.data() + (p - 1 + i) * vocab, vocab, kTrainedTol,
                            worst, policy);
    }
    std::printf("stories260K %s original: max |entropy - masked pass| %.3g, |p| %.3g\n",
                policy.c_str(), worst.entropy, worst.probability);
  }
}

// A copy of the llama fixture with only its first layer.
class OneLayerLlama {
 public:
  OneLayerLlama() {
    dir_.CopyFrom(FixtureDir("llama"));
    std::string config;
    {
      std::ifstream in(FixtureDir("llama") + "/config.json");
      config.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::string from = "\"num_hidden_layers\": 3", to = "\"num_hidden_layers\": 1";
    EXPECT_NE(config.find(from), std::string::npos);
    if (config.find(from) == std::string::npos) return;
    config.replace(config.find(from), from.size(), to);
    dir_.Write("config.json", config);
    std::vector<TensorToWrite> kept;
    for (auto& [name, tensor] :
         model::testing::ReadAllTensors(FixtureDir("llama") + "/model.safetensors")) {
      if (name.find("layers.1.") == std::string::npos &&
          name.find("layers.2.") == std::string::npos) {
        kept.push_back(tensor);
      }
    }
    const absl::Status written = WriteSafetensors(dir_.str() + "/model.safetensors", kept);
    EXPECT_TRUE(written.ok()) << written;
    if (written.ok()) bundle_ = Load(dir_.str());
  }
  const ModelBundle* get() const { return bundle_.get(); }

 private:
  model::testing::ScratchDir dir_;
  std::unique_ptr<ModelBundle> bundle_;
};

// The greedy choice, probability and entropy of tokens 1 .. of `r` against
// plain passes over the tokens sinks:S+R keeps before each fed token, and
// that token, at positions 0 .. S + R (token 0 is the prefill's). With
// `tol` < 0 only the worst differences are returned.
Worst AgainstPassesOverKeptTokens(const ModelBundle& b, const std::vector<int64_t>& prompt,
                                  const GenerationResult& r, int64_t sinks, int64_t recent,
                                  double tol) {
  const int64_t p = static_cast<int64_t>(prompt.size()), vocab = b.config().vocab_size;
  std::vector<int64_t> seq = prompt;
  for (const GeneratedToken& t : r.tokens) seq.push_back(t.id);
  Worst worst;
  for (size_t i = 1; i < r.tokens.size(); ++i) {
    const int64_t t = p + static_cast<int64_t>(i) - 1;
    std::vector<int64_t> kept;
    for (int64_t j = 0; j < t; ++j) {
      if (j < sinks || j >= t - recent) kept.push_back(seq[j]);
    }
    kept.push_back(seq[t]);
    const std::vector<float> logits = PassLogits(b, kept);
    if (logits.size() != kept.size() * vocab) {
      ADD_FAILURE() << "logits of " << logits.size() << " values";
      return worst;
    }
    const float* row = logits.data() + (kept.size() - 1) * vocab;
    if (tol >= 0) {
      ExpectTokenMatchesRow(r.tokens[i], row, vocab, tol, worst, "kept tokens");
    } else {
      const std::vector<double> lp = testing::ReferenceLogProbs(row, vocab);
      worst.entropy = test::Worse(
          worst.entropy, test::AbsDiff(r.tokens[i].entropy_nats, testing::ReferenceEntropy(lp)));
    }
  }
  return worst;
}

// sinks:S+R with cache positions: token i (i >= 1) comes from feeding the
// token at text position t = P + i - 1 to a cache holding the first S and
// the R before t. Run past the model's 128 positions, which only cache
// positions allow.
TEST(EvictionGenerationTest, SinksWithCachePositionsEqualFullPassesOverTheKeptTokens) {
  const OneLayerLlama one_layer;
  ASSERT_NE(one_layer.get(), nullptr);
  const ModelBundle& b = *one_layer.get();
  ASSERT_EQ(b.config().num_layers, 1);
  const int64_t p = 10, sinks = 2, recent = 5, vocab = b.config().vocab_size;
  const int n = 150;
  ASSERT_GT(p + n, b.config().max_positions);
  const std::vector<int64_t> prompt = PromptIds(p, vocab);
  const GenerationResult r = GenerateGreedy(b, prompt, "sinks:2+5", CachePositions::kCache, n);
  ASSERT_EQ(r.tokens.size(), static_cast<size_t>(n));

  Worst worst;
  const std::vector<float> prefill = PassLogits(b, prompt);
  ASSERT_EQ(prefill.size(), static_cast<size_t>(p * vocab));
  ExpectTokenMatchesRow(r.tokens[0], prefill.data() + (p - 1) * vocab, vocab, kTol, worst,
                        "prefill");
  const Worst kept = AgainstPassesOverKeptTokens(b, prompt, r, sinks, recent, kTol);
  std::printf("one-layer llama sinks:2+5 cache: max |entropy - pass over kept| %.3g, |p| %.3g\n",
              kept.entropy, kept.probability);
  for (const GeneratedToken& t : r.tokens) EXPECT_EQ(t.cache_tokens, sinks + recent) << t.index;

  // The reference tells the shift apart: original positions (each token at
  // its text position) do not match passes over the kept tokens.
  const GenerationResult original =
      GenerateGreedy(b, prompt, "sinks:2+5", CachePositions::kOriginal, 100);
  ASSERT_EQ(original.tokens.size(), 100u);
  const Worst shifted = AgainstPassesOverKeptTokens(b, prompt, original, sinks, recent, -1);
  std::printf("original positions: max |entropy - pass over kept| %.3g\n", shifted.entropy);
  EXPECT_GT(shifted.entropy, 1e-3);
}

}  // namespace
}  // namespace attnscope::engine
