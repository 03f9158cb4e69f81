// The attnscope command line, end to end: a real process per test.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/json_compare.h"
#include "tests/common/temp_path.h"
#include "tests/reference/checkpoint_copies.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using testing::RunCli;
using testing::Fixture;
using testing::Floats;
using testing::IdsArg;
using testing::ReadJson;
using nlohmann::json;
using test::MaxAbsDiff;
using test::MaxJsonDiff;


TEST(CliTest, HelpForEveryCommand) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"},
                                        {"tokenize", "--help"},
                                        {"analyze", "--help"}}) {
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0];
    EXPECT_THAT(r.out, HasSubstr("Usage: attnscope"));
  }
}

TEST(CliTest, BadUsageExitsWithTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"analyze", "--bogus"},
      {"analyze", "--text", "a", "--ids", "1"},
      {"analyze"},
      {"analyze", "--ids", "1,x"},
      {"analyze", "--text", "a", "--threads", "many"},
      {"analyze", "--text", "a", "--template", "xml"},
      {"analyze", "--text", "a", "--threshold"},
      {"tokenize"},
  };
  for (const auto& args : cases) {
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? "(none)" : args.back());
    EXPECT_FALSE(r.err.empty());
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(CliTest, RuntimeErrorsExitWithOneAndSayWhy) {
  auto missing = RunCli({"analyze", "--model", "/nonexistent/model", "--text", "hi"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/model/config.json"));

  auto too_long = RunCli({"analyze", "--model", Fixture("gpt2-random-hub-layout"), "--ids",
                          IdsArg(json(std::vector<int>(65, 3)))});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err, HasSubstr("65 tokens"));
  EXPECT_THAT(too_long.err, HasSubstr("at most 64"));

  auto no_tokenizer = RunCli({"analyze", "--model", Fixture("gpt2-random-hub-layout"), "--text", "hi"});
  EXPECT_EQ(no_tokenizer.exit_code, 1);
  EXPECT_THAT(no_tokenizer.err, HasSubstr("no tokenizer"));

  auto bad_utf8 = RunCli({"analyze", "--text", "ok \xff"});
  EXPECT_EQ(bad_utf8.exit_code, 1);
  EXPECT_THAT(bad_utf8.err, HasSubstr("invalid UTF-8 at byte 3"));

  auto bad_id = RunCli({"analyze", "--model", Fixture("gpt2-random-hub-layout"), "--ids", "1,1000"});
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_THAT(bad_id.err, HasSubstr("token id 1000 at position 1"));
}

TEST(CliTest, TokenizePrintsIdsOrJson) {
  auto plain = RunCli({"tokenize", "--text", "Hello world"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "15496 995\n");
  auto j = RunCli({"tokenize", "--text", "Hello world", "--json"});
  EXPECT_EQ(j.exit_code, 0) << j.err;
  // Exactly the documented shape, keys in this order.
  EXPECT_EQ(j.out, R"({"ids":[15496,995],"tokens":["Hello","Ġworld"],"offsets":[[0,5],[5,11]]})" "\n");
}

class FixtureCliTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dir() const { return Fixture(GetParam()); }
  json stats() const { return ReadJson(dir() + "/stats.json"); }
};

TEST_P(FixtureCliTest, ExportWritesTheReferenceTensors) {
  const std::string out = test::UniqueTempPath(std::string("export-") + GetParam() + ".safetensors");
  auto r = RunCli({"analyze", "--model", dir(), "--ids", IdsArg(stats()["input_ids"]), "--export", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto mine = SafetensorsFile::Open(out);
  auto ref = SafetensorsFile::Open(dir() + "/reference.safetensors");
  ASSERT_TRUE(mine.ok() && ref.ok());
  ASSERT_EQ((*mine)->tensors().size(), 4u);
  for (const char* name : {"input_ids", "attentions", "hidden_states", "logits"}) {
    ASSERT_NE((*mine)->Find(name), nullptr) << name;
    EXPECT_EQ((*mine)->Find(name)->shape, (*ref)->Find(name)->shape) << name;
    EXPECT_EQ((*mine)->Find(name)->dtype, (*ref)->Find(name)->dtype) << name;
  }
  EXPECT_EQ(*ToInt64(*(*mine)->Find("input_ids")), *ToInt64(*(*ref)->Find("input_ids")));
  EXPECT_LE(MaxAbsDiff(Floats(**mine, "attentions"), Floats(**ref, "attentions")), 1e-5);
  EXPECT_LE(MaxAbsDiff(Floats(**mine, "hidden_states"), Floats(**ref, "hidden_states")), 1e-4);
  EXPECT_LE(MaxAbsDiff(Floats(**mine, "logits"), Floats(**ref, "logits")), 1e-4);
  std::remove(out.c_str());
}

TEST_P(FixtureCliTest, JsonMatchesStatsInFullAndBlockwiseMode) {
  const json expected = stats();
  ASSERT_GE(expected.size(), 16u) << "the fixture's statistics";
  ASSERT_FALSE(expected["input_ids"].empty());
  for (const char* block : {"0", "5"}) {
    auto r = RunCli({"analyze", "--model", dir(), "--ids", IdsArg(expected["input_ids"]),
                     "--template", "none", "--json", "--block-size", block});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json got = json::parse(r.out);
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      ASSERT_TRUE(got.contains(it.key())) << it.key();
      const double tolerance = it.key() == "z" ? 1e-4 : 1e-5;
      const double diff = MaxJsonDiff(got[it.key()], it.value());
      EXPECT_LE(diff, tolerance) << it.key() << " block " << block;
    }
    EXPECT_EQ(got["tokens"].size(), expected["input_ids"].size());
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt2, FixtureCliTest,
                         ::testing::Values("gpt2-random-hub-layout", "gpt2-random-sharded-fp16"));

// BF16 end to end: a bf16 copy of a fixture, written at test time, analyzed
// by the binary. Same numbers as the float32 copy holding the same rounded
// weights (only the loading differs), and close to the float32 original.
TEST(CliBf16Test, AnalyzeOfABf16CheckpointMatchesItsRoundedFloat32Twin) {
  const std::string fixture = Fixture("gpt2-random-hub-layout");
  const json expected = ReadJson(fixture + "/stats.json");
  reference::ScratchDir bf16, rounded;
  ASSERT_TRUE(reference::WriteRoundedCopy(fixture, bf16.path(), true).ok());
  ASSERT_TRUE(reference::WriteRoundedCopy(fixture, rounded.path(), false).ok());
  json got[2];
  for (int i = 0; i < 2; ++i) {
    auto r = RunCli({"analyze", "--model", i == 0 ? bf16.path() : rounded.path(), "--ids",
                     IdsArg(expected["input_ids"]), "--template", "none", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    got[i] = json::parse(r.out);
  }
  double worst_vs_float32 = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    ASSERT_TRUE(got[0].contains(it.key())) << it.key();
    EXPECT_LE(MaxJsonDiff(got[0][it.key()], got[1][it.key()]), 1e-6) << it.key();
    const double diff = MaxJsonDiff(got[0][it.key()], it.value());
    if (it.key() != "z") worst_vs_float32 = test::Worse(worst_vs_float32, diff);
  }
  std::printf("bf16 vs float32 statistics (z-scores aside): max |diff| %.3g\n", worst_vs_float32);
  // bf16 moves every weight by up to 2^-9 relative: the statistics move, but
  // by little, and they do move (the rounding really happened).
  EXPECT_LE(worst_vs_float32, 0.05);
  EXPECT_GT(worst_vs_float32, 1e-6);
}

TEST(CliTest, BundledModelReportsOnTheCatPrompt) {
  auto r = RunCli({"analyze", "--text", "The cat sat on the keyboard again.", "--color", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("health"));
  EXPECT_THAT(r.out, HasSubstr("keyboard"));
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos);
  auto j = RunCli({"analyze", "--text", "The cat sat on the keyboard again.", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json got = json::parse(j.out);
  EXPECT_EQ(got["input_ids"], json::parse("[464,3797,3332,319,262,10586,757,13]"));
  EXPECT_EQ(got["sink_score"].size(), 6u);
  EXPECT_EQ(got["sink_score"][0].size(), 6u);
  EXPECT_EQ(got["tokens"][1], "Ġcat");
}

}  // namespace
}  // namespace attnscope
