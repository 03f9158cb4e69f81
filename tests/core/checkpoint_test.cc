// SafetensorsCheckpoint on the real fixtures under tests/data/models and on
// broken checkpoint directories built in a temporary directory.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/core/safetensors.h"
#include "tests/core/core_test_util.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::ModelFixture;
using testing_util::ScopedTempDir;
using testing_util::StatusIs;

constexpr char kHubLayout[] = "gpt2-random-hub-layout";
constexpr char kSharded[] = "gpt2-random-sharded-fp16";
constexpr char kIndex[] = "model.safetensors.index.json";

std::unique_ptr<SafetensorsCheckpoint> OpenOrDie(const std::string& dir) {
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return checkpoint.ok() ? std::move(checkpoint).value() : nullptr;
}

void ExpectTensor(const SafetensorsCheckpoint& checkpoint, const std::string& name, DType dtype,
                  const std::vector<int64_t>& shape) {
  SCOPED_TRACE(name);
  const TensorRef* tensor = checkpoint.Find(name);
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(tensor->dtype, dtype);
  EXPECT_EQ(tensor->shape, shape);
}

TEST(CheckpointFixtureTest, HubLayoutHasUnprefixedNamesAndAttentionBiasBuffers) {
  const auto checkpoint = OpenOrDie(ModelFixture(kHubLayout));
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_EQ(checkpoint->Names().size(), 43u);  // 3 layers x 13 + wte, wpe, ln_f x 2.
  ExpectTensor(*checkpoint, "wte.weight", DType::kF32, {1000, 48});
  ExpectTensor(*checkpoint, "wpe.weight", DType::kF32, {64, 48});
  ExpectTensor(*checkpoint, "h.2.attn.bias", DType::kF32, {1, 1, 64, 64});
  ExpectTensor(*checkpoint, "h.0.attn.c_attn.weight", DType::kF32, {48, 144});
  EXPECT_EQ(checkpoint->Find("transformer.wte.weight"), nullptr);
  EXPECT_THAT(checkpoint->FileOf("wte.weight"), EndsWith(std::string(kHubLayout) +
                                                         "/model.safetensors"));
  EXPECT_EQ(checkpoint->FileOf("absent"), "");
  auto wte = ToFloat32(*checkpoint->Find("wte.weight"));
  ASSERT_TRUE(wte.ok());
  EXPECT_FLOAT_EQ((*wte)[0], -0.04271514713764191f);
  EXPECT_FLOAT_EQ((*wte)[1], 0.02578054741024971f);
}

TEST(CheckpointFixtureTest, ShardedFp16CheckpointSpansSixShards) {
  const auto checkpoint = OpenOrDie(ModelFixture(kSharded));
  ASSERT_NE(checkpoint, nullptr);
  const std::vector<std::string> names = checkpoint->Names();
  EXPECT_EQ(names.size(), 28u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  ExpectTensor(*checkpoint, "transformer.wte.weight", DType::kF16, {1000, 64});
  ExpectTensor(*checkpoint, "transformer.h.1.mlp.c_fc.weight", DType::kF16, {64, 256});
  EXPECT_THAT(checkpoint->FileOf("transformer.wte.weight"),
              EndsWith("model-00006-of-00006.safetensors"));
  EXPECT_THAT(checkpoint->FileOf("transformer.h.0.ln_1.weight"),
              EndsWith("model-00001-of-00006.safetensors"));
  std::set<std::string> files;
  for (const std::string& name : names) {
    files.insert(checkpoint->FileOf(name));
    EXPECT_EQ(checkpoint->Find(name)->dtype, DType::kF16) << name;
  }
  EXPECT_EQ(files.size(), 6u);
  auto ln = ToFloat32(*checkpoint->Find("transformer.ln_f.weight"));
  ASSERT_TRUE(ln.ok());
  EXPECT_EQ(ln->size(), 64u);
}

// reference.safetensors holds a forward pass for fixed input ids: checks the
// shapes against config.json and that attention rows are causal
// distributions.
void ExpectReference(const std::string& fixture, int64_t layers, int64_t heads, int64_t hidden,
                     int64_t vocab, int64_t tokens) {
  SCOPED_TRACE(fixture);
  auto file = SafetensorsFile::Open(ModelFixture(fixture) + "/reference.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsFile& ref = **file;
  ASSERT_EQ(ref.tensors().size(), 4u);
  const TensorRef* ids = ref.Find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, DType::kI64);
  EXPECT_THAT(ids->shape, ElementsAre(tokens));
  for (const char* name : {"attentions", "hidden_states", "logits"}) {
    ASSERT_NE(ref.Find(name), nullptr) << name;
    EXPECT_EQ(ref.Find(name)->dtype, DType::kF32) << name;
  }
  EXPECT_THAT(ref.Find("attentions")->shape, ElementsAre(layers, heads, tokens, tokens));
  EXPECT_THAT(ref.Find("hidden_states")->shape, ElementsAre(layers + 1, tokens, hidden));
  EXPECT_THAT(ref.Find("logits")->shape, ElementsAre(tokens, vocab));
  auto id_values = ToInt64(*ids);
  ASSERT_TRUE(id_values.ok());
  for (int64_t id : *id_values) EXPECT_TRUE(id >= 0 && id < vocab) << id;
  auto attentions = ToFloat32(*ref.Find("attentions"));
  ASSERT_TRUE(attentions.ok());
  const float* row = attentions->data();
  for (int64_t r = 0; r < layers * heads * tokens; ++r, row += tokens) {
    const int64_t query = r % tokens;
    double sum = 0;
    for (int64_t key = 0; key < tokens; ++key) {
      if (key > query) {
        ASSERT_EQ(row[key], 0.0f) << "row " << r << " key " << key;
      }
      sum += row[key];
    }
    ASSERT_NEAR(sum, 1.0, 1e-4) << "row " << r;
  }
}

TEST(CheckpointFixtureTest, HubLayoutReferenceHasForwardPassShapes) {
  ExpectReference(kHubLayout, /*layers=*/3, /*heads=*/4, /*hidden=*/48, /*vocab=*/1000,
                  /*tokens=*/20);
}

TEST(CheckpointFixtureTest, ShardedReferenceHasForwardPassShapes) {
  ExpectReference(kSharded, /*layers=*/2, /*heads=*/4, /*hidden=*/64, /*vocab=*/1000,
                  /*tokens=*/33);
}

// Builds checkpoint directories in a temp dir; each test states its layout
// with these verbs and then what OpenDirectory says about it.
class CheckpointDirTest : public ::testing::Test {
 protected:
  std::string Dir() const { return dir_.path(); }
  std::string Path(std::string_view name) const { return dir_.File(name); }
  void WriteIndex(std::string_view json) { testing_util::WriteFile(Path(kIndex), json); }
  void WriteShard(const std::string& name, const std::vector<std::string>& tensors) {
    std::vector<TensorToWrite> contents;
    for (const std::string& tensor : tensors) {
      contents.push_back(MakeF32Tensor(tensor, {2}, {1.0f, 2.0f}));
    }
    ASSERT_TRUE(WriteSafetensors(Path(name), contents).ok());
  }
  void CopyFixtureShards() {
    for (const auto& entry : fs::directory_iterator(ModelFixture(kSharded))) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("model-", 0) == 0) fs::copy_file(entry.path(), Path(name));
    }
  }
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> Open() const {
    return SafetensorsCheckpoint::OpenDirectory(Dir());
  }

 private:
  ScopedTempDir dir_;
};

TEST_F(CheckpointDirTest, MissingDirectoryIsNotFound) {
  const std::string missing = Path("nowhere");
  EXPECT_THAT(SafetensorsCheckpoint::OpenDirectory(missing),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(StartsWith(missing), HasSubstr("directory does not exist"))));
}

TEST_F(CheckpointDirTest, RegularFileIsNotADirectory) {
  WriteShard("model.safetensors", {"x"});
  EXPECT_THAT(SafetensorsCheckpoint::OpenDirectory(Path("model.safetensors")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a directory")));
}

TEST_F(CheckpointDirTest, DirectoryWithNeitherFileIsNotFound) {
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kNotFound,
                               AllOf(StartsWith(Dir()),
                                     HasSubstr("neither model.safetensors nor "
                                               "model.safetensors.index.json"))));
}

TEST_F(CheckpointDirTest, IndexThatIsNotJsonIsRejected) {
  WriteIndex(R"({"weight_map": {"x": "a.safetensors")");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(StartsWith(Path(kIndex)), HasSubstr("not valid JSON"))));
}

TEST_F(CheckpointDirTest, IndexWithoutWeightMapObjectIsRejected) {
  WriteIndex(R"({"metadata": {}, "weight_map": ["a.safetensors"]})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(StartsWith(Path(kIndex)),
                                     HasSubstr("a JSON object with a \"weight_map\" object"))));
}

TEST_F(CheckpointDirTest, WeightMapValueThatIsNotAFileNameIsRejected) {
  WriteIndex(R"({"weight_map": {"x": 3}})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("weight_map[\"x\"] is a JSON number")));
}

TEST_F(CheckpointDirTest, ShardOutsideTheDirectoryIsRejected) {
  WriteIndex(R"({"weight_map": {"x": "../elsewhere.safetensors"}})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("\"../elsewhere.safetensors\", which is outside")));
}

TEST_F(CheckpointDirTest, MissingShardIsNotFoundNamingShardAndIndex) {
  WriteShard("a.safetensors", {"x"});
  WriteIndex(R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kNotFound,
                               AllOf(StartsWith(Path(kIndex)),
                                     HasSubstr("shard 'b.safetensors' listed in the index "
                                               "does not exist"))));
}

TEST_F(CheckpointDirTest, TensorMappedToShardThatLacksItIsRejected) {
  CopyFixtureShards();
  std::string index = testing_util::ReadFile(ModelFixture(kSharded) + "/" + kIndex);
  const std::string from = R"("transformer.wte.weight": "model-00006-of-00006.safetensors")";
  const size_t at = index.find(from);
  ASSERT_NE(at, std::string::npos);
  index.replace(at, from.size(),
                R"("transformer.wte.weight": "model-00001-of-00006.safetensors")");
  WriteIndex(index);
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(StartsWith(Path(kIndex)),
                                     HasSubstr("tensor 'transformer.wte.weight' is mapped to "
                                               "shard 'model-00001-of-00006.safetensors', which "
                                               "does not contain it"))));
}

TEST_F(CheckpointDirTest, SameTensorInTwoShardsIsRejectedNamingBothFiles) {
  WriteShard("a.safetensors", {"x", "y"});
  WriteShard("b.safetensors", {"x", "z"});
  WriteIndex(R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors",
                                "z": "b.safetensors"}})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(StartsWith(Path("b.safetensors")),
                                     HasSubstr("tensor 'x' is also in " +
                                               Path("a.safetensors")))));
}

TEST_F(CheckpointDirTest, MalformedShardReportsTheShardPath) {
  testing_util::WriteFile(Path("a.safetensors"), "\x02\x00\x00");
  WriteIndex(R"({"weight_map": {"x": "a.safetensors"}})");
  EXPECT_THAT(Open(), StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(StartsWith(Path("a.safetensors")), HasSubstr("too short"))));
}

TEST_F(CheckpointDirTest, CopiedFixtureShardsOpenWithTheirIndex) {
  CopyFixtureShards();
  fs::copy_file(ModelFixture(kSharded) + "/" + kIndex, Path(kIndex));
  const auto checkpoint = OpenOrDie(Dir());
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_EQ(checkpoint->Names().size(), 28u);
  EXPECT_EQ(checkpoint->directory(), Dir());
  EXPECT_EQ(checkpoint->FileOf("transformer.wpe.weight"),
            Path("model-00005-of-00006.safetensors"));
}

TEST_F(CheckpointDirTest, ShardTensorsMissingFromWeightMapAreStillFound) {
  WriteShard("a.safetensors", {"listed", "unlisted"});
  WriteIndex(R"({"weight_map": {"listed": "./a.safetensors"}})");
  const auto checkpoint = OpenOrDie(Dir());
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_THAT(checkpoint->Names(), ElementsAre("listed", "unlisted"));
  EXPECT_EQ(checkpoint->FileOf("unlisted"), Path("a.safetensors"));
}

TEST_F(CheckpointDirTest, SingleFileWinsOverIndex) {
  WriteShard("model.safetensors", {"single"});
  WriteIndex("not json at all");
  const auto checkpoint = OpenOrDie(Dir());
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_THAT(checkpoint->Names(), ElementsAre("single"));
}

}  // namespace
}  // namespace attnscope
