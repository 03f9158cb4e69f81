// KV-cache eviction and the StreamingLLM perplexity evaluation, against
// independent references: loops of full forward passes, full passes with
// the attention mask a policy implies, (for cache positions) full passes
// over the kept tokens of a one-layer model, and for detected/heavy the
// policies written out again in eviction_reference.h and fed the attention
// of those full passes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "service/engine/eviction_eval.h"
#include "service/engine/streaming_cache.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/eviction_reference.h"
#include "tests/model/test_models.h"

namespace attnscope::engine {
namespace {

using model::CachePositions;

std::string FixtureDir(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

std::unique_ptr<ModelBundle> Load(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ModelBundle>> b = LoadModelBundle(dir);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// Deterministic ids in [0, vocab) that are not all alike.
std::vector<int64_t> Ids(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 37 + 11 + (i * i) % 13) % vocab);
  return ids;
}

EvictionPolicy Policy(const std::string& text) {
  absl::StatusOr<EvictionPolicy> p = ParseEvictionPolicy(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : EvictionPolicy{};
}

std::vector<EvictionRunResult> Evaluate(const ModelBundle& bundle, const std::vector<int64_t>& ids,
                                        const std::vector<std::string>& policies,
                                        CachePositions positions,
                                        std::vector<EvictionProgress>* progress = nullptr) {
  EvictionEvalSettings s;
  for (const std::string& p : policies) s.policies.push_back(Policy(p));
  s.positions = positions;
  absl::StatusOr<std::vector<EvictionRunResult>> r =
      EvaluateEviction(bundle, ids, s, [&](const EvictionProgress& p) {
        if (progress != nullptr) progress->push_back(p);
      });
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<EvictionRunResult>{};
}

double NllOfRow(const float* row, int64_t vocab, int64_t next) {
  return -testing::ReferenceLogProbs(row, vocab)[next];
}

// nll_t from a full pass over ids[0..N-1] with `hidden` (N x N, 1 = masked).
std::vector<double> MaskedFullPassNll(const ModelBundle& bundle, const std::vector<int64_t>& ids,
                                      const std::vector<uint8_t>& hidden) {
  model::ObserverNeeds needs;
  needs.logits = true;
  model::FullRecorder rec(bundle.config().num_layers, bundle.config().num_heads, needs);
  model::ForwardOptions options;
  options.hidden_keys = hidden;
  const absl::Status s = bundle.model->Forward({ids}, options, {&rec});
  EXPECT_TRUE(s.ok()) << s;
  std::vector<double> nll;
  const int64_t vocab = bundle.config().vocab_size;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    nll.push_back(NllOfRow(rec.logits().data() + t * vocab, vocab, ids[t + 1]));
  }
  return nll;
}

// Row t may see j <= t when j < S or j >= t - R (StartRecentKVCache: the
// cache before step t holds the first S and the R most recent tokens).
std::vector<uint8_t> SinkMask(int64_t n, int64_t sinks, int64_t recent) {
  std::vector<uint8_t> hidden(n * n, 0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j <= t; ++j) hidden[t * n + j] = !(j < sinks || j >= t - recent);
  }
  return hidden;
}

// The mask the evaluation's own evictions imply: row t sees C_t and t.
std::vector<uint8_t> MaskFromProgress(int64_t n, const std::vector<EvictionProgress>& progress) {
  std::vector<uint8_t> hidden(n * n, 1);
  std::set<int64_t> cached;
  for (const EvictionProgress& p : progress) {
    const int64_t t = p.steps_done - 1;
    cached.insert(t);
    for (int64_t j : cached) hidden[t * n + j] = 0;
    for (int64_t j : p.evicted) cached.erase(j);
  }
  return hidden;
}

TEST(EvictionPolicyTest, ParsesEverySpelling) {
  EXPECT_EQ(PolicyName(Policy("full")), "full");
  EXPECT_EQ(PolicyName(Policy("sinks:4+28")), "sinks:4+28");
  EXPECT_EQ(PolicyName(Policy("window:32")), "window:32");
  EXPECT_EQ(PolicyName(Policy("detected:4+60")), "detected:4+60");
  EXPECT_EQ(PolicyName(Policy("heavy:8+8")), "heavy:8+8");
  EXPECT_EQ(Policy("sinks:4+28").capacity(), 32);
  EXPECT_EQ(Policy("window:32").keep, 0);
}

TEST(EvictionPolicyTest, RejectsBadSyntaxWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"sinks", "missing \":\""},
      {"sink:4+28", "unknown policy \"sink\""},
      {"sinks:4", "two sizes"},
      {"sinks:4+x", "R must be a whole number, got \"x\""},
      {"sinks:-1+4", "S must be a whole number"},
      {"window:0", "keeps no token"},
      {"sinks:0+0", "keeps no token"},
      {"detected:+4", "K must be a whole number"},
      {"window:2000000", "above the limit 1048576"},
      {"heavy:1+2+3", "two sizes"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<EvictionPolicy> p = ParseEvictionPolicy(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(want), std::string::npos) << p.status();
  }
}

TEST(EvictionTrackerTest, DetectedKeepsTheMostAttendedOlderTokensTiesToTheEarlier) {
  EvictionTracker tracker(Policy("detected:2+1"));
  // Four queries; position 2 gets the most, then 0 and 1 tie.
  tracker.Observe({0}, {1.0});
  tracker.Observe({0, 1}, {0.2, 0.8});
  tracker.Observe({0, 1, 2}, {0.1, 0.1, 0.8});
  tracker.Observe({0, 1, 2, 3}, {0.1, 0.1, 0.7, 0.1});
  // Means: 0 -> 0.35, 1 -> 1/3, 2 -> 0.75; position 3 is the recent one.
  EXPECT_EQ(tracker.SelectKept({0, 1, 2, 3}), (std::vector<int64_t>{0, 2, 3}));
  EvictionTracker ties(Policy("detected:1+1"));
  ties.Observe({0, 1, 2}, {0.5, 0.5, 0.0});
  EXPECT_EQ(ties.SelectKept({0, 1, 2}), (std::vector<int64_t>{0, 2}));
}

TEST(EvictionTrackerTest, HeavyCountsOnlyTheLastRQueries) {
  EvictionTracker tracker(Policy("heavy:1+2"));
  tracker.Observe({0, 1, 2}, {0.9, 0.05, 0.05});  // falls out of the window below
  tracker.Observe({0, 1, 2}, {0.1, 0.6, 0.3});
  tracker.Observe({0, 1, 2, 3}, {0.1, 0.6, 0.2, 0.1});
  EXPECT_NEAR(tracker.Score(0), 0.2, 1e-12);
  EXPECT_NEAR(tracker.Score(1), 1.2, 1e-12);
  EXPECT_EQ(tracker.SelectKept({0, 1, 2, 3}), (std::vector<int64_t>{1, 2, 3}));
}

// R + S >= N: nothing is evicted, so every policy equals the full cache and a
// loop of full forward passes (one per step, over x_0..x_t).
// Tolerances: 1e-5 on nll; the trained stories260K gets 5e-5 because its
// activations reach about 12 and float32 rounding in GEMMs of different
// shapes (one token vs the whole prefix) grows with them (the project's
// other stories260K checks are held to 1e-4 for the same reason).
constexpr double kTol = 1e-5;
constexpr double kTrainedTol = 5e-5;

void ExpectUnboundedEqualsFullPasses(const ModelBundle& bundle, CachePositions positions,
                                     double tol = kTol) {
  const int64_t n = 24, vocab = bundle.config().vocab_size;
  const std::vector<int64_t> ids = Ids(n, vocab);
  const std::vector<EvictionRunResult> runs = Evaluate(
      bundle, ids, {"full", "sinks:4+20", "window:24", "detected:4+20", "heavy:2+30"}, positions);
  ASSERT_EQ(runs.size(), 5u);
  std::vector<double> loop;
  for (int64_t t = 0; t + 1 < n; ++t) {
    const std::vector<int64_t> prefix(ids.begin(), ids.begin() + t + 1);
    const model::FullRecorder full = testing::FullPass(bundle, prefix);
    loop.push_back(NllOfRow(full.logits().data() + t * vocab, vocab, ids[t + 1]));
  }
  for (const EvictionRunResult& r : runs) {
    EXPECT_EQ(r.steps, n - 1) << r.policy;
    EXPECT_LE(test::MaxAbsDiff(r.nll, runs[0].nll), tol) << r.policy;
    EXPECT_LE(test::MaxAbsDiff(r.nll, loop), tol) << r.policy;
    EXPECT_EQ(r.max_cache_tokens, n - 1) << r.policy;
  }
  std::printf("%s %s: max |nll - loop of full passes| %.3g\n", bundle.config().model_type.c_str(),
              CachePositionsName(positions).c_str(), test::MaxAbsDiff(runs[1].nll, loop));
}

TEST(EvictionEvalTest, UnboundedPoliciesEqualFullPassesLearnedPositions) {
  std::unique_ptr<ModelBundle> b = Load(testing::TinyModelDir());
  ASSERT_NE(b, nullptr);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kOriginal);
}

TEST(EvictionEvalTest, UnboundedPoliciesEqualFullPassesRotary) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama"));
  ASSERT_NE(b, nullptr);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kCache);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kOriginal);
}

// Mistral's sliding window (16) is shorter than the 24 tokens read.
TEST(EvictionEvalTest, UnboundedPoliciesEqualFullPassesSlidingWindow) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("mistral"));
  ASSERT_NE(b, nullptr);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kCache);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kOriginal);
}

TEST(EvictionEvalTest, UnboundedPoliciesEqualFullPassesTrainedRotary) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(b, nullptr);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kCache, kTrainedTol);
  ExpectUnboundedEqualsFullPasses(*b, CachePositions::kOriginal, kTrainedTol);
}

// sinks/window with original positions: one full pass with the mask the
// policy implies (written here from the definition, not from the run).
void ExpectSinkPoliciesEqualMaskedPass(const std::string& dir, int64_t n, double tol = kTol) {
  std::unique_ptr<ModelBundle> b = Load(dir);
  ASSERT_NE(b, nullptr);
  const std::vector<int64_t> ids = Ids(n, b->config().vocab_size);
  const std::vector<EvictionRunResult> runs =
      Evaluate(*b, ids, {"sinks:4+8", "window:8", "sinks:1+3"}, CachePositions::kOriginal);
  ASSERT_EQ(runs.size(), 3u);
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{4, 8}, {0, 8}, {1, 3}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::vector<double> want =
        MaskedFullPassNll(*b, ids, SinkMask(n, sizes[i].first, sizes[i].second));
    const double d = test::MaxAbsDiff(runs[i].nll, want);
    std::printf("%s %s original: max |nll - masked full pass| %.3g\n",
                b->config().model_type.c_str(), runs[i].policy.c_str(), d);
    EXPECT_LE(d, tol) << runs[i].policy;
    EXPECT_EQ(runs[i].max_cache_tokens, sizes[i].first + sizes[i].second + 1);
  }
  // The bounded run really differs from the full cache (the test can fail).
  const std::vector<EvictionRunResult> full = Evaluate(*b, ids, {"full"}, CachePositions::kOriginal);
  EXPECT_GT(test::MaxAbsDiff(runs[0].nll, full[0].nll), 1e-4);
}

TEST(EvictionEvalTest, SinkPoliciesEqualMaskedFullPassLearnedPositions) {
  ExpectSinkPoliciesEqualMaskedPass(testing::TinyModelDir(), 40);
}

TEST(EvictionEvalTest, SinkPoliciesEqualMaskedFullPassRotary) {
  ExpectSinkPoliciesEqualMaskedPass(FixtureDir("llama"), 40);
}

TEST(EvictionEvalTest, SinkPoliciesEqualMaskedFullPassTrainedRotary) {
  ExpectSinkPoliciesEqualMaskedPass(FixtureDir("llama-stories260K"), 40, kTrainedTol);
}

// Mistral's sliding window (16) over text positions, evicting at 4 + 8.
TEST(EvictionEvalTest, SinkPoliciesEqualMaskedFullPassSlidingWindow) {
  ExpectSinkPoliciesEqualMaskedPass(FixtureDir("mistral"), 40);
}

// detected/heavy: their own evictions, replayed as a mask, give the same
// numbers, and the cache stays within K + R (whether those evictions are the
// right ones is checked against eviction_reference.h below).
TEST(EvictionEvalTest, AttentionRankedPoliciesEqualTheirMaskedFullPass) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama"));
  ASSERT_NE(b, nullptr);
  const int64_t n = 40;
  const std::vector<int64_t> ids = Ids(n, b->config().vocab_size);
  for (const std::string policy : {"detected:3+6", "heavy:3+6"}) {
    std::vector<EvictionProgress> progress;
    const std::vector<EvictionRunResult> runs =
        Evaluate(*b, ids, {policy}, CachePositions::kOriginal, &progress);
    ASSERT_EQ(runs.size(), 1u);
    ASSERT_EQ(progress.size(), static_cast<size_t>(n - 1));
    for (const EvictionProgress& p : progress) EXPECT_LE(p.cache_tokens, 9);
    const double d = test::MaxAbsDiff(runs[0].nll, MaskedFullPassNll(*b, ids, MaskFromProgress(n, progress)));
    std::printf("%s original: max |nll - masked full pass| %.3g\n", policy.c_str(), d);
    EXPECT_LE(d, kTol);
  }
}

// Every step's evictions and nll against the reference fed the attention of
// full passes (eviction_reference.h); the attention-ranked policies must
// evict something, and something else than sinks:K+R would.
void ExpectEqualsReference(const ModelBundle& b, const std::vector<int64_t>& ids,
                           const std::vector<std::string>& policies, CachePositions positions,
                           double tol) {
  for (const std::string& policy : policies) {
    std::vector<EvictionProgress> progress;
    const std::vector<EvictionRunResult> runs = Evaluate(b, ids, {policy}, positions, &progress);
    ASSERT_EQ(runs.size(), 1u);
    const testing::RefEvaluation want = testing::ReferenceEvaluation(b, ids, policy, positions);
    ASSERT_EQ(progress.size(), want.evicted.size()) << policy;
    size_t evictions = 0;
    for (size_t t = 0; t < progress.size(); ++t) {
      EXPECT_EQ(progress[t].evicted, want.evicted[t])
          << policy << " step " << t << " (closest ranking call " << want.margin << ")";
      evictions += want.evicted[t].size();
    }
    EXPECT_GT(evictions, 0u) << policy;
    const double d = test::MaxAbsDiff(runs[0].nll, want.nll);
    std::printf("%s %s %s: max |nll - reference| %.3g, closest ranking call %.3g\n",
                b.config().model_type.c_str(), CachePositionsName(positions).c_str(),
                policy.c_str(), d, want.margin);
    EXPECT_LE(d, tol) << policy;
    EXPECT_EQ(runs[0].max_cache_tokens, want.max_cache_tokens) << policy;
    const testing::RefPolicy p = testing::RefPolicy::Parse(policy);
    if (p.ranked()) {
      const std::string sinks =
          "sinks:" + std::to_string(p.keep) + "+" + std::to_string(p.recent);
      EXPECT_NE(want.evicted, testing::ReferenceEvaluation(b, ids, sinks, positions).evicted)
          << policy << " evicts what " << sinks << " does";
    }
  }
}

TEST(EvictionEvalTest, AttentionRankedPoliciesEqualTheReferenceOriginalPositions) {
  std::unique_ptr<ModelBundle> stories = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(stories, nullptr);
  ExpectEqualsReference(*stories, Ids(48, stories->config().vocab_size),
                        {"detected:3+6", "heavy:3+6", "sinks:3+6"}, CachePositions::kOriginal,
                        kTrainedTol);
  std::unique_ptr<ModelBundle> gpt2 = Load(testing::TinyModelDir());
  ASSERT_NE(gpt2, nullptr);
  ExpectEqualsReference(*gpt2, Ids(40, gpt2->config().vocab_size),
                        {"detected:4+5", "heavy:4+5", "window:9"}, CachePositions::kOriginal, kTol);
}

// The first layer of the trained stories260K with 16 positions: 48 tokens
// under cache positions, past the model's positions.
TEST(EvictionEvalTest, AttentionRankedPoliciesEqualTheReferenceCachePositionsOneLayer) {
  model::testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteOneLayerCopy(FixtureDir("llama-stories260K"), dir, 16));
  std::unique_ptr<ModelBundle> b = Load(dir.str());
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->config().num_layers, 1);
  ASSERT_EQ(b->config().max_positions, 16);
  ExpectEqualsReference(*b, Ids(48, b->config().vocab_size),
                        {"detected:2+5", "heavy:2+5", "sinks:2+5"}, CachePositions::kCache,
                        kTrainedTol);
}

// A one-layer rotary model: its keys and values depend only on the token and
// its position, so with cache positions step t equals a full pass over the
// kept tokens followed by x_t, at positions 0 .. |C_t|.
TEST(EvictionEvalTest, CachePositionsEqualFullPassOverKeptTokensOneLayer) {
  model::testing::ScratchDir dir;
  dir.CopyFrom(FixtureDir("llama"));
  std::string config;
  {
    std::ifstream in(FixtureDir("llama") + "/config.json");
    config.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string from = "\"num_hidden_layers\": 3", to = "\"num_hidden_layers\": 1";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), to);
  dir.Write("config.json", config);
  std::vector<TensorToWrite> kept;
  for (auto& [name, tensor] : model::testing::ReadAllTensors(FixtureDir("llama") + "/model.safetensors")) {
    if (name.find("layers.1.") == std::string::npos && name.find("layers.2.") == std::string::npos) {
      kept.push_back(tensor);
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir.str() + "/model.safetensors", kept).ok());
  std::unique_ptr<ModelBundle> b = Load(dir.str());
  ASSERT_NE(b, nullptr);
  const int64_t n = 30, vocab = b->config().vocab_size, sinks = 2, recent = 5;
  const std::vector<int64_t> ids = Ids(n, vocab);
  const std::vector<EvictionRunResult> runs =
      Evaluate(*b, ids, {"sinks:2+5"}, CachePositions::kCache);
  ASSERT_EQ(runs.size(), 1u);
  std::vector<double> want;
  for (int64_t t = 0; t + 1 < n; ++t) {
    std::vector<int64_t> seq;
    for (int64_t j = 0; j < t; ++j) {
      if (j < sinks || j >= t - recent) seq.push_back(ids[j]);
    }
    seq.push_back(ids[t]);
    const model::FullRecorder full = testing::FullPass(*b, seq);
    want.push_back(NllOfRow(full.logits().data() + (seq.size() - 1) * vocab, vocab, ids[t + 1]));
  }
  const double d = test::MaxAbsDiff(runs[0].nll, want);
  std::printf("one-layer llama sinks:2+5 cache: max |nll - pass over kept tokens| %.3g\n", d);
  EXPECT_LE(d, 1e-5);
  // Original positions give different numbers here (the shift matters).
  const std::vector<EvictionRunResult> original =
      Evaluate(*b, ids, {"sinks:2+5"}, CachePositions::kOriginal);
  EXPECT_GT(test::MaxAbsDiff(original[0].nll, want), 1e-4);
}

TEST(EvictionEvalTest, ReportsCacheBytesOfKeysAndValues) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(b, nullptr);
  const model::ModelConfig& c = b->config();
  const std::vector<EvictionRunResult> runs =
      Evaluate(*b, Ids(50, c.vocab_size), {"full", "sinks:4+12"}, CachePositions::kCache);
  ASSERT_EQ(runs.size(), 2u);
  const int64_t per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4;
  EXPECT_EQ(runs[0].max_cache_tokens, 49);
  EXPECT_EQ(runs[0].max_cache_bytes, 49 * per_token);
  EXPECT_EQ(runs[1].max_cache_tokens, 17);
  EXPECT_EQ(runs[1].max_cache_bytes, 17 * per_token);
  double mean = 0;
  for (double x : runs[1].nll) mean += x;
  EXPECT_LE(test::AbsDiff(runs[1].perplexity, std::exp(mean / runs[1].nll.size())), 1e-9);
}

TEST(EvictionEvalTest, RejectsBadInputWithTheLimit) {
  std::unique_ptr<ModelBundle> gpt2 = Load(testing::TinyModelDir());
  std::unique_ptr<ModelBundle> llama = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(llama, nullptr);
  auto error = [](const ModelBundle& b, const std::vector<int64_t>& ids,
                  const std::vector<std::string>& policies, CachePositions positions) {
    EvictionEvalSettings s;
    for (const std::string& p : policies) s.policies.push_back(Policy(p));
    s.positions = positions;
    const absl::Status st = ValidateEvictionEval(b, ids, s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  };
  EXPECT_NE(error(*gpt2, Ids(10, 100), {"window:4"}, CachePositions::kCache)
                .find("learned absolute positions"),
            std::string::npos);
  EXPECT_NE(error(*gpt2, Ids(600, 100), {"window:4"}, CachePositions::kOriginal).find("at most 513"),
            std::string::npos);
  EXPECT_NE(error(*llama, Ids(600, 100), {"full"}, CachePositions::kCache).find("at most 513"),
            std::string::npos);
  EXPECT_NE(error(*llama, Ids(10, 100), {"sinks:4+600"}, CachePositions::kCache).find("605"),
            std::string::npos);
  EXPECT_NE(error(*llama, {1}, {"full"}, CachePositions::kCache).find("at least 2"),
            std::string::npos);
  EXPECT_NE(error(*llama, {1, 512}, {"full"}, CachePositions::kCache).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(error(*llama, Ids(10, 100), {}, CachePositions::kCache).find("between 1 and 16"),
            std::string::npos);
  // A bounded policy with cache positions reads past the model's positions.
  const std::vector<EvictionRunResult> long_run =
      Evaluate(*llama, Ids(600, 512), {"sinks:4+60"}, CachePositions::kCache);
  ASSERT_EQ(long_run.size(), 1u);
  EXPECT_EQ(long_run[0].steps, 599);
  EXPECT_TRUE(std::isfinite(long_run[0].perplexity));
}

TEST(EvictionEvalTest, StopsWhenAsked) {
  std::unique_ptr<ModelBundle> b = Load(FixtureDir("llama-stories260K"));
  ASSERT_NE(b, nullptr);
  EvictionEvalSettings s;
  s.policies = {Policy("window:8")};
  int64_t steps = 0;
  s.should_stop = [&] { return steps >= 5; };
  absl::StatusOr<std::vector<EvictionRunResult>> r = EvaluateEviction(
      *b, Ids(40, 512), s, [&](const EvictionProgress& p) { steps = p.steps_done; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(steps, 5);
}

}  // namespace
}  // namespace attnscope::engine
