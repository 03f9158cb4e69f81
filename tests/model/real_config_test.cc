// The released models' own config.json (seven families, vocabularies of
// 32K to 256K, head_dim 64 to 256) at their real width, heads, head_dim and
// vocabulary, with one layer and random BF16 weights written at test
// time (tests/common/real_checkpoint.h): each loads with every key it has,
// holds its weights once at two bytes each, and runs a short prompt in
// float32, bf16 and auto with finite outputs of the right shapes and
// attention rows that are causal distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "nlohmann/json.hpp"
#include "service/model/language_model.h"
#include "service/model/recorder.h"
#include "tests/common/real_checkpoint.h"
#include "tests/model/test_models.h"

namespace attnscope::model {
namespace {

using json = nlohmann::json;

constexpr ObserverNeeds kEverything{true, false, true, true};

int64_t SafetensorsBytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

class RealConfigTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealConfigTest, LoadsHoldsItsBf16WeightsOnceAndRunsInEveryPrecision) {
  const json config = json::parse(attnscope::testing::RealConfigJson(GetParam()));
  testing::ScratchDir dir;
  attnscope::testing::RealCheckpointOptions options;
  options.layers = 1;
  options.shard_bytes = int64_t{1} << 30;  // large vocabularies take two shards, as released
  const int64_t written = attnscope::testing::WriteRealCheckpoint(GetParam(), dir.str(), options);
  ASSERT_GT(written, 0);
  auto loaded = LoadLanguageModel(dir.str());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LanguageModel& m = **loaded;
  const ModelConfig& c = m.config();
  EXPECT_EQ(c.model_type, config["model_type"].get<std::string>());
  EXPECT_EQ(c.hidden_size, config["hidden_size"].get<int64_t>());
  EXPECT_EQ(c.vocab_size, config["vocab_size"].get<int64_t>());
  EXPECT_EQ(c.num_heads, config["num_attention_heads"].get<int64_t>());
  // GPT-NeoX and OPT have no key/value heads of their own.
  EXPECT_EQ(c.num_kv_heads,
            config.value("num_key_value_heads", config["num_attention_heads"].get<int64_t>()));
  EXPECT_EQ(c.num_layers, 1);
  if (config.contains("head_dim")) {
    EXPECT_EQ(c.head_dim, config["head_dim"].get<int64_t>());
  }
  EXPECT_EQ(m.stored_precision(), Precision::kBfloat16);

  // Held once: the packed bfloat16 weights are the file's size (norms, in
  // float32, and rows padded to oneDNN's blocks add well under 1%).
  const int64_t file = SafetensorsBytes(dir.str()), held = m.weight_bytes();
  EXPECT_GT(held, file * 95 / 100) << held << " bytes held for a " << file << "-byte checkpoint";
  EXPECT_LE(held, file * 101 / 100) << held << " bytes held for a " << file << "-byte checkpoint";

  const std::vector<int64_t> ids = {1, 17, 300, 4000, 9, 17, 2};
  const int64_t t = static_cast<int64_t>(ids.size());
  for (Precision precision : {Precision::kFloat32, Precision::kBfloat16, Precision::kAuto}) {
    SCOPED_TRACE(PrecisionName(precision));
    FullRecorder rec(1, c.num_heads, kEverything);
    ForwardOptions forward;
    forward.precision = precision;
    const absl::Status s = m.Forward({ids}, forward, {&rec});
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(rec.logits().size(), static_cast<size_t>(t * c.vocab_size));
    ASSERT_EQ(rec.attentions().size(), static_cast<size_t>(c.num_heads * t * t));
    ASSERT_EQ(rec.hidden_states().size(), static_cast<size_t>(2 * t * c.hidden_size));
    size_t bad = 0;
    for (float v : rec.logits()) bad += !std::isfinite(v);
    for (float v : rec.hidden_states()) bad += !std::isfinite(v);
    EXPECT_EQ(bad, 0u) << "non-finite logits or hidden states";
    for (int64_t h = 0; h < c.num_heads; ++h) {
      for (int64_t q = 0; q < t; ++q) {
        const float* row = rec.attentions().data() + (h * t + q) * t;
        double sum = 0;
        for (int64_t k = 0; k < t; ++k) {
          if (k > q) {
            ASSERT_EQ(row[k], 0.0f) << "head " << h << " query " << q << " sees key " << k;
          }
          ASSERT_TRUE(row[k] >= 0.0f) << "head " << h << " query " << q;
          sum += row[k];
        }
        ASSERT_TRUE(std::fabs(sum - 1.0) <= 1e-4) << "head " << h << " query " << q << ": " << sum;
      }
    }
    EXPECT_EQ(m.weight_bytes(), held) << "the pass made a copy of the weights";
  }
}

INSTANTIATE_TEST_SUITE_P(Released, RealConfigTest,
                         ::testing::Values("Qwen2.5-0.5B", "Qwen2.5-7B", "Qwen3-0.6B", "Qwen3-8B",
                                           "Llama-3.2-1B", "Llama-3.1-8B", "Mistral-7B-v0.3",
                                           "Gemma-2-2B", "Phi-3-mini-4k", "Pythia-1B",
                                           "OPT-1.3B"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char ch : info.param) name += std::isalnum(ch) ? ch : '_';
                           return name;
                         });

}  // namespace
}  // namespace attnscope::model
