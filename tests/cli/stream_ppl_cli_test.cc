// attnscope stream-ppl end to end: the table, --json against the engine's
// definition (a loop of full passes for an unbounded policy), --ids-file,
// the progress bar on a terminal only, and usage errors with exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::Fixture;
using testing::CliResult;
using testing::RunCli;
using testing::RunCliOnTerminal;

std::string Stories() { return Fixture("llama-stories260K"); }

// A temporary ids file, removed with the object.
class IdsFile {
 public:
  explicit IdsFile(const std::string& contents)
      : path_(std::string(::testing::TempDir()) + "stream-ppl-ids-" +
              std::to_string(reinterpret_cast<uintptr_t>(this)) + ".txt") {
    std::ofstream(path_) << contents;
  }
  ~IdsFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string StoryIds(int n) {
  std::string s = "1";
  for (int i = 1; i < n; ++i) s += (i % 7 == 0 ? "\n" : ", ") + std::to_string((i * 37 + 11) % 512);
  return s;
}

std::vector<json> JsonLines(const std::string& out) {
  std::vector<json> lines;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    lines.push_back(json::parse(std::string(line)));
  }
  return lines;
}

TEST(StreamPplCliTest, JsonHasOneObjectPerPolicyWithTheIssueFields) {
  IdsFile ids(StoryIds(120));
  auto r = RunCli({"stream-ppl", "--model", Stories(), "--ids-file", ids.path(), "--policy",
                   "full", "--policy", "sinks:4+28,window:32", "--json", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> runs = JsonLines(r.out);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0]["policy"], "full");
  EXPECT_EQ(runs[1]["policy"], "sinks:4+28");
  EXPECT_EQ(runs[2]["policy"], "window:32");
  for (const json& j : runs) {
    EXPECT_EQ(j["positions"], "cache");
    EXPECT_EQ(j["steps"], 119);
    ASSERT_EQ(j["nll"].size(), 119u);
    double sum = 0;
    for (const json& x : j["nll"]) sum += x.get<double>();
    EXPECT_LE(test::AbsDiff(j["perplexity"].get<double>(), std::exp(sum / 119)), 1e-9);
  }
  EXPECT_EQ(runs[0]["max_cache_tokens"], 119);
  EXPECT_EQ(runs[1]["max_cache_tokens"], 33);
  EXPECT_EQ(runs[2]["max_cache_tokens"], 33);
  // 5 layers x 4 KV heads x 8 dims x (K + V) x 4 bytes per token.
  EXPECT_EQ(runs[1]["max_cache_bytes"], 33 * 5 * 4 * 8 * 2 * 4);
  // The first 33 steps see the same cache under every policy.
  for (int t = 0; t < 33; ++t) {
    EXPECT_LE(test::AbsDiff(runs[1]["nll"][t].get<double>(), runs[0]["nll"][t].get<double>()),
              1e-5);
  }
  EXPECT_EQ(r.err, "");  // no progress bar through a pipe
}

TEST(StreamPplCliTest, TablePrintsEveryColumn) {
  auto r = RunCli({"stream-ppl", "--text-file", std::string(ATTNSCOPE_TEST_DATA_DIR) +
                   "/english-sample.txt", "--max-tokens", "80", "--policy", "full",
                   "--policy", "window:16", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("policy"));
  EXPECT_THAT(r.out, HasSubstr("perplexity"));
  EXPECT_THAT(r.out, HasSubstr("KV MiB"));
  EXPECT_THAT(r.out, HasSubstr("tokens/s"));
  EXPECT_THAT(r.out, HasSubstr("window:16        original "));
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[1], HasSubstr("     79         79"));  // steps, max cache of full
  EXPECT_THAT(lines[2], HasSubstr("     79         17"));
}

TEST(StreamPplCliTest, ProgressBarOnlyOnATerminal) {
  IdsFile ids(StoryIds(300));
  const CliResult run = RunCliOnTerminal("stream-ppl --model " + Stories() + " --ids-file " +
                                         ids.path() + " --policy window:16 --threads 1");
  const std::string& terminal = run.out;
  ASSERT_EQ(run.exit_code, 0) << terminal;
  EXPECT_THAT(terminal, HasSubstr("1/1 window:16"));
  EXPECT_THAT(terminal, HasSubstr("299/299  ppl "));
  EXPECT_THAT(terminal, HasSubstr("tokens/s"));
  EXPECT_THAT(terminal, HasSubstr("window:16        cache"));
}

TEST(StreamPplCliTest, BadInputIsAClearError) {
  IdsFile ids(StoryIds(20));
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--ids-file", ids.path()}, 2, "give at least one --policy"},
      {{"--ids-file", ids.path(), "--policy", "sinks:4"}, 2, "policy \"sinks:4\": expected two sizes"},
      {{"--ids-file", ids.path(), "--policy", "sinks:0+0"}, 2, "keeps no token"},
      {{"--ids-file", ids.path(), "--policy", "full", "--positions", "shift"}, 2,
       "--positions=\"shift\": must be cache or original"},
      {{"--ids-file", ids.path(), "--policy", "full", "--max-tokens", "1"}, 2, "max-tokens"},
      {{"--model", Fixture("gpt2-random-hub-layout"), "--ids-file", ids.path(), "--policy",
        "window:4", "--positions", "cache"},
       2, "learned absolute positions"},
      {{"--model", Stories(), "--ids-file", ids.path(), "--policy", "sinks:4+600"}, 1,
       "605 cached tokens"},
      {{"--ids-file", "/nonexistent/ids.txt", "--policy", "full"}, 1, "/nonexistent/ids.txt"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"stream-ppl"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    if (c.args[0] != "--model") {
      args.insert(args.begin() + 1, {"--model", Stories()});
    }
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, c.code) << c.message << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
  }
  // Learned positions: the text must fit (the bundled model has 512).
  IdsFile long_ids(StoryIds(600));
  auto r = RunCli({"stream-ppl", "--ids-file", long_ids.path(), "--policy", "window:8"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("at most 513 tokens"));
  EXPECT_THAT(r.err, HasSubstr("--max-tokens 513"));
}

}  // namespace
}  // namespace attnscope
