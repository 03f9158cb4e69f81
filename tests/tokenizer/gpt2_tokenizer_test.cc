#include "service/tokenizer/gpt2_tokenizer.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/core/utf8.h"
#include "service/tokenizer/byte_level.h"
#include "tests/common/temp_path.h"

namespace attnscope::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Offsets = std::vector<std::pair<int64_t, int64_t>>;

const std::string kModelDir = std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2";
const std::string kDataDir = ATTNSCOPE_TEST_DATA_DIR;
constexpr int64_t kEot = 50256;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::filesystem::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// A fresh empty directory with a unique name, removed when the test exits.
std::filesystem::path MakeTempDir(const std::string& name) {
  std::filesystem::path dir = test::UniqueTempPath("gpt2-tok-" + name);
  std::filesystem::create_directories(dir);
  return dir;
}

// Printable form of a text for failure messages (escapes control bytes).
std::string Quote(const std::string& text) { return nlohmann::json(text).dump(); }

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Gpt2Tokenizer::Load(kModelDir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  static const Gpt2Tokenizer& tok() { return *tokenizer_; }

  static std::vector<int64_t> Ids(const std::string& text) {
    auto enc = tok().Encode(text);
    EXPECT_TRUE(enc.ok()) << enc.status();
    return enc.ok() ? enc->ids : std::vector<int64_t>{};
  }

  // Offsets tile the text and every token's bytes are exactly its span.
  static void ExpectTiles(const std::string& text, const Encoding& enc) {
    ASSERT_EQ(enc.ids.size(), enc.offsets.size()) << Quote(text);
    int64_t expected_begin = 0;
    for (size_t i = 0; i < enc.ids.size(); ++i) {
      const auto [begin, end] = enc.offsets[i];
      ASSERT_EQ(begin, expected_begin) << "token " << i << " of " << Quote(text);
      ASSERT_GT(end, begin) << "token " << i << " of " << Quote(text);
      ASSERT_LE(end, static_cast<int64_t>(text.size())) << Quote(text);
      auto bytes = tok().TokenBytes(enc.ids[i]);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      ASSERT_EQ(*bytes, text.substr(begin, end - begin)) << "token " << i << " of " << Quote(text);
      expected_begin = end;
    }
    EXPECT_EQ(expected_begin, static_cast<int64_t>(text.size())) << Quote(text);
  }

  static void ExpectRoundTrip(const std::string& text) {
    auto enc = tok().Encode(text);
    ASSERT_TRUE(enc.ok()) << enc.status() << " for " << Quote(text);
    ExpectTiles(text, *enc);
    auto decoded = tok().Decode(enc->ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, text);
  }

  static inline Gpt2Tokenizer* tokenizer_ = nullptr;
};

TEST_F(Gpt2TokenizerTest, MatchesReferenceIds) {
  const auto cases =
      nlohmann::json::parse(ReadAll(kDataDir + "/tokenizers/gpt2_reference.json"));
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto expected = c.at("ids").get<std::vector<int64_t>>();
    auto enc = tok().Encode(text);
    ASSERT_TRUE(enc.ok()) << enc.status() << " for " << Quote(text);
    EXPECT_EQ(enc->ids, expected) << "text: " << Quote(text)
                                  << "\n  expected: [" << absl::StrJoin(expected, ", ")
                                  << "]\n  actual:   [" << absl::StrJoin(enc->ids, ", ") << "]";
    ExpectTiles(text, *enc);
    auto decoded = tok().Decode(expected);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, text);
  }
}

TEST_F(Gpt2TokenizerTest, OffsetsAreByteSpans) {
  auto hello = tok().Encode("Hello world");
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_THAT(hello->ids, ElementsAre(15496, 995));
  EXPECT_EQ(hello->offsets, (Offsets{{0, 5}, {5, 11}}));

  // 你 = E4 BD A0, 好 = E5 A5 BD: tokens cut the characters after 2 bytes.
  auto cjk = tok().Encode("你好");
  ASSERT_TRUE(cjk.ok()) << cjk.status();
  EXPECT_THAT(cjk->ids, ElementsAre(19526, 254, 25001, 121));
  EXPECT_EQ(cjk->offsets, (Offsets{{0, 2}, {2, 3}, {3, 5}, {5, 6}}));

  auto cafe = tok().Encode("café");
  ASSERT_TRUE(cafe.ok()) << cafe.status();
  EXPECT_THAT(cafe->ids, ElementsAre(66, 1878, 2634));
  EXPECT_EQ(cafe->offsets, (Offsets{{0, 1}, {1, 3}, {3, 5}}));

  auto empty = tok().Encode("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->ids.empty());
  EXPECT_TRUE(empty->offsets.empty());
}

// GPT-2's \s is Python's (Unicode White_Space). It includes U+0085 NEXT
// LINE, which PCRE2's \s lacks (that would glue " \x85!" into one piece and
// merge "Ġ Â"), and excludes U+180E, which PCRE2's \s has (that would cut
// " \u180e" after the space). Ids from the reference Python encoder.
TEST_F(Gpt2TokenizerTest, WhitespaceIsPythonsWhiteSpace) {
  EXPECT_THAT(Ids("! \xC2\x85!"), ElementsAre(0, 220, 126, 227, 0));
  EXPECT_THAT(Ids(" \xE1\xA0\x8E"), ElementsAre(28053, 254, 236));
  EXPECT_THAT(Ids("a\xE1\xA0\x8E" "b"), ElementsAre(64, 157, 254, 236, 65));
}

TEST_F(Gpt2TokenizerTest, RoundTripsEnglishSample) {
  const std::string text = ReadAll(kDataDir + "/english-sample.txt");
  ASSERT_GT(text.size(), 500000u);
  const auto start = std::chrono::steady_clock::now();
  auto enc = tok().Encode(text);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::cout << "[ INFO     ] encoded english-sample.txt (" << text.size() << " bytes, "
            << enc->ids.size() << " tokens) in "
            << std::chrono::duration<double, std::milli>(elapsed).count() << " ms\n";
  // Count and id sum from the reference GPT-2 BPE (OpenAI's encoder.py
  // algorithm with Python's `regex`) on the same file.
  EXPECT_EQ(enc->ids.size(), 153329u);
  int64_t id_sum = 0;
  for (int64_t id : enc->ids) id_sum += id;
  EXPECT_EQ(id_sum, 680874877);
  ExpectTiles(text, *enc);
  auto decoded = tok().Decode(enc->ids);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(*decoded == text) << "decoded text differs from english-sample.txt";
}

// Fixed-seed mix of ASCII, whitespace runs, Latin-1, CJK, emoji, combining
// marks, contractions and special-token fragments. Uses raw mt19937 output
// (not std distributions) so the strings are the same on every platform.
std::string RandomUtf8(std::mt19937& rng) {
  static const char* const kSnippets[] = {"'s", "'ll", "'ve", " 'd", "<|endoftext|>",
                                          "<|endoftext", "\r\n", "   ", "\n\n"};
  auto pick = [&rng](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  std::string out;
  const uint32_t units = pick(40);
  for (uint32_t i = 0; i < units; ++i) {
    switch (pick(10)) {
      case 0: case 1: AppendUtf8('a' + pick(26), &out); break;
      case 2: AppendUtf8(" \n\t"[pick(3)], &out); break;
      case 3: AppendUtf8(0x21 + pick(0x5E), &out); break;  // any printable ASCII
      case 4: AppendUtf8(0xA0 + pick(0x60), &out); break;  // Latin-1
      case 5: AppendUtf8(0x4E00 + pick(0x5200), &out); break;  // CJK
      case 6: AppendUtf8(0x1F300 + pick(0x350), &out); break;  // emoji
      case 7: AppendUtf8(0x300 + pick(0x70), &out); break;  // combining marks
      case 8: {
        static const uint32_t kOdd[] = {0x85, 0x200D, 0xFE0F, 0x2028, 0x3000, 0x1F3FD, 0x0};
        AppendUtf8(kOdd[pick(7)], &out);
        break;
      }
      default: out += kSnippets[pick(9)]; break;
    }
  }
  return out;
}

TEST_F(Gpt2TokenizerTest, RoundTripsRandomUtf8) {
  std::mt19937 rng(20261130);
  for (int i = 0; i < 400; ++i) {
    const std::string text = RandomUtf8(rng);
    ASSERT_TRUE(ValidateUtf8(text).ok()) << Quote(text);
    ExpectRoundTrip(text);
    if (HasFailure()) FAIL() << "case " << i << ": " << Quote(text);
  }
}

TEST_F(Gpt2TokenizerTest, EndOfTextIsSpecialAnywhere) {
  auto alone = tok().Encode("<|endoftext|>");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_THAT(alone->ids, ElementsAre(kEot));
  EXPECT_EQ(alone->offsets, (Offsets{{0, 13}}));

  EXPECT_THAT(Ids("<|endoftext|>Hi"), ElementsAre(kEot, 17250));
  EXPECT_THAT(Ids("Hello<|endoftext|>world"), ElementsAre(15496, kEot, 6894));
  EXPECT_THAT(Ids("Hi<|endoftext|>"), ElementsAre(17250, kEot));
  EXPECT_THAT(Ids(" <|endoftext|> "), ElementsAre(220, kEot, 220));

  auto doubled = tok().Encode("<|endoftext|><|endoftext|>");
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_THAT(doubled->ids, ElementsAre(kEot, kEot));
  EXPECT_EQ(doubled->offsets, (Offsets{{0, 13}, {13, 26}}));

  // An incomplete marker is ordinary text.
  EXPECT_THAT(Ids("<|endoftext|"), ElementsAre(27, 91, 437, 1659, 5239, 91));
  ExpectRoundTrip("a<|endoftext|><|endoftext|>b <|endoftext|>");
}

TEST_F(Gpt2TokenizerTest, TokenStringsAndBytes) {
  EXPECT_EQ(tok().vocab_size(), 50257);
  EXPECT_EQ(tok().end_of_text_id(), kEot);
  EXPECT_EQ(*tok().TokenString(kEot), "<|endoftext|>");
  EXPECT_EQ(*tok().TokenBytes(kEot), "<|endoftext|>");
  EXPECT_TRUE(tok().IsSpecial(kEot));
  EXPECT_FALSE(tok().IsSpecial(464));
  EXPECT_FALSE(tok().IsSpecial(-1));
  EXPECT_EQ(*tok().TokenString(464), "The");
  EXPECT_EQ(*tok().TokenString(383), "\xC4\xA0The");  // "ĠThe"
  EXPECT_EQ(*tok().TokenBytes(383), " The");
  EXPECT_EQ(*tok().TokenString(198), "\xC4\x8A");  // "Ċ"
  EXPECT_EQ(*tok().TokenBytes(198), "\n");
  EXPECT_EQ(*tok().TokenBytes(19526), "\xE4\xBD");  // first 2 bytes of 你
}

TEST_F(Gpt2TokenizerTest, DecodeReplacesCutCharacters) {
  // 19526 holds E4 BD, the first two bytes of 你: alone it is one U+FFFD.
  EXPECT_EQ(*tok().Decode({19526}), "\xEF\xBF\xBD");
  EXPECT_EQ(*tok().Decode({19526, 254}), "你");
  EXPECT_EQ(*tok().Decode({464, 19526}), "The\xEF\xBF\xBD");
  EXPECT_EQ(*tok().Decode({}), "");
}

TEST_F(Gpt2TokenizerTest, InvalidUtf8IsAnErrorWithOffset) {
  const std::pair<std::string, std::string> cases[] = {
      {"\xff", "byte 0"},
      {"ab\xe4\xbd", "byte 2"},             // truncated 3-byte sequence
      {"x\xc0\xaf", "byte 1"},              // overlong '/'
      {"ok \xed\xa0\x80", "byte 3"},        // surrogate D800
      {"<|endoftext|>\x80", "byte 13"},     // stray continuation after special
  };
  for (const auto& [text, where] : cases) {
    auto enc = tok().Encode(text);
    ASSERT_FALSE(enc.ok()) << Quote(SanitizeUtf8(text));
    EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(enc.status().message(), HasSubstr(where)) << enc.status();
  }
}

TEST_F(Gpt2TokenizerTest, OutOfRangeIdsAreErrors) {
  for (int64_t id : {int64_t{-1}, int64_t{50257}, int64_t{1} << 40}) {
    EXPECT_EQ(tok().TokenBytes(id).status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(tok().TokenString(id).status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
  auto decoded = tok().Decode({464, 50257});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("50257"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("ids[1]"));
}

TEST_F(Gpt2TokenizerTest, ConcurrentEncodesAgree) {
  std::vector<std::string> texts;
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) texts.push_back(RandomUtf8(rng) + " the cat sat");
  std::vector<std::vector<int64_t>> expected;
  for (const auto& t : texts) expected.push_back(Ids(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto enc = tok().Encode(texts[(i + w * 13) % texts.size()]);
          if (!enc.ok() || enc->ids != expected[(i + w * 13) % texts.size()]) ++mismatches[w];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

TEST(ByteLevelTest, MatchesGpt2BytesToUnicode) {
  EXPECT_EQ(ByteToSymbol('A'), uint32_t{'A'});
  EXPECT_EQ(ByteToSymbol(0x00), 0x100u);
  EXPECT_EQ(ByteToSymbol('\n'), 0x10Au);
  EXPECT_EQ(ByteToSymbol(' '), 0x120u);
  EXPECT_EQ(ByteToSymbol(0x7F), 0x121u);
  EXPECT_EQ(ByteToSymbol(0xA0), 0x142u);
  EXPECT_EQ(ByteToSymbol(0xAD), 0x143u);  // the 68th and last remapped byte
  EXPECT_EQ(ByteToSymbol(0xE9), 0xE9u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(SymbolToByte(ByteToSymbol(b)), b);
  EXPECT_EQ(SymbolToByte(0x144), -1);
  EXPECT_EQ(SymbolToByte(0xAD), -1);
  EXPECT_EQ(SymbolToByte(0x20), -1);
}

// Writes a vocabulary of the 256 byte symbols (id = byte), then `extra`
// tokens, then <|endoftext|>, and the given merges.txt.
std::filesystem::path WriteToyModel(const std::string& name,
                                    const std::vector<std::string>& extra,
                                    const std::string& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteSymbolUtf8(static_cast<uint8_t>(b))] = b;
  int next_id = 256;
  for (const auto& token : extra) vocab[token] = next_id++;
  vocab["<|endoftext|>"] = next_id;
  const auto dir = MakeTempDir(name);
  WriteAll(dir / "vocab.json", vocab.dump());
  WriteAll(dir / "merges.txt", merges);
  return dir;
}

// "ab a" ranks before "a b". On "abab" encoder.py merges both (a, b) pairs
// in one pass before looking at (ab, a); a plain position-ordered heap would
// merge the new (ab, a) first and give [aba, b].
TEST(Gpt2TokenizerToyTest, MergesEveryOccurrenceBeforeNewPairs) {
  const auto dir = WriteToyModel("toy", {"ab", "aba"}, "#version: 0.2\nab a\na b\n");
  auto tok = Gpt2Tokenizer::Load(dir.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 259);
  EXPECT_EQ((*tok)->end_of_text_id(), 258);
  EXPECT_THAT((*tok)->Encode("abab")->ids, ElementsAre(256, 256));
  EXPECT_THAT((*tok)->Encode("aba")->ids, ElementsAre(257));
  EXPECT_THAT((*tok)->Encode("aaab")->ids, ElementsAre('a', 'a', 256));
}

TEST(Gpt2TokenizerLoadTest, MissingDirectoryIsNotFound) {
  auto tok = Gpt2Tokenizer::Load("/nonexistent/attnscope/model");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr("vocab.json"));
}

TEST(Gpt2TokenizerLoadTest, MissingMergesIsNotFound) {
  const auto dir = MakeTempDir("no_merges");
  std::filesystem::copy_file(kModelDir + "/vocab.json", dir / "vocab.json");
  auto tok = Gpt2Tokenizer::Load(dir.string());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr("merges.txt"));
}

TEST(Gpt2TokenizerLoadTest, CorruptVocabIsInvalidArgument) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"a\": 0, \"b\": ", "invalid JSON"},
      {"[1, 2, 3]", "JSON object"},
      {"{\"a\": \"zero\"}", "not an integer"},
      {"{\"a\": 0, \"b\": 5}", "outside [0, 2)"},
      {"{\"a\": 0, \"b\": 0}", "duplicate"},
      {"{\"a\": 0, \"b\": 1}", "no token for byte 0x00"},
  };
  for (const auto& [contents, why] : cases) {
    const auto dir = MakeTempDir("bad_vocab");
    WriteAll(dir / "vocab.json", contents);
    WriteAll(dir / "merges.txt", "#version: 0.2\n");
    auto tok = Gpt2Tokenizer::Load(dir.string());
    ASSERT_FALSE(tok.ok()) << contents;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << contents;
    EXPECT_THAT(tok.status().message(), HasSubstr("vocab.json")) << contents;
    EXPECT_THAT(tok.status().message(), HasSubstr(why)) << contents;
  }
}

TEST(Gpt2TokenizerLoadTest, BadMergeLineIsInvalidArgument) {
  const std::pair<std::string, std::string> cases[] = {
      {"#version: 0.2\nĠ t\nĠ a b\n", "line 3: expected 2 symbols"},
      {"#version: 0.2\nĠ t\nĠt\n", "line 3: expected 2 symbols"},
      {"#version: 0.2\nĠ ŧŧŧ\n", "line 2: symbol 'ŧŧŧ' is not in the vocabulary"},
  };
  for (const auto& [merges, why] : cases) {
    const auto dir = MakeTempDir("bad_merges");
    std::filesystem::copy_file(kModelDir + "/vocab.json", dir / "vocab.json");
    WriteAll(dir / "merges.txt", merges);
    auto tok = Gpt2Tokenizer::Load(dir.string());
    ASSERT_FALSE(tok.ok()) << merges;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << merges;
    EXPECT_THAT(tok.status().message(), HasSubstr("merges.txt")) << merges;
    EXPECT_THAT(tok.status().message(), HasSubstr(why)) << merges;
  }
}

}  // namespace
}  // namespace attnscope::tokenizer
