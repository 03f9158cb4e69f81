// Long prompts: every statistic computed block-wise (explicit and automatic
// query blocks) equals the whole-layer computation within 1e-5, on the
// Hugging Face Llama fixture at its full 128 positions and on a Llama-shaped
// random checkpoint (head_dim 64, GQA 8/2) at T = 1536, where the automatic
// choice splits every layer into blocks; prompts are accepted up to the
// model's positions and refused, naming both numbers, beyond.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/stats_json.h"
#include "service/core/parallel.h"
#include "service/core/safetensors.h"
#include "service/model/attention_blocks.h"
#include "service/model/language_model.h"
#include "tests/analysis/analysis_test_util.h"
#include "tests/common/json_compare.h"

namespace attnscope::analysis {
namespace {

using ::testing::HasSubstr;

constexpr double kTol = 1e-5;

// A random float32 tensor (normal, `stddev`; or all `constant`).
TensorToWrite Random(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng,
                     float stddev, float constant = 0.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n), constant);
  std::normal_distribution<float> normal(0.0f, stddev);
  if (stddev > 0) {
    for (float& v : values) v = normal(rng);
  }
  std::string data(values.size() * sizeof(float), '\0');
  std::memcpy(data.data(), values.data(), data.size());
  return TensorToWrite{name, DType::kF32, std::move(shape), std::move(data)};
}

// A Llama-shaped checkpoint with random weights: 2 layers, 8 query heads
// sharing 2 key/value heads of 64 dims (width 512), SiLU MLP 256, vocab 96,
// `positions` positions. Weights of std 0.08 give peaked, varied heads.
class RandomLlama {
 public:
  explicit RandomLlama(int64_t positions)
      : dir_(std::filesystem::temp_directory_path() /
             ("attnscope-long-prompt-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    std::mt19937 rng(2024);
    const int64_t d = 512, inner = 256, kv = 2 * 64;
    std::vector<TensorToWrite> t;
    t.push_back(Random("model.embed_tokens.weight", {kVocab, d}, rng, 1.0f));
    for (int64_t i = 0; i < 2; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      t.push_back(Random(p + "input_layernorm.weight", {d}, rng, 0, 1.0f));
      t.push_back(Random(p + "post_attention_layernorm.weight", {d}, rng, 0, 1.0f));
      t.push_back(Random(p + "self_attn.q_proj.weight", {d, d}, rng, 0.08f));
      t.push_back(Random(p + "self_attn.k_proj.weight", {kv, d}, rng, 0.08f));
      t.push_back(Random(p + "self_attn.v_proj.weight", {kv, d}, rng, 0.08f));
      t.push_back(Random(p + "self_attn.o_proj.weight", {d, d}, rng, 0.04f));
      t.push_back(Random(p + "mlp.gate_proj.weight", {inner, d}, rng, 0.04f));
      t.push_back(Random(p + "mlp.up_proj.weight", {inner, d}, rng, 0.04f));
      t.push_back(Random(p + "mlp.down_proj.weight", {d, inner}, rng, 0.04f));
    }
    t.push_back(Random("model.norm.weight", {d}, rng, 0, 1.0f));
    t.push_back(Random("lm_head.weight", {kVocab, d}, rng, 0.05f));
    EXPECT_TRUE(WriteSafetensors((dir_ / "model.safetensors").string(), t).ok());
    nlohmann::json config = {{"model_type", "llama"},      {"num_hidden_layers", 2},
                             {"num_attention_heads", 8},   {"num_key_value_heads", 2},
                             {"hidden_size", d},           {"intermediate_size", inner},
                             {"vocab_size", kVocab},       {"max_position_embeddings", positions},
                             {"rope_theta", 500000.0},     {"rms_norm_eps", 1e-5},
                             {"tie_word_embeddings", false}, {"torch_dtype", "float32"}};
    std::ofstream(dir_ / "config.json") << config.dump(2);
  }
  ~RandomLlama() { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  static constexpr int64_t kVocab = 96;

 private:
  std::filesystem::path dir_;
};

std::vector<int64_t> RandomIds(int64_t n, int64_t vocab) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}

// Every statistic of `ids` (value norms, surprisal and top predictions
// included), as stats JSON, with `block` query rows per attention block.
absl::StatusOr<nlohmann::json> StatsJson(const model::LanguageModel& lm,
                                         const std::vector<int64_t>& ids, int64_t block,
                                         bool head_by_head = true) {
  AnalysisOptions options;
  options.want_value_norms = true;
  options.input_ids = ids;
  options.heads_as_computed = head_by_head;
  PromptAnalyzer analyzer(options);
  model::ForwardOptions forward;
  forward.query_block_size = block;
  if (absl::Status s = lm.Forward({ids}, forward, {&analyzer}); !s.ok()) return s;
  absl::StatusOr<PromptStats> stats = analyzer.Finish();
  if (!stats.ok()) return stats.status();
  return StatsToJson(*stats);
}

// Block-wise (each of `blocks`) against whole layers (block = T).
void ExpectBlocksMatchWholeLayers(const model::LanguageModel& lm, const std::vector<int64_t>& ids,
                                  const std::vector<int64_t>& blocks) {
  const int64_t t = static_cast<int64_t>(ids.size());
  absl::StatusOr<nlohmann::json> whole = StatsJson(lm, ids, t);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int64_t block : blocks) {
    absl::StatusOr<nlohmann::json> blocked = StatsJson(lm, ids, block);
    ASSERT_TRUE(blocked.ok()) << blocked.status();
    std::string mismatch;
    const double diff = test::MaxJsonDiff(*blocked, *whole, &mismatch);
    EXPECT_TRUE(diff <= kTol) << "block " << block << ": max |diff| " << diff << " " << mismatch;
  }
}

TEST(LongPromptTest, AutomaticBlocksKeepALayerUnderTheBudget) {
  // 8 heads x 1536 keys x 4 bytes = 48 KiB a row: 170 rows fit 8 MiB,
  // rounded down to 160, at most 128.
  EXPECT_EQ(model::QueryBlockRows(0, 8, 1536, 1536), 128);
  EXPECT_EQ(model::QueryBlockRows(0, 8, 1536, 1536, int64_t{6} << 20), 128);  // 6 MiB: 128
  EXPECT_EQ(model::QueryBlockRows(0, 8, 1536, 1536, int64_t{5} << 20), 96);   // 5 MiB: 106
  EXPECT_EQ(model::QueryBlockRows(0, 12, 1024, 1024), 128);  // GPT-2 small at T = 1024
  EXPECT_EQ(model::QueryBlockRows(0, 12, 512, 512), 128);    // and at T = 512 (341 fit)
  EXPECT_EQ(model::QueryBlockRows(0, 12, 128, 128), 128);    // and at T = 128: one block
  EXPECT_EQ(model::QueryBlockRows(0, 8, 512, 512), 128);     // 8 MiB would be the whole layer
  EXPECT_EQ(model::QueryBlockRows(0, 8, 100, 100), 100);     // a short prompt: one block
  EXPECT_EQ(model::QueryBlockRows(0, 8, 4096, 4096), 64);    // 128 KiB a row: 64 in 8 MiB
  // 512 KiB a row: 16 rows fit 8 MiB, but 64 fit 4 x 8 MiB.
  EXPECT_EQ(model::QueryBlockRows(0, 8, 16384, 16384), 64);
  EXPECT_EQ(model::QueryBlockRows(0, 8, 16384, 16384, int64_t{32} << 20), 64);
  EXPECT_EQ(model::QueryBlockRows(0, 32, 16384, 16384), 16);  // 2 MiB a row: 16 in 32 MiB
  EXPECT_EQ(model::QueryBlockRows(0, 64, 16384, 16384), 16);  // never below 16 rows
  EXPECT_EQ(model::QueryBlockRows(7, 8, 16384, 16384), 7);
  EXPECT_EQ(model::QueryBlockRows(5000, 8, 100, 100), 100);
  EXPECT_EQ(model::QueryBlockRows(0, 8, 10, 1 << 30), 10);  // one decoding step of 10 rows
}

TEST(LongPromptTest, LlamaFixtureBlocksEqualWholeLayersAtItsPositions) {
  auto lm = model::LoadLanguageModel(testing_util::DataPath("models/llama"));
  ASSERT_TRUE(lm.ok()) << lm.status();
  const int64_t positions = (*lm)->config().max_positions;
  ASSERT_EQ(positions, 128);
  const std::vector<int64_t> ids = RandomIds(positions, (*lm)->config().vocab_size);
  ExpectBlocksMatchWholeLayers(**lm, ids, {0, 1, 7, 16, 100});
}

TEST(LongPromptTest, RandomLlamaBlocksEqualWholeLayersAtT1536) {
  RandomLlama checkpoint(1536);
  auto lm = model::LoadLanguageModel(checkpoint.dir());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const std::vector<int64_t> ids = RandomIds(1536, RandomLlama::kVocab);
  // 0: automatic (672 rows, the last block 192); 500: blocks that straddle
  // the automatic ones.
  ExpectBlocksMatchWholeLayers(**lm, ids, {0, 500});
  // The statistics are not degenerate: heads differ and rows are not uniform.
  absl::StatusOr<nlohmann::json> stats = StatsJson(**lm, ids, 0);
  ASSERT_TRUE(stats.ok());
  const auto& entropy = (*stats)["attention_entropy"];
  EXPECT_GT(std::abs(entropy[0][0].get<double>() - entropy[1][3].get<double>()), 1e-3);
  EXPECT_LT(entropy[0][0].get<double>(), 0.95 * std::log(1536.0 / 2));
}

// Four std::threads, one per chunk: the statistics' loops run truly
// concurrently whatever libtorch's thread count.
void FourThreads(int64_t n, int64_t grain, const core::ChunkFn& fn) {
  const int64_t chunks = std::min<int64_t>(4, (n + grain - 1) / grain);
  const int64_t step = (n + chunks - 1) / chunks;
  std::vector<std::thread> threads;
  for (int64_t b = 0; b < n; b += step) threads.emplace_back(fn, b, std::min(n, b + step));
  for (std::thread& t : threads) t.join();
}

// The statistics split their heads and logit rows among threads
// (core::ParallelFor); the numbers do not depend on the split: serial, the
// model's own pool and four threads give the same JSON, bit for bit.
TEST(LongPromptTest, StatisticsOnThreadsEqualOneThreadExactly) {
  RandomLlama checkpoint(512);
  auto lm = model::LoadLanguageModel(checkpoint.dir());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const core::ParallelForImpl pool = core::CurrentParallelForImpl();
  ASSERT_NE(pool, nullptr) << "loading a model installs libtorch's pool";
  const std::vector<int64_t> ids = RandomIds(512, RandomLlama::kVocab);
  for (int64_t block : {int64_t{0}, int64_t{48}}) {
    core::SetParallelForImpl(nullptr);
    absl::StatusOr<nlohmann::json> serial = StatsJson(**lm, ids, block);
    core::SetParallelForImpl(pool);
    absl::StatusOr<nlohmann::json> pooled = StatsJson(**lm, ids, block);
    core::SetParallelForImpl(FourThreads);
    absl::StatusOr<nlohmann::json> four = StatsJson(**lm, ids, block);
    core::SetParallelForImpl(pool);
    ASSERT_TRUE(serial.ok() && pooled.ok() && four.ok());
    EXPECT_TRUE(*pooled == *serial) << "block " << block;
    EXPECT_TRUE(*four == *serial) << "block " << block;
    std::string mismatch;
    const double diff = test::MaxJsonDiff(*four, *serial, &mismatch);
    EXPECT_TRUE(diff == 0.0) << "block " << block << ": max |diff| " << diff << " " << mismatch;
  }
}

// The analyzer takes each head inside the attention kernel's task, right
// after the head is computed, on whichever of libtorch's threads computed
// it (Needs().attention_by_head); given the same blocks whole instead, it
// reports the same numbers, bit for bit, whatever the thread count. (The
// forward pass's own numbers may depend on the thread count, so each count
// is compared with itself.)
TEST(LongPromptTest, HeadsTakenInTheKernelEqualWholeBlocksExactly) {
  RandomLlama checkpoint(512);
  auto lm = model::LoadLanguageModel(checkpoint.dir());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const std::vector<int64_t> ids = RandomIds(512, RandomLlama::kVocab);
  const int threads = model::ComputeThreads();
  for (int n : {1, 3, threads}) {
    model::SetComputeThreads(n);
    for (int64_t block : {int64_t{0}, int64_t{48}, int64_t{512}}) {
      absl::StatusOr<nlohmann::json> by_head = StatsJson(**lm, ids, block, true);
      absl::StatusOr<nlohmann::json> whole = StatsJson(**lm, ids, block, false);
      ASSERT_TRUE(by_head.ok()) << by_head.status();
      ASSERT_TRUE(whole.ok()) << whole.status();
      std::string mismatch;
      const double diff = test::MaxJsonDiff(*by_head, *whole, &mismatch);
      EXPECT_TRUE(diff == 0.0) << n << " threads, block " << block << ": max |diff| " << diff
                               << " " << mismatch;
      EXPECT_TRUE(*by_head == *whole) << n << " threads, block " << block;
    }
  }
  model::SetComputeThreads(threads);
}

// Hands every event to a PromptAnalyzer and counts the blocks that carry
// their rows' entropies (from the attention kernel's softmax); with `strip`
// it asks for none and hands the blocks on without them: the analyzer then
// takes them from the probabilities, a log per entry.
class Relay : public model::ForwardObserver {
 public:
  Relay(PromptAnalyzer* inner, bool strip) : inner_(inner), strip_(strip) {}
  model::ObserverNeeds Needs() const override {
    model::ObserverNeeds needs = inner_->Needs();
    if (strip_) needs.row_entropy = false;
    return needs;
  }
  void OnBegin(int sequence, int64_t t) override { inner_->OnBegin(sequence, t); }
  void OnHiddenState(int sequence, int state, const float* x, int64_t t, int64_t w) override {
    inner_->OnHiddenState(sequence, state, x, t, w);
  }
  void OnAttention(const model::AttentionBlock& block) override {
    inner_->OnAttention(Stripped(block));
  }
  void OnAttentionStart(const model::AttentionBlock& block) override {
    inner_->OnAttentionStart(Stripped(block));
  }
  void OnAttentionHead(const model::AttentionBlock& block, int64_t head) override {
    inner_->OnAttentionHead(Stripped(block), head);
  }
  void OnLogits(int sequence, const float* z, int64_t t, int64_t v) override {
    inner_->OnLogits(sequence, z, t, v);
  }
  void OnLogitsBlock(int sequence, int64_t begin, const float* z, int64_t rows, int64_t t,
                     int64_t v) override {
    inner_->OnLogitsBlock(sequence, begin, z, rows, t, v);
  }
  int blocks_with_entropy = 0;

 private:
  model::AttentionBlock Stripped(const model::AttentionBlock& block) {
    if (block.row_entropy != nullptr) ++blocks_with_entropy;
    model::AttentionBlock copy = block;
    if (strip_) copy.row_entropy = nullptr;
    return copy;
  }
  PromptAnalyzer* inner_;
  bool strip_;
};

// The analyzer asks the kernel's softmax for each row's entropy (log Z -
// sum e (s - m) / Z) instead of taking a log of every probability: the
// per-head mean entropies agree with those computed from the probabilities
// within 1e-7 (3e-9 measured at T = 1536), and every other statistic is the
// same, bit for bit.
TEST(LongPromptTest, EntropiesFromTheSoftmaxEqualEntropiesFromTheProbabilities) {
  RandomLlama checkpoint(1536);
  auto lm = model::LoadLanguageModel(checkpoint.dir());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const std::vector<int64_t> ids = RandomIds(1536, RandomLlama::kVocab);
  for (bool head_by_head : {true, false}) {
    AnalysisOptions options;
    options.want_value_norms = true;
    options.input_ids = ids;
    options.heads_as_computed = head_by_head;
    EXPECT_TRUE(PromptAnalyzer(options).Needs().row_entropy);
    PromptAnalyzer fused(options), from_probs(options);
    Relay with(&fused, false), without(&from_probs, true);
    model::ForwardOptions forward;
    forward.query_block_size = 500;
    ASSERT_TRUE(lm.value()->Forward({ids}, forward, {&with}).ok());
    ASSERT_TRUE(lm.value()->Forward({ids}, forward, {&without}).ok());
    EXPECT_GT(with.blocks_with_entropy, 0) << "the kernel gave no entropies";
    EXPECT_EQ(without.blocks_with_entropy, 0) << "entropies nobody asked for";
    absl::StatusOr<PromptStats> a = fused.Finish(), b = from_probs.Finish();
    ASSERT_TRUE(a.ok() && b.ok());
    nlohmann::json ja = StatsToJson(*a), jb = StatsToJson(*b);
    std::string mismatch;
    const double diff = test::MaxJsonDiff(ja["attention_entropy"], jb["attention_entropy"],
                                          &mismatch);
    EXPECT_TRUE(diff <= 1e-7) << "max |diff| " << diff << " " << mismatch;
    EXPECT_GT(ja["attention_entropy"][0][0].get<double>(), 1.0);
    ja.erase("attention_entropy");
    jb.erase("attention_entropy");
    EXPECT_TRUE(ja == jb) << "only the entropies may differ";
  }
}

TEST(LongPromptTest, PromptsAreAcceptedUpToThePositionsAndRefusedBeyond) {
  RandomLlama checkpoint(1536);
  auto lm = model::LoadLanguageModel(checkpoint.dir());
  ASSERT_TRUE(lm.ok()) << lm.status();
  absl::StatusOr<nlohmann::json> full = StatsJson(**lm, RandomIds(1536, RandomLlama::kVocab), 0);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full)["received"].size(), 1536u);
  absl::StatusOr<nlohmann::json> over = StatsJson(**lm, RandomIds(1537, RandomLlama::kVocab), 0);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), HasSubstr("1537"));
  EXPECT_THAT(over.status().message(), HasSubstr("1536"));
}

}  // namespace
}  // namespace attnscope::analysis
