// UTF-8 validation (with byte offsets), encoding and lossy sanitizing.
#include "service/core/utf8.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::StatusIs;

// U+FFFD REPLACEMENT CHARACTER.
constexpr char kReplacement[] = "\xEF\xBF\xBD";

std::string Encode(uint32_t code_point) {
  std::string out;
  AppendUtf8(code_point, &out);
  return out;
}

auto InvalidAt(const std::string& expected) {
  return StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(expected));
}

TEST(ValidateUtf8Test, AcceptsWellFormedText) {
  const char* const kValid[] = {
      "",
      "plain ASCII, with \t controls\n",
      "caf\xC3\xA9",                // U+00E9, 2 bytes.
      "\xE2\x82\xAC 5",             // U+20AC, 3 bytes.
      "\xF0\x90\x8D\x88",           // U+10348, 4 bytes.
      "smile \xF0\x9F\x98\x80",     // U+1F600 emoji.
      "\xED\x9F\xBF\xEE\x80\x80",   // U+D7FF and U+E000 around the surrogates.
      "\xEF\xBF\xBF\xF4\x8F\xBF\xBF",  // U+FFFF and U+10FFFF.
  };
  for (const char* text : kValid) {
    EXPECT_TRUE(ValidateUtf8(text).ok()) << ValidateUtf8(text);
  }
  EXPECT_TRUE(ValidateUtf8(std::string("nul\0inside", 10)).ok());
}

TEST(ValidateUtf8Test, RejectsLoneContinuationByte) {
  EXPECT_THAT(ValidateUtf8("ab\x80" "c"),
              InvalidAt("text: invalid UTF-8 at byte 2 (0x80): unexpected continuation byte"));
}

TEST(ValidateUtf8Test, RejectsSequenceTruncatedAtEnd) {
  EXPECT_THAT(ValidateUtf8("abc\xE2\x82"),
              InvalidAt("invalid UTF-8 at byte 3 (0xe2): truncated sequence at end of input"));
  EXPECT_THAT(ValidateUtf8("\xF0\x9F\x98"), InvalidAt("at byte 0 (0xf0): truncated sequence"));
}

TEST(ValidateUtf8Test, RejectsSequenceInterruptedByAsciiByte) {
  EXPECT_THAT(ValidateUtf8("x\xE2\x82" "A"), InvalidAt("at byte 1 (0xe2): truncated sequence"));
}

TEST(ValidateUtf8Test, RejectsOverlongForms) {
  EXPECT_THAT(ValidateUtf8("\xC0\xAF"), InvalidAt("at byte 0 (0xc0): overlong encoding"));
  EXPECT_THAT(ValidateUtf8("ok\xE0\x80\xAF"), InvalidAt("at byte 2 (0xe0): overlong encoding"));
  EXPECT_THAT(ValidateUtf8("\xF0\x80\x80\xAF"), InvalidAt("at byte 0 (0xf0): overlong"));
}

TEST(ValidateUtf8Test, RejectsSurrogates) {
  EXPECT_THAT(ValidateUtf8("x\xED\xA0\x80"), InvalidAt("at byte 1 (0xed): UTF-16 surrogate"));
}

TEST(ValidateUtf8Test, RejectsCodePointsAboveMax) {
  EXPECT_THAT(ValidateUtf8("\xF4\x90\x80\x80"),
              InvalidAt("at byte 0 (0xf4): code point above U+10FFFF"));
  EXPECT_THAT(ValidateUtf8("\xF5\x80\x80\x80"), InvalidAt("at byte 0 (0xf5): code point above"));
}

TEST(ValidateUtf8Test, RejectsByteNeverValid) {
  EXPECT_THAT(ValidateUtf8("abc\xFF"),
              InvalidAt("text: invalid UTF-8 at byte 3 (0xff): byte never valid in UTF-8"));
}

TEST(ValidateUtf8Test, MessageStartsWithWhat) {
  EXPECT_THAT(ValidateUtf8("\xFE", "vocab.json key"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("vocab.json key: invalid UTF-8 at byte 0 (0xfe)")));
}

TEST(AppendUtf8Test, EncodesEachLength) {
  EXPECT_EQ(Encode(0x41), "A");
  EXPECT_EQ(Encode(0xE9), "\xC3\xA9");
  EXPECT_EQ(Encode(0x20AC), "\xE2\x82\xAC");
  EXPECT_EQ(Encode(0x1F600), "\xF0\x9F\x98\x80");
  EXPECT_EQ(Encode(0x10FFFF), "\xF4\x8F\xBF\xBF");
  EXPECT_EQ(Encode(0), std::string(1, '\0'));
}

TEST(AppendUtf8Test, UnencodableValuesBecomeReplacementCharacter) {
  EXPECT_EQ(Encode(0xD800), kReplacement);
  EXPECT_EQ(Encode(0xDFFF), kReplacement);
  EXPECT_EQ(Encode(0x110000), kReplacement);
}

TEST(AppendUtf8Test, EveryScalarValueEncodesToValidUtf8) {
  std::string all;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    AppendUtf8(cp, &all);
  }
  EXPECT_TRUE(ValidateUtf8(all).ok());
  EXPECT_EQ(SanitizeUtf8(all), all);
  // 128 x 1 + 1920 x 2 + 61440 x 3 + 1048576 x 4 bytes.
  EXPECT_EQ(all.size(), 128u + 1920u * 2 + 61440u * 3 + 1048576u * 4);
}

TEST(SanitizeUtf8Test, KeepsValidTextUnchanged) {
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80 \xE2\x82\xAC";
  EXPECT_EQ(SanitizeUtf8(text), text);
}

TEST(SanitizeUtf8Test, ReplacesEachMaximalInvalidSubpart) {
  const std::string r = kReplacement;
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a" + r + "b");
  EXPECT_EQ(SanitizeUtf8("a\xE2\x82"), "a" + r);          // One truncated sequence.
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98" "A"), r + "A");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), r + r);             // Overlong: each byte.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), r + r + r);     // Surrogate: each byte.
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(SanitizeUtf8("\x80\x80"), r + r);
}

TEST(SanitizeUtf8Test, MatchesUnicodeStandardExample) {
  // Unicode 15, section 3.9, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  const std::string r = kReplacement;
  EXPECT_EQ(SanitizeUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
}

TEST(Utf8SequenceLengthTest, FollowsTheLeadBytesHighBits) {
  EXPECT_EQ(Utf8SequenceLength('a'), 1u);
  EXPECT_EQ(Utf8SequenceLength(0x7F), 1u);
  EXPECT_EQ(Utf8SequenceLength(0xC3), 2u);  // é
  EXPECT_EQ(Utf8SequenceLength(0xDF), 2u);
  EXPECT_EQ(Utf8SequenceLength(0xE2), 3u);  // €
  EXPECT_EQ(Utf8SequenceLength(0xEF), 3u);
  EXPECT_EQ(Utf8SequenceLength(0xF0), 4u);  // emoji
}

}  // namespace
}  // namespace attnscope
