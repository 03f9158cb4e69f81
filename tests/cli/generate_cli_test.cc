// attnscope generate's output: alternatives are other tokens than the chosen
// one, --alternatives and --sink-scores shape the table, sink scores nest as
// [layer][head] in JSON, --max-new-tokens is cut to the positions left, and
// byte-level fragments show as <0xNN>.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::RunCli;

constexpr char kPrompt[] = "The cat sat on the mat. The cat";

TEST(GenerateCliTest, AlternativesNeverRepeatTheChosenToken) {
  for (const char* temperature : {"0", "1.5"}) {
    auto r = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "8", "--temperature",
                     temperature, "--alternatives", "4", "--ignore-eos", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["tokens"].size(), 8u);
    for (const json& t : j["tokens"]) {
      ASSERT_EQ(t["alternatives"].size(), 4u);
      double previous = 1.0;
      for (const json& a : t["alternatives"]) {
        EXPECT_NE(a["id"], t["id"]) << "temperature " << temperature;
        EXPECT_LE(a["probability"].get<double>(), previous);
        previous = a["probability"].get<double>();
      }
    }
  }
}

TEST(GenerateCliTest, TableHonoursAlternativesAndSinkScores) {
  auto two = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "3", "--alternatives", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto json_run = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "3", "--alternatives",
                          "2", "--json"});
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const json j = json::parse(json_run.out);
  ASSERT_EQ(j["tokens"].size(), 3u);
  const std::vector<std::string> lines = absl::StrSplit(two.out, '\n');
  int rows = 0;
  for (const std::string& line : lines) {
    if (line.size() < 12 || line.find('"') == std::string::npos || line[4] < '0' || line[4] > '9') continue;
    ASSERT_LT(rows, 3) << line;
    const json& t = j["tokens"][rows++];
    // The row holds the chosen token, then exactly its two alternatives.
    ASSERT_EQ(t["alternatives"].size(), 2u);
    for (const json& a : t["alternatives"]) {
      char shown[32];
      std::snprintf(shown, sizeof(shown), "%.4f", a["probability"].get<double>());
      EXPECT_THAT(line, HasSubstr(shown));
    }
    EXPECT_EQ(std::count(line.begin(), line.end(), '"'), 6) << line;
  }
  EXPECT_EQ(rows, 3);
  auto none = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "2", "--alternatives", "0"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, ::testing::Not(HasSubstr("alternatives")));

  auto sinks = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "2", "--sink-scores"});
  ASSERT_EQ(sinks.exit_code, 0) << sinks.err;
  EXPECT_THAT(sinks.out, HasSubstr("sink L0 "));
  EXPECT_THAT(sinks.out, HasSubstr("sink L5 "));
}

TEST(GenerateCliTest, SinkScoresNestAsLayerHead) {
  auto r = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", "2", "--ignore-eos",
                   "--sink-scores", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["tokens"].size(), 2u);
  for (const json& t : j["tokens"]) {
    ASSERT_EQ(t["sink_scores"].size(), 6u) << "layers";
    for (const json& layer : t["sink_scores"]) {
      ASSERT_EQ(layer.size(), 6u) << "heads";
      for (const json& v : layer) EXPECT_TRUE(v.get<double>() >= 0.0 && v.get<double>() <= 1.0);
    }
  }
}

// --color as analyze and heads take it: always paints (at temperature 100
// every choice is unlikely, so every probability cell is bold yellow), and
// without the escape sequences the table is the one --color never prints.
TEST(GenerateCliTest, ColorPaintsUnlikelyChoicesAndChangesNothingElse) {
  const std::vector<std::string> args = {"generate",      "--text", "The cat", "--max-new-tokens",
                                         "4",             "--temperature", "100", "--seed",
                                         "3",             "--sink-scores"};
  auto with = [&](const char* when) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--color", when});
    return RunCli(a);
  };
  const auto never = with("never"), always = with("always");
  ASSERT_EQ(never.exit_code, 0) << never.err;
  ASSERT_EQ(always.exit_code, 0) << always.err;
  EXPECT_EQ(never.out.find('\x1b'), std::string::npos);
  EXPECT_THAT(always.out, HasSubstr("\x1b[1;33m"));
  std::string stripped;
  for (size_t i = 0; i < always.out.size(); ++i) {
    if (always.out[i] == '\x1b') {
      i = always.out.find('m', i);
      ASSERT_NE(i, std::string::npos);
      continue;
    }
    stripped += always.out[i];
  }
  EXPECT_EQ(stripped, never.out);
  const auto bad = with("sometimes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--color must be auto, always or never"));
}

TEST(GenerateCliTest, MaxNewTokensIsCutToThePositionsLeft) {
  // The bundled model has 512 positions: a 508-token prompt leaves 4.
  std::string ids = "464";
  for (int i = 1; i < 508; ++i) ids += ",3797";
  auto r = RunCli({"generate", "--ids", ids, "--max-new-tokens", "100", "--ignore-eos", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--max-new-tokens 100 cut to 4 (the prompt has 508 of the model's 512 positions)"));
  EXPECT_EQ(json::parse(r.out)["generated_tokens"], 4);
  std::string full = ids;
  for (int i = 0; i < 4; ++i) full += ",3797";
  auto no_room = RunCli({"generate", "--ids", full});
  EXPECT_EQ(no_room.exit_code, 1);
  EXPECT_THAT(no_room.err, HasSubstr("no room for a new token"));
}

TEST(GenerateCliTest, ByteFragmentsShowAsTheirBytes) {
  // GPT-2 id 447 is the first two bytes (E2 80) of a three-byte character.
  auto r = RunCli({"analyze", "--ids", "447,11,257", "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"<0xE2><0x80>\""));
  EXPECT_EQ(r.out.find("\xEF\xBF\xBD"), std::string::npos) << "no U+FFFD anywhere";
}

}  // namespace
}  // namespace attnscope
