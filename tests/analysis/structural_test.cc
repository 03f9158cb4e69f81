// Structural positions: table of templates, GPT-2-style split markers,
// special tokens, newline rules and inputs with inconsistent sizes.
#include "service/analysis/structural.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace attnscope::analysis {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name;
  std::vector<std::string> tokens;
  std::vector<bool> special;
  Structure t;
  std::vector<int64_t> expected;
};

// "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nSure" as
// GPT-2 splits it: the markers are five ordinary tokens each and "assistant"
// is "ass" + "istant".
const std::vector<std::string> kGpt2Chat = {
    "<|", "im", "_", "start", "|>", "user", "\n", "Hi", " there",  // 0..8
    "<|", "im", "_", "end", "|>", "\n",                             // 9..14
    "<|", "im", "_", "start", "|>", "ass", "istant", "\n", "Sure"};  // 15..23
const std::vector<int64_t> kGpt2ChatStructural = {0,  1,  2,  3,  4,  5,  6,  9,  10, 11, 12, 13,
                                                  14, 15, 16, 17, 18, 19, 20, 21, 22};

std::vector<Case> Cases() {
  return {
      {"NonePlainText", {"Hello", " world", "!"}, {}, Structure::kNone, {0}},
      {"NoneSpecialTokens", {"a", "b", "<|endoftext|>", "c"}, {false, false, true, false},
       Structure::kNone, {0, 2}},
      {"NoneIgnoresChatMarkers", kGpt2Chat, {}, Structure::kNone, {0}},
      {"ChatmlGpt2SplitMarkers", kGpt2Chat, {}, Structure::kChatml, kGpt2ChatStructural},
      {"AutoDetectsChatml", kGpt2Chat, {}, Structure::kAuto, kGpt2ChatStructural},
      {"AutoWithoutMarkersIsNone", {"x", "<|", "im", "_end", "|>", "\n"}, {}, Structure::kAuto,
       {0}},
      {"ChatmlMarkersAsSpecialTokens",
       {"<|im_start|>", "system", "\n", "You", " are", "<|im_end|>", "\n", "<|im_start|>", "user",
        "\n", "Hi"},
       {true, false, false, false, false, true, false, true, false, false, false},
       Structure::kChatml,
       {0, 1, 2, 5, 6, 7, 8, 9}},
      {"MarkerSharingTokensWithText", {"Hi", " x<", "|im_end", "|>", "\n\n", "ok"}, {},
       Structure::kChatml, {0, 1, 2, 3, 4}},
      {"OnlyWhitespaceWithNewlineIsANewlineToken",
       {"A", "<|im_end|>", " \n", "B", "<|im_end|>", "\nB", "C", "<|im_end|>", " ", "\n"}, {},
       Structure::kChatml, {0, 1, 2, 4, 7}},
      {"RoleFollowedByTextNotNewline", {"Q", "<|im_start|>", "user", " Hello"}, {},
       Structure::kChatml, {0, 1, 2}},
      {"NoRoleNameNewlineStillStructural", {"Q", "<|im_start|>", "\n", "x"}, {},
       Structure::kChatml, {0, 1, 2}},
      {"RoleRunIsCapped",
       {"<|im_start|>", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "\n"}, {},
       Structure::kChatml, {0, 1, 2, 3, 4, 5, 6, 7, 8}},
      {"MarkerAtTheEnd", {"Hi", "<|im_start|>"}, {}, Structure::kChatml, {0, 1}},
      {"IncompleteMarker", {"Hi", "<|im_start", "user", "\n"}, {}, Structure::kChatml, {0}},
      {"EmptyPrompt", {}, {true, true}, Structure::kChatml, {}},
      {"ExtraFlagsIgnored", {"a", "b"}, {false, false, true, true}, Structure::kNone, {0}},
      {"MissingFlagsAreFalse", {"a", "b", "c"}, {false, true}, Structure::kNone, {0, 1}},
      {"EmptyTokenInsideMarker", {"x", "<|im_", "", "end|>", "\n"}, {}, Structure::kChatml,
       {0, 1, 3, 4}},
  };
}

class StructuralCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(StructuralCaseTest, FindsExactlyTheStructuralPositions) {
  const Case& c = GetParam();
  EXPECT_EQ(StructuralPositions(c.tokens, c.special, c.t), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Table, StructuralCaseTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(TemplateTest, ParsesTheThreeSettings) {
  EXPECT_EQ(ParseStructure("none").value(), Structure::kNone);
  EXPECT_EQ(ParseStructure("chatml").value(), Structure::kChatml);
  EXPECT_EQ(ParseStructure("auto").value(), Structure::kAuto);
  for (Structure t : {Structure::kNone, Structure::kChatml, Structure::kAuto}) {
    EXPECT_EQ(ParseStructure(StructureName(t)).value(), t);
  }
}

TEST(TemplateTest, RejectsOtherSettingsNamingTheValue) {
  for (const char* bad : {"ChatML", "", "llama", "none "}) {
    absl::StatusOr<Structure> parsed = ParseStructure(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("\"" + std::string(bad) + "\""));
  }
}

TEST(TemplateTest, AutoResolvesFromTheText) {
  EXPECT_EQ(ResolveStructure(kGpt2Chat, Structure::kAuto), Structure::kChatml);
  EXPECT_EQ(ResolveStructure({"<|im_end|>"}, Structure::kAuto), Structure::kNone);
  EXPECT_EQ(ResolveStructure({"plain"}, Structure::kChatml), Structure::kChatml);
}

}  // namespace
}  // namespace attnscope::analysis
