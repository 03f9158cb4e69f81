// tokenizer.model through libsentencepiece, against what SentencePiece itself
// returned (tests/data/tokenizers/llama2_sentencepiece_reference.json), and
// LoadTokenizer's choice of files.
#include "service/tokenizer/sentencepiece_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/tokenizer/hf_tokenizer.h"
#include "tests/common/temp_path.h"

namespace attnscope::tokenizer {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/tokenizers";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SentencePieceTokenizer, MatchesTheSentencePieceLibraryReference) {
  auto tok = SentencePieceTokenizer::Load(kDir + "/llama2/tokenizer.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto cases = nlohmann::json::parse(ReadAll(kDir + "/llama2_sentencepiece_reference.json"));
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    SCOPED_TRACE(text);
    auto enc = (*tok)->Encode(text);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_EQ(enc->ids, c["ids"].get<std::vector<int64_t>>());
    std::vector<std::string> pieces;
    for (int64_t id : enc->ids) pieces.push_back((*tok)->TokenString(id).value());
    EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>());
    EXPECT_EQ((*tok)->AddSpecialTokens(*enc).ids.front(), 1);
    EXPECT_EQ((*tok)->Decode(enc->ids).value(), text);
  }
  EXPECT_TRUE((*tok)->IsSpecial(1));
  EXPECT_FALSE((*tok)->IsSpecial(450));
  EXPECT_EQ((*tok)->TokenBytes(13).value(), "\n");  // <0x0A>
}

TEST(SentencePieceTokenizer, BadModelFileIsNamed) {
  const std::string path = test::UniqueTempPath("bad-tokenizer.model");
  std::ofstream(path) << "not a model";
  auto tok = SentencePieceTokenizer::Load(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr(path));
  std::filesystem::remove(path);
}

TEST(LoadTokenizer, PrefersTokenizerJsonThenGpt2FilesThenTokenizerModel) {
  const std::string only_model = test::UniqueTempPath("spm-only");
  std::filesystem::create_directories(only_model);
  std::filesystem::copy_file(kDir + "/llama2/tokenizer.model", only_model + "/tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  auto spm = LoadTokenizer(only_model);
  ASSERT_TRUE(spm.ok()) << spm.status();
  EXPECT_NE(dynamic_cast<SentencePieceTokenizer*>(spm->get()), nullptr);
  auto hf = LoadTokenizer(kDir + "/llama2");
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_NE(dynamic_cast<HfTokenizer*>(hf->get()), nullptr);
  const std::string empty = test::UniqueTempPath("no-tokenizer");
  std::filesystem::create_directories(empty);
  EXPECT_FALSE(HasTokenizerFiles(empty));
  EXPECT_EQ(LoadTokenizer(empty).status().code(), absl::StatusCode::kNotFound);
  for (const std::string& dir : {only_model, empty}) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace attnscope::tokenizer
