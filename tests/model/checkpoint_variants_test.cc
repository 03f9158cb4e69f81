// Loading paths checked on copies of the family fixtures written at test time
// with the project's own safetensors writer: BF16 and F16 checkpoints (against
// F32 checkpoints holding the same rounded values), sharded checkpoints,
// names without the base-model prefix, and legacy buffers that are not
// parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "service/core/dtype.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"
#include "tests/model/test_models.h"

namespace attnscope::model {
namespace {

using ::testing::HasSubstr;
using testing::FixtureDir;
using testing::ScratchDir;
using Tensors = std::map<std::string, TensorToWrite>;

constexpr ObserverNeeds kEverything{true, false, true, true};

std::vector<float> Floats(const TensorToWrite& t) {
  TensorRef ref;
  ref.name = t.name;
  ref.dtype = t.dtype;
  ref.shape = t.shape;
  ref.data = reinterpret_cast<const uint8_t*>(t.data.data());
  ref.nbytes = t.data.size();
  return *ToFloat32(ref);
}

uint16_t ToBFloat16(float f) {  // round to nearest even (no NaNs in fixtures)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

// `t` stored as `dtype` (F16/BF16), and the same rounded values as F32.
std::pair<TensorToWrite, TensorToWrite> Rounded(const TensorToWrite& t, DType dtype) {
  const std::vector<float> values = Floats(t);
  TensorToWrite low{t.name, dtype, t.shape, std::string(values.size() * 2, '\0')};
  std::vector<float> widened(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = dtype == DType::kF16 ? FloatToHalf(values[i]) : ToBFloat16(values[i]);
    std::memcpy(&low.data[2 * i], &bits, 2);
    widened[i] = dtype == DType::kF16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
  }
  return {low, MakeF32Tensor(t.name, t.shape, widened)};
}

class CheckpointVariantsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tensors_ = testing::ReadAllTensors(FixtureDir(GetParam()) + "/model.safetensors");
    ref_ = testing::LoadReference(GetParam());
  }
  // A directory with the fixture's config.json and `tensors` in `shards` files.
  void Write(const ScratchDir& dir, const Tensors& tensors, int shards = 1) const {
    dir.Write("config.json", ReadFile(FixtureDir(GetParam()) + "/config.json"));
    std::vector<std::vector<TensorToWrite>> files(shards);
    int i = 0;
    std::string map;
    for (const auto& [name, t] : tensors) {
      files[i % shards].push_back(t);
      const std::string file = ShardName(i % shards, shards);
      map += (map.empty() ? "" : ",") + ("\"" + name + "\":\"" + file + "\"");
      ++i;
    }
    for (int s = 0; s < shards; ++s) {
      ASSERT_TRUE(WriteSafetensors(dir.str() + "/" + ShardName(s, shards), files[s]).ok());
    }
    if (shards > 1) {
      dir.Write("model.safetensors.index.json",
                "{\"metadata\":{},\"weight_map\":{" + map + "}}");
    }
  }
  static std::string ShardName(int s, int shards) {
    if (shards == 1) return "model.safetensors";
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    return name;
  }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  FullRecorder Run(const std::string& dir) const {
    auto m = LoadLanguageModel(dir);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return FullRecorder(ref_.attention_shape[0], ref_.attention_shape[1], kEverything);
    return Run(**m, Precision::kFloat32);
  }
  FullRecorder Run(const LanguageModel& model, Precision precision) const {
    FullRecorder rec(ref_.attention_shape[0], ref_.attention_shape[1], kEverything);
    ForwardOptions options;
    options.precision = precision;
    const absl::Status s = model.Forward({ref_.input_ids}, options, {&rec});
    EXPECT_TRUE(s.ok()) << s;
    return rec;
  }
  static void ExpectIdentical(const FullRecorder& a, const FullRecorder& b) {
    EXPECT_FALSE(a.logits().empty());
    EXPECT_EQ(a.attentions(), b.attentions());
    EXPECT_EQ(a.hidden_states(), b.hidden_states());
    EXPECT_EQ(a.logits(), b.logits());
  }
  Tensors tensors_;
  testing::Reference ref_;
};

TEST_P(CheckpointVariantsTest, HalfPrecisionCheckpointsComputeInFloat32) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    Tensors low, widened;
    for (const auto& [name, t] : tensors_) {
      auto [l, w] = Rounded(t, dtype);
      low[name] = l;
      widened[name] = w;
    }
    ScratchDir low_dir, wide_dir;
    Write(low_dir, low);
    Write(wide_dir, widened);
    const FullRecorder a = Run(low_dir.str()), b = Run(wide_dir.str());
    ExpectIdentical(a, b);
    // Rounding the weights moves the output, but not far.
    EXPECT_LE(testing::MaxAbsDiff(a.logits(), ref_.logits), 0.5) << DTypeName(dtype);
  }
}

// A BF16 checkpoint is held once, as stored, in either precision: its
// float32 passes widen each matrix just before its product and equal those
// of an F32 checkpoint holding the same values bit for bit; its bfloat16
// passes multiply the stored matrices and equal the F32 checkpoint's
// bfloat16 passes, which need a bfloat16 copy of every matrix.
TEST_P(CheckpointVariantsTest, Bf16CheckpointIsHeldOnceInEveryPrecision) {
  Tensors low, widened;
  for (const auto& [name, t] : tensors_) {
    auto [l, w] = Rounded(t, DType::kBF16);
    low[name] = l;
    widened[name] = w;
  }
  ScratchDir low_dir, wide_dir;
  Write(low_dir, low);
  Write(wide_dir, widened);
  auto bf16 = LoadLanguageModel(low_dir.str());
  auto f32 = LoadLanguageModel(wide_dir.str());
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE(f32.ok()) << f32.status();
  const int64_t held = (*bf16)->weight_bytes(), held_f32 = (*f32)->weight_bytes();
  ASSERT_GT(held, 0);
  // Two bytes a weight against four (norms and biases stay float32; the
  // packed layouts pad rows alike in both).
  EXPECT_LE(held, held_f32 * 6 / 10) << "BF16 " << held << " bytes, F32 " << held_f32;

  ExpectIdentical(Run(**bf16, Precision::kBfloat16), Run(**f32, Precision::kBfloat16));
  ExpectIdentical(Run(**bf16, Precision::kFloat32), Run(**f32, Precision::kFloat32));
  EXPECT_EQ((*bf16)->weight_bytes(), held) << "a pass made a second copy of the BF16 weights";
  // auto: the checkpoint's own dtype.
  EXPECT_EQ((*bf16)->stored_precision(), Precision::kBfloat16);
  EXPECT_EQ((*f32)->stored_precision(), Precision::kFloat32);
  ExpectIdentical(Run(**bf16, Precision::kAuto), Run(**bf16, Precision::kBfloat16));
  ExpectIdentical(Run(**f32, Precision::kAuto), Run(**f32, Precision::kFloat32));
  // The F32 checkpoint's bfloat16 pass made its bfloat16 copies.
  EXPECT_GT((*f32)->weight_bytes(), held_f32);
}

TEST_P(CheckpointVariantsTest, ShardedCheckpointEqualsOneFile) {
  ScratchDir one, sharded;
  Write(one, tensors_);
  Write(sharded, tensors_, 3);
  ExpectIdentical(Run(one.str()), Run(sharded.str()));
  const FullRecorder rec = Run(sharded.str());
  EXPECT_LE(testing::MaxAbsDiff(rec.logits(), ref_.logits), 1e-4);
}

TEST_P(CheckpointVariantsTest, NamesWithoutThePrefixAndLegacyBuffersLoad) {
  Tensors bare;
  for (const auto& [name, t] : tensors_) {
    std::string stripped = name;
    for (const char* prefix : {"model.decoder.", "model.", "transformer.", "gpt_neox."}) {
      if (stripped.rfind(prefix, 0) == 0) {
        stripped = stripped.substr(std::strlen(prefix));
        break;
      }
    }
    TensorToWrite copy = t;
    copy.name = stripped;
    bare[stripped] = copy;
  }
  // Buffers old saves carry; never parameters.
  bare["layers.0.self_attn.rotary_emb.inv_freq"] = MakeF32Tensor(
      "layers.0.self_attn.rotary_emb.inv_freq", {4}, std::vector<float>{9, 9, 9, 9});
  ScratchDir with, without;
  Write(with, tensors_);
  Write(without, bare);
  ExpectIdentical(Run(with.str()), Run(without.str()));
}

INSTANTIATE_TEST_SUITE_P(Families, CheckpointVariantsTest,
                         ::testing::Values("llama", "qwen2", "gemma2", "phi3", "gpt_neox", "opt"));

TEST(CheckpointErrorsTest, MissingTensorOfAFamilyIsNamedWithTheFile) {
  ScratchDir dir;
  dir.CopyFrom(FixtureDir("qwen2"));
  Tensors t = testing::ReadAllTensors(dir.str() + "/model.safetensors");
  t.erase("model.layers.1.self_attn.k_proj.bias");
  std::vector<TensorToWrite> list;
  for (auto& [name, tensor] : t) list.push_back(tensor);
  ASSERT_TRUE(WriteSafetensors(dir.str() + "/model.safetensors", list).ok());
  auto m = LoadLanguageModel(dir.str());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("has no tensor 'model.layers.1.self_attn.k_proj.bias'"));
  EXPECT_THAT(m.status().message(), HasSubstr(dir.str()));
}

TEST(CheckpointErrorsTest, UntiedHeadMustBePresent) {
  ScratchDir dir;
  dir.CopyFrom(FixtureDir("llama"));
  Tensors t = testing::ReadAllTensors(dir.str() + "/model.safetensors");
  t.erase("lm_head.weight");
  std::vector<TensorToWrite> list;
  for (auto& [name, tensor] : t) list.push_back(tensor);
  ASSERT_TRUE(WriteSafetensors(dir.str() + "/model.safetensors", list).ok());
  auto m = LoadLanguageModel(dir.str());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("'lm_head.weight'"));
}

TEST(CheckpointErrorsTest, GroupedHeadsDisagreeingWithTheTensorsAreNamed) {
  ScratchDir dir;
  dir.CopyFrom(FixtureDir("llama"));
  std::ifstream in(dir.str() + "/config.json");
  std::string config{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string from = "\"num_key_value_heads\": 2";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"num_key_value_heads\": 4");
  dir.Write("config.json", config);
  auto m = LoadLanguageModel(dir.str());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("'model.layers.0.self_attn.k_proj.weight'"));
  EXPECT_THAT(m.status().message(), HasSubstr("has shape [16,64] but config.json implies [32,64]"));
  EXPECT_THAT(m.status().message(), HasSubstr("kv_heads=4"));
}

}  // namespace
}  // namespace attnscope::model
