// The forward pass against the reference tensors of the fixtures, and its
// options (query blocks, KV cache, ablation, cancellation, input checks).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "service/core/safetensors.h"
#include "service/core/vector_math.h"
#include "service/model/decoder_model.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"
#include "tests/model/test_models.h"

namespace attnscope::model {
namespace {

using ::testing::HasSubstr;

constexpr ObserverNeeds kEverything{true, false, true, true};

std::unique_ptr<LanguageModel> Load(const std::string& dir) {
  auto m = LoadLanguageModel(dir);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

FullRecorder RunModel(const LanguageModel& model, const std::vector<int64_t>& ids,
                 ForwardOptions options = {}) {
  FullRecorder rec(model.config().num_layers, model.config().num_heads, kEverything);
  absl::Status s = model.Forward({ids}, options, {&rec});
  EXPECT_TRUE(s.ok()) << s;
  return rec;
}

class FixtureForwardTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureForwardTest, MatchesReferenceTensors) {
  auto model = Load(testing::FixtureDir(GetParam()));
  ASSERT_NE(model, nullptr);
  const testing::Reference ref = testing::LoadReference(GetParam());
  const FullRecorder rec = RunModel(*model, ref.input_ids);
  const double att = testing::MaxAbsDiff(rec.attentions(), ref.attentions);
  const double hid = testing::MaxAbsDiff(rec.hidden_states(), ref.hidden_states);
  const double log = testing::MaxAbsDiff(rec.logits(), ref.logits);
  std::printf("%s: T=%zu max |diff| attentions %.3g hidden %.3g logits %.3g\n", GetParam(),
              ref.input_ids.size(), att, hid, log);
  EXPECT_LE(att, 1e-5);  // MaxAbsDiff returns NaN as the worst: these fail on NaN
  EXPECT_LE(hid, 1e-4);
  EXPECT_LE(log, 1e-4);
  ASSERT_EQ(ref.attention_shape.size(), 4u);
  EXPECT_EQ(ref.attention_shape[0], model->config().num_layers);
  EXPECT_EQ(ref.attention_shape[1], model->config().num_heads);
}

TEST_P(FixtureForwardTest, QueryBlocksGiveTheSameResult) {
  auto model = Load(testing::FixtureDir(GetParam()));
  ASSERT_NE(model, nullptr);
  const testing::Reference ref = testing::LoadReference(GetParam());
  const FullRecorder full = RunModel(*model, ref.input_ids);
  for (int64_t block : {1, 3, 7, 1000}) {
    ForwardOptions options;
    options.query_block_size = block;
    const FullRecorder blocked = RunModel(*model, ref.input_ids, options);
    const double attentions = testing::MaxAbsDiff(full.attentions(), blocked.attentions());
    const double logits = testing::MaxAbsDiff(full.logits(), blocked.logits());
    std::printf("%s block %ld: attentions %.3g logits %.3g\n", GetParam(),
                static_cast<long>(block), attentions, logits);
    // float32 throughout: BLAS sums in another order for other block shapes,
    // so the modes agree to float32 rounding (measured up to ~5e-6 in
    // attentions, ~4e-5 in the trained stories260K's logits), held to the
    // tolerances the fixtures are held to.
    EXPECT_LE(attentions, 1e-5) << block;
    EXPECT_LE(logits, 1e-4) << block;
  }
}

TEST_P(FixtureForwardTest, KvCacheDecodingMatchesTheFullPass) {
  auto model = Load(testing::FixtureDir(GetParam()));
  ASSERT_NE(model, nullptr);
  const testing::Reference ref = testing::LoadReference(GetParam());
  const FullRecorder full = RunModel(*model, ref.input_ids);
  const int64_t vocab = full.vocab();
  auto cache = model->NewCache();
  ForwardOptions options;
  options.cache = cache.get();
  // A prefix of 5 tokens at once, then one token at a time.
  std::vector<int64_t> prefix(ref.input_ids.begin(), ref.input_ids.begin() + 5);
  FullRecorder step = RunModel(*model, prefix, options);
  std::vector<float> logits = step.logits();
  for (size_t i = 5; i < ref.input_ids.size(); ++i) {
    step = RunModel(*model, {ref.input_ids[i]}, options);
    logits.insert(logits.end(), step.logits().begin(), step.logits().end());
  }
  EXPECT_EQ(cache->length(), static_cast<int64_t>(ref.input_ids.size()));
  ASSERT_EQ(logits.size(), ref.input_ids.size() * vocab);
  EXPECT_LE(testing::MaxAbsDiff(logits, full.logits()), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Gpt2, FixtureForwardTest,
                         ::testing::Values("gpt2-random-hub-layout", "gpt2-random-sharded-fp16"));

// Every family, against Hugging Face transformers' own output.
INSTANTIATE_TEST_SUITE_P(Families, FixtureForwardTest,
                         ::testing::Values("llama", "llama-stories260K", "mistral", "qwen2",
                                           "qwen3", "gemma2", "phi3", "gpt_neox", "opt"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// "The cat sat on the keyboard again." in GPT-2's tokenizer.
const std::vector<int64_t> kCatIds = {464, 3797, 3332, 319, 262, 10586, 757, 13};

TEST(BundledModelTest, AttentionRowsAreCausalDistributions) {
  auto model = Load(testing::BundledModelDir());
  ASSERT_NE(model, nullptr);
  const FullRecorder rec = RunModel(*model, kCatIds);
  const int64_t t = kCatIds.size(), rows = 6 * 6 * t;
  ASSERT_EQ(rec.attentions().size(), static_cast<size_t>(rows * t));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t query = r % t;
    double sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      const float a = rec.attentions()[r * t + j];
      if (j > query) {
        ASSERT_EQ(a, 0.0f) << "row " << r << " key " << j;  // exactly zero
      } else {
        ASSERT_GE(a, 0.0f);
      }
      sum += a;
    }
    ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
  for (float x : rec.logits()) ASSERT_TRUE(std::isfinite(x));
}

TEST(BundledModelTest, PredictsPlausibleEnglish) {
  auto model = Load(testing::BundledModelDir());
  ASSERT_NE(model, nullptr);
  // After "The cat sat on the", a trained model ranks " keyboard" far above
  // the median token; an untrained or mis-loaded one does not.
  const FullRecorder rec = RunModel(*model, kCatIds);
  const float* row = rec.logits().data() + 4 * rec.vocab();
  int64_t above = 0;
  for (int64_t v = 0; v < rec.vocab(); ++v) above += row[v] > row[10586];
  EXPECT_LT(above, 2000) << "' keyboard' ranks " << above;
}

class ForwardInputTest : public ::testing::Test {
 protected:
  void SetUp() override { model_ = Load(testing::FixtureDir("gpt2-random-hub-layout")); }
  absl::Status Forward(const std::vector<std::vector<int64_t>>& batch,
                       ForwardOptions options = {}) {
    FullRecorder rec(3, 4, kEverything);
    return model_->Forward(batch, options, {&rec});
  }
  std::unique_ptr<LanguageModel> model_;
};

TEST_F(ForwardInputTest, PromptLongerThanPositionsNamesBothNumbers) {
  absl::Status s = Forward({std::vector<int64_t>(65, 7)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("65 tokens"));
  EXPECT_THAT(s.message(), HasSubstr("at most 64"));
  EXPECT_TRUE(Forward({std::vector<int64_t>(64, 7)}).ok());
}

TEST_F(ForwardInputTest, EmptyPromptIsRejected) {
  EXPECT_THAT(Forward({{}}).message(), HasSubstr("empty"));
  EXPECT_THAT(Forward({}).message(), HasSubstr("empty"));
}

TEST_F(ForwardInputTest, IdOutsideVocabularyIsRejected) {
  absl::Status s = Forward({{1, 2, 1000}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token id 1000 at position 2"));
  EXPECT_THAT(Forward({{-1}}).message(), HasSubstr("token id -1"));
}

TEST_F(ForwardInputTest, RaggedBatchIsRejected) {
  EXPECT_THAT(Forward({{1, 2, 3}, {1, 2}}).message(), HasSubstr("equal lengths"));
}

TEST_F(ForwardInputTest, AblatedHeadOutsideModelIsRejected) {
  ForwardOptions options;
  options.ablate = {{3, 0}};
  EXPECT_THAT(Forward({{1, 2}}, options).message(), HasSubstr("head 3.0 does not exist"));
}

TEST_F(ForwardInputTest, StopRequestCancelsBetweenLayers) {
  ForwardOptions options;
  int checks = 0;
  options.should_stop = [&checks] { return ++checks == 2; };
  absl::Status s = Forward({{1, 2, 3}}, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("before layer 1"));
}

TEST(AblationTest, ZeroAblationActsAfterTheHeadsAttentionAndChangesWhatFollows) {
  auto model = Load(testing::FixtureDir("gpt2-random-hub-layout"));
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> ids = {5, 17, 300, 42, 9, 999, 0};
  const FullRecorder base = RunModel(*model, ids);
  ForwardOptions options;
  options.ablate = {{1, 2}};
  const FullRecorder ablated = RunModel(*model, ids, options);
  const size_t layer_size = 4 * ids.size() * ids.size();
  const size_t state_size = ids.size() * 48;
  auto slice = [](const std::vector<float>& v, size_t begin, size_t n) {
    return std::vector<float>(v.begin() + begin, v.begin() + begin + n);
  };
  // Layers 0 and 1 attend exactly as before; hidden states 0 and 1 are equal.
  EXPECT_EQ(slice(base.attentions(), 0, 2 * layer_size),
            slice(ablated.attentions(), 0, 2 * layer_size));
  EXPECT_EQ(slice(base.hidden_states(), 0, 2 * state_size),
            slice(ablated.hidden_states(), 0, 2 * state_size));
  // The block output of layer 1 and everything after it change.
  EXPECT_GT(testing::MaxAbsDiff(slice(base.hidden_states(), 2 * state_size, state_size),
                                slice(ablated.hidden_states(), 2 * state_size, state_size)),
            1e-4);
  EXPECT_GT(testing::MaxAbsDiff(base.logits(), ablated.logits()), 1e-4);
}

TEST(AblationTest, MeanAblationOfASingleTokenChangesNothing) {
  // With one sequence of one token, a head's mean output is its output.
  auto model = Load(testing::FixtureDir("gpt2-random-hub-layout"));
  ASSERT_NE(model, nullptr);
  const FullRecorder base = RunModel(*model, {123});
  ForwardOptions options;
  options.ablate = {{0, 1}, {2, 3}};
  options.ablation_mode = AblationMode::kMean;
  const FullRecorder ablated = RunModel(*model, {123}, options);
  EXPECT_LE(testing::MaxAbsDiff(base.logits(), ablated.logits()), 1e-6);
}

// A BF16 tensor of `values` (rounded to nearest even).
TensorToWrite MakeBf16Tensor(std::string name, std::vector<int64_t> shape,
                             const std::vector<float>& values) {
  TensorToWrite t{std::move(name), DType::kBF16, std::move(shape), {}};
  t.data.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = vmath::FloatToBf16(values[i]);
    std::memcpy(&t.data[2 * i], &bits, 2);
  }
  return t;
}

// A one-layer Llama checkpoint (2 query heads, 1 key/value head, untied
// head) with random weights drawn in a fixed order from `seed`: normal
// values times 1 (embedding, head), 0.5 (attention, gate, up) or
// `down_scale` (down); norms of ones. F32 or BF16.
struct OneLayerLlama {
  int64_t width = 8, inner = 16, vocab = 64, positions = 1024;
  float down_scale = 0.02f;
  bool bf16 = false;
  uint32_t seed = 29;
};

void WriteOneLayerLlama(const testing::ScratchDir& dir, const OneLayerLlama& c) {
  dir.Write("config.json",
            R"({"model_type":"llama","architectures":["LlamaForCausalLM"],"hidden_size":)" +
                std::to_string(c.width) + R"(,"intermediate_size":)" + std::to_string(c.inner) +
                R"(,"num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":1,"vocab_size":)" +
                std::to_string(c.vocab) +
                R"(,"rms_norm_eps":1e-5,"rope_theta":10000.0,"max_position_embeddings":)" +
                std::to_string(c.positions) +
                R"(,"hidden_act":"silu","tie_word_embeddings":false,"torch_dtype":")" +
                (c.bf16 ? "bfloat16" : "float32") + R"("})");
  std::mt19937 rng(c.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto make = [&](const std::string& name, std::vector<int64_t> shape,
                        const std::vector<float>& v) {
    return c.bf16 ? MakeBf16Tensor(name, std::move(shape), v)
                  : MakeF32Tensor(name, std::move(shape), v);
  };
  const auto random = [&](const std::string& name, std::vector<int64_t> shape, float scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng) * scale;
    return make(name, std::move(shape), v);
  };
  const auto ones = [&](const std::string& name) {
    return make(name, {c.width}, std::vector<float>(static_cast<size_t>(c.width), 1.0f));
  };
  const int64_t kv_rows = c.width / 2;  // one key/value head of head_dim width / 2
  const std::string l = "model.layers.0.";
  const std::vector<TensorToWrite> tensors = {
      random("model.embed_tokens.weight", {c.vocab, c.width}, 1.0f),
      ones(l + "input_layernorm.weight"),
      random(l + "self_attn.q_proj.weight", {c.width, c.width}, 0.5f),
      random(l + "self_attn.k_proj.weight", {kv_rows, c.width}, 0.5f),
      random(l + "self_attn.v_proj.weight", {kv_rows, c.width}, 0.5f),
      random(l + "self_attn.o_proj.weight", {c.width, c.width}, 0.5f),
      ones(l + "post_attention_layernorm.weight"),
      random(l + "mlp.gate_proj.weight", {c.inner, c.width}, 0.5f),
      random(l + "mlp.up_proj.weight", {c.inner, c.width}, 0.5f),
      random(l + "mlp.down_proj.weight", {c.width, c.inner}, c.down_scale),
      ones("model.norm.weight"),
      random("lm_head.weight", {c.vocab, c.width}, 1.0f)};
  ASSERT_TRUE(WriteSafetensors(dir.str() + "/model.safetensors", tensors).ok());
}

// A Llama-shaped layer whose MLP is wide enough (intermediate 16,384: a
// gate|up activation of 128 KiB a row) that a 700-token pass takes the MLP
// in chunks of rows (Mlp, at most 32 MiB each: 256, 256 and 188 rows),
// against the same tokens in passes of at most 175 through the KV cache,
// each of which takes its MLP whole.
TEST(LongPromptMlpTest, ChunksOfRowsGiveWhatWholePassesGive) {
  constexpr int64_t kVocab = 64, kTokens = 700;
  testing::ScratchDir dir;
  OneLayerLlama shape;
  shape.inner = 16384;
  WriteOneLayerLlama(dir, shape);
  auto model = Load(dir.str());
  ASSERT_NE(model, nullptr);
  std::vector<int64_t> ids(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) ids[static_cast<size_t>(i)] = (i * 37 + 11) % kVocab;

  const FullRecorder whole = RunModel(*model, ids);
  auto cache = model->NewCache();
  ForwardOptions options;
  options.cache = cache.get();
  std::vector<float> logits;
  for (int64_t begin = 0; begin < kTokens; begin += 175) {
    const std::vector<int64_t> part(ids.begin() + begin, ids.begin() + begin + 175);
    const FullRecorder step = RunModel(*model, part, options);
    logits.insert(logits.end(), step.logits().begin(), step.logits().end());
  }
  ASSERT_EQ(logits.size(), static_cast<size_t>(kTokens * kVocab));
  // The MLP changes the logits (not a test of nothing): the down projection's
  // share of the last hidden state is far above the tolerance.
  float largest = 0;
  for (float v : whole.logits()) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 1.0f);
  EXPECT_LE(testing::MaxAbsDiff(logits, whole.logits()), 1e-4);
}

// Takes the logits in blocks of rows, as the analysis does, and keeps them.
class LogitBlocks : public ForwardObserver {
 public:
  ObserverNeeds Needs() const override {
    ObserverNeeds needs;
    needs.logits = true;
    needs.logits_in_blocks = true;
    return needs;
  }
  void OnLogitsBlock(int, int64_t row_begin, const float* z, int64_t rows, int64_t,
                     int64_t vocab) override {
    EXPECT_EQ(row_begin, static_cast<int64_t>(logits.size()) / vocab) << "a block out of order";
    block_rows.push_back(rows);
    logits.insert(logits.end(), z, z + rows * vocab);
  }
  std::vector<int64_t> block_rows;
  std::vector<float> logits;
};

// Logits go to observers that take blocks in even blocks of at most as many
// rows as fit in 128 MiB (at least 128, at most 256), and the blocks are the
// rows of the whole (T, V) logits, to the bit.
TEST(LogitBlocksTest, RowsPerBlockFollowTheVocabularyAndGiveTheWholeLogits) {
  EXPECT_EQ(LogitRowsPerBlock(151936), 220);
  EXPECT_EQ(LogitRowsPerBlock(256000), 131);
  EXPECT_EQ(LogitRowsPerBlock(512000), 128);
  EXPECT_EQ(LogitRowsPerBlock(50257), 256);
  constexpr int64_t kVocab = 200000, kTokens = 300;
  testing::ScratchDir dir;
  OneLayerLlama shape;
  shape.width = 16;
  shape.inner = 32;
  shape.vocab = kVocab;
  shape.positions = 512;
  shape.down_scale = 0.2f;
  shape.bf16 = true;
  shape.seed = 31;
  WriteOneLayerLlama(dir, shape);
  auto model = Load(dir.str());
  ASSERT_NE(model, nullptr);
  std::vector<int64_t> ids(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + 13) % kVocab;

  LogitBlocks blocks;
  ASSERT_TRUE(model->Forward({ids}, {}, {&blocks}).ok());
  // At most 167 rows (V = 200,000), even: two blocks of 150.
  EXPECT_THAT(blocks.block_rows, ::testing::ElementsAre(150, 150));
  const FullRecorder whole = RunModel(*model, ids);
  ASSERT_EQ(blocks.logits.size(), whole.logits().size());
  int differ = 0;
  for (size_t i = 0; i < blocks.logits.size(); ++i) {
    differ += std::memcmp(&blocks.logits[i], &whole.logits()[i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0) << "of " << blocks.logits.size() << " logits";
  float largest = 0;
  for (float v : whole.logits()) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 1.0f);
}

TEST(ThreadsTest, ThreadCountIsSetExplicitly) {
  EXPECT_EQ(SetComputeThreads(2), 2);
  EXPECT_EQ(SetComputeThreads(1), 1);
  EXPECT_GE(SetComputeThreads(0), 1);
}

}  // namespace
}  // namespace attnscope::model
