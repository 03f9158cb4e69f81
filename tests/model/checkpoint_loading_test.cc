// Loading checkpoints: both GPT-2 layouts, and every way a checkpoint can
// disagree with its config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service/model/language_model.h"
#include "tests/model/test_models.h"

namespace attnscope::model {
namespace {

using ::testing::HasSubstr;
using testing::FixtureDir;
using testing::ScratchDir;

// A copy of the hub-layout fixture whose model.safetensors can be edited.
class EditedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.CopyFrom(FixtureDir("gpt2-random-hub-layout"));
    tensors_ = testing::ReadAllTensors(dir_.str() + "/model.safetensors");
  }
  void Remove(const std::string& name) { tensors_.erase(name); }
  void Reshape(const std::string& name, std::vector<int64_t> shape) {
    TensorToWrite& t = tensors_.at(name);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.shape = shape;
    t.data.resize(n * DTypeSize(t.dtype));
  }
  absl::Status Load() {
    std::vector<TensorToWrite> list;
    for (auto& [name, t] : tensors_) list.push_back(t);
    absl::Status written = WriteSafetensors(dir_.str() + "/model.safetensors", list);
    if (!written.ok()) return written;
    return LoadLanguageModel(dir_.str()).status();
  }
  ScratchDir dir_;
  std::map<std::string, TensorToWrite> tensors_;
};

TEST(CheckpointLoadingTest, LoadsHubLayoutWithoutPrefixAndWithMaskBuffers) {
  auto m = LoadLanguageModel(FixtureDir("gpt2-random-hub-layout"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config().num_layers, 3);
}

TEST(CheckpointLoadingTest, LoadsShardedFp16WithPrefixAndTiedHead) {
  auto m = LoadLanguageModel(FixtureDir("gpt2-random-sharded-fp16"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config().hidden_size, 64);
}

TEST_F(EditedCheckpoint, UnchangedCopyLoads) { EXPECT_TRUE(Load().ok()); }

TEST_F(EditedCheckpoint, MissingTensorIsNamed) {
  Remove("h.2.mlp.c_fc.bias");
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has no tensor 'h.2.mlp.c_fc.bias'"));
}

TEST_F(EditedCheckpoint, ShapeDisagreeingWithConfigIsNamed) {
  Reshape("h.1.attn.c_attn.weight", {48, 96});
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'h.1.attn.c_attn.weight'"));
  EXPECT_THAT(s.message(), HasSubstr("has shape [48,96] but config.json implies [48,144]"));
  EXPECT_THAT(s.message(), HasSubstr("hidden_size=48"));
}

TEST_F(EditedCheckpoint, PositionTableShorterThanConfigIsRejected) {
  Reshape("wpe.weight", {32, 48});
  absl::Status s = Load();
  EXPECT_THAT(s.message(), HasSubstr("max_positions=64"));
}

TEST_F(EditedCheckpoint, IntegerWeightsAreRejected) {
  TensorToWrite& t = tensors_.at("ln_f.bias");
  t.dtype = DType::kI32;
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'ln_f.bias' has dtype I32"));
}

TEST(CheckpointLoadingTest, UnsupportedModelTypeIsRejected) {
  ScratchDir dir;
  dir.CopyFrom(FixtureDir("gpt2-random-hub-layout"));
  dir.Write("config.json", R"({"model_type":"t5"})");
  auto m = LoadLanguageModel(dir.str());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("model_type 't5' is not supported"));
}

TEST(CheckpointLoadingTest, DirectoryWithoutWeightsIsRejected) {
  ScratchDir dir;
  dir.Write("config.json", R"({"model_type":"gpt2"})");
  auto m = LoadLanguageModel(dir.str());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(dir.str()));
}

TEST(CheckpointLoadingTest, MissingDirectoryIsNotFound) {
  auto m = LoadLanguageModel("/nonexistent/model");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace attnscope::model
