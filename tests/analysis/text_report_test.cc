// The terminal report: its sections, the sink-score grid, colour switching
// and token display.
#include "service/analysis/text_report.h"

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/text_cells.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope::analysis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The planted-sink fixture (L = 4, H = 3, T = 40, sinks 17 and 29).
class TextReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<testing_util::OwnedTensors> t =
        testing_util::LoadReference(testing_util::DataPath("stats/planted_sinks.safetensors"));
    ASSERT_TRUE(t.ok()) << t.status();
    AnalysisOptions options;
    options.structural = {0, 1, 2, 3, 38, 39};
    absl::StatusOr<PromptStats> s = AnalyzeTensors(t->View(), options);
    ASSERT_TRUE(s.ok()) << s.status();
    stats_ = *std::move(s);
    for (int i = 0; i < 40; ++i) tokens_.push_back(" tok" + std::to_string(i));
    tokens_[17] = " sink\n";
  }
  PromptStats stats_;
  std::vector<std::string> tokens_;
};

// Lines of the grid: those starting with "  L<digit>".
std::vector<std::string> GridRows(const std::string& report) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (line.size() > 3 && line.substr(0, 3) == "  L" && isdigit(line[3])) {
      rows.emplace_back(line);
    }
  }
  return rows;
}

TEST_F(TextReportTest, PlainReportHasEverySection) {
  const std::string report = RenderTextReport(stats_, tokens_);
  std::cout << report;
  EXPECT_THAT(report, HasSubstr("40 tokens, 4 layers x 3 heads"));
  EXPECT_THAT(report, HasSubstr("Context health  4.4 / 10"));
  EXPECT_THAT(report, HasSubstr("2 anomalous sinks among 34 candidate tokens (z > 6.0)"));
  // Sink lines with the escaped token text and the z-score.
  EXPECT_THAT(report, HasSubstr("#17 \" sink\\n\"  z = "));
  EXPECT_THAT(report, HasSubstr(absl::StrFormat("z = %6.2f", stats_.z[17])));
  EXPECT_THAT(report, HasSubstr("#29 \" tok29\"   z = "));
  EXPECT_THAT(report, HasSubstr("#38 \" tok38\""));  // structural list
  EXPECT_THAT(report, HasSubstr("Massive activation"));
  const std::vector<std::string> rows = GridRows(report);
  ASSERT_EQ(rows.size(), 4u);
  // H = 3 <= 16: numbers next to the shades.
  EXPECT_THAT(rows[0], HasSubstr(absl::StrFormat("%4.2f", stats_.sink_score[0][2])));
  EXPECT_THAT(report, HasSubstr("       h0      h1      h2\n"));
  EXPECT_THAT(report, Not(HasSubstr("\x1b[")));
  // One norm bar per token, the largest at full width.
  EXPECT_THAT(report, HasSubstr("#39"));
  EXPECT_THAT(report, HasSubstr(std::string(" ") + [] {
                std::string full;
                for (int i = 0; i < 40; ++i) full += "█";
                return full;
              }()));
}

TEST_F(TextReportTest, ColourOnlyWhenAsked) {
  TextReportOptions options;
  options.color = true;
  const std::string report = RenderTextReport(stats_, tokens_, options);
  EXPECT_THAT(report, HasSubstr("\x1b[1;31m"));
  EXPECT_THAT(report, HasSubstr("\x1b[0m"));
  EXPECT_EQ(GridRows(report).size(), 4u);
}

TEST_F(TextReportTest, WideGridsShowShadesOnly) {
  TextReportOptions options;
  options.grid_numbers_max_heads = 2;
  const std::string report = RenderTextReport(stats_, tokens_, options);
  const std::vector<std::string> rows = GridRows(report);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_THAT(rows[0], Not(HasSubstr("0.")));
}

TEST_F(TextReportTest, CutTokenRowsKeepSinksAndStructural) {
  TextReportOptions options;
  options.max_token_rows = 5;
  const std::string full = RenderTextReport(stats_, tokens_, options);
  // The norm section (the next-token section is cut by its own option).
  const std::string report = full.substr(0, full.find("Next token at each position"));
  EXPECT_THAT(report, HasSubstr("9 of 40 tokens shown"));
  EXPECT_THAT(report, HasSubstr("  sink"));
  EXPECT_THAT(report, Not(HasSubstr("\" tok10\"")));
  EXPECT_THAT(report, HasSubstr("\" tok38\""));
}

TEST(TextReportStandaloneTest, ShadesFollowTheBands) {
  PromptStats s;
  s.num_layers = 1;
  s.num_heads = 5;
  s.num_tokens = 1;
  s.sink_score = {{0.1, 0.3, 0.5, 0.7, 0.9}};
  s.max_norm = {2.0};
  s.structural = {0};
  const std::string report = RenderTextReport(s, {});  // missing token texts are fine
  const std::vector<std::string> rows = GridRows(report);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr("  0.10  ░ 0.30  ▒ 0.50  ▓ 0.70  █ 0.90"));
  EXPECT_THAT(report, HasSubstr("no candidate tokens"));
}

TEST(DisplayTokenTest, EscapesAndCuts) {
  EXPECT_EQ(DisplayToken("a\nb\tc\r", 16), "a\\nb\\tc\\r");
  EXPECT_EQ(DisplayToken(std::string("x\x01", 2), 16), "x\\x01");
  // Bytes that are not part of valid UTF-8 (byte-level BPE fragments) show
  // as their values, not as U+FFFD.
  EXPECT_EQ(DisplayToken("\xff", 16), "<0xFF>");
  EXPECT_EQ(DisplayToken(" \xe2\x80", 16), " <0xE2><0x80>");
  EXPECT_EQ(DisplayToken("\xe2\x80\x94", 16), "\xe2\x80\x94");  // a whole em dash
  EXPECT_EQ(ReadableBytes("a\xc3"), "a<0xC3>");
  EXPECT_EQ(DisplayToken("abcdefghij", 5), "abcd…");
  EXPECT_EQ(DisplayToken("éééééé", 4), "ééé…");
  EXPECT_EQ(DisplayToken("abcde", 5), "abcde");
}

// With a 150K vocabulary most probabilities are below 0.001: they print in
// scientific notation, never as "0.000".
TEST(TextCellsTest, SmallProbabilitiesAreNeverPrintedAsZero) {
  using text_cells::FormatProbability;
  EXPECT_EQ(FormatProbability(0.5), "0.500");
  EXPECT_EQ(FormatProbability(0.0123), "0.012");
  EXPECT_EQ(FormatProbability(0.0004), "4.0e-04");
  EXPECT_EQ(FormatProbability(6.6e-6), "6.6e-06");
  EXPECT_EQ(FormatProbability(0.0), "0.000");
  EXPECT_EQ(FormatProbability(0.00012, 4), "0.0001");
  EXPECT_EQ(FormatProbability(3e-5, 4), "3.0e-05");
  EXPECT_EQ(FormatProbability(1.0, 4), "1.0000");
}

}  // namespace
}  // namespace attnscope::analysis
