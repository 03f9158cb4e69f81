// attnscope stream-ppl end to end: the table; --json against references
// computed here through the library (a loop of full passes for full; for
// sinks, window, detected and heavy the policy written out again in
// tests/engine/eviction_reference.h, fed the attention of full passes over
// what it keeps: masked passes for original positions, passes over the kept
// tokens of a one-layer copy for cache positions); --ids-file; the progress
// bar on a terminal only; usage errors with exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/eviction_reference.h"

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

std::vector<int64_t> ParseIds(const std::string& text) {
  std::vector<int64_t> ids;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(", \n"), absl::SkipEmpty())) {
    ids.push_back(std::stoll(std::string(part)));
  }
  return ids;
}

std::unique_ptr<engine::ModelBundle> LoadBundle(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<engine::ModelBundle>> b = engine::LoadModelBundle(dir);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// float32 passes of different shapes (one token vs a whole prefix) on the
// trained stories260K, whose activations reach about 12.
constexpr double kNllTol = 5e-5;

// The header's promise: --policy full equals a loop of full passes, pass t
// over x_0 .. x_t scoring x_{t+1}.
TEST(StreamPplCliTest, FullEqualsALoopOfFullPasses) {
  const std::string text = StoryIds(60);
  IdsFile file(text);
  auto r = RunCli({"stream-ppl", "--model", Stories(), "--ids-file", file.path(), "--policy",
                   "full", "--json", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> runs = JsonLines(r.out);
  ASSERT_EQ(runs.size(), 1u);
  const std::vector<double> nll = runs[0]["nll"].get<std::vector<double>>();
  std::unique_ptr<engine::ModelBundle> b = LoadBundle(Stories());
  ASSERT_NE(b, nullptr);
  const std::vector<int64_t> ids = ParseIds(text);
  ASSERT_EQ(ids.size(), 60u);
  std::vector<double> loop;
  const int64_t vocab = b->config().vocab_size;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const std::vector<int64_t> prefix(ids.begin(), ids.begin() + t + 1);
    const model::FullRecorder full = engine::testing::FullPass(*b, prefix);
    const std::vector<float> row(full.logits().begin() + t * vocab,
                                 full.logits().begin() + (t + 1) * vocab);
    loop.push_back(engine::testing::RefNll(row, ids[t + 1]));
  }
  EXPECT_LE(test::MaxAbsDiff(nll, loop), kNllTol);
  double mean = 0;
  for (double x : loop) mean += x / loop.size();
  EXPECT_LE(test::AbsDiff(std::log(runs[0]["perplexity"].get<double>()), mean), kNllTol);
  EXPECT_EQ(runs[0]["max_cache_tokens"], 59);
}

// Each policy's nll and largest cache against the reference of
// eviction_reference.h; `dir` is the model, `positions` "cache" or "original".
void ExpectPoliciesEqualReference(const std::string& dir, const std::string& positions,
                                  const std::vector<std::string>& policies, int n) {
  const std::string text = StoryIds(n);
  IdsFile file(text);
  std::vector<std::string> args = {"stream-ppl", "--model", dir, "--ids-file", file.path(),
                                   "--positions", positions, "--json", "--threads", "1"};
  for (const std::string& p : policies) args.insert(args.end(), {"--policy", p});
  auto r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> runs = JsonLines(r.out);
  ASSERT_EQ(runs.size(), policies.size());
  std::unique_ptr<engine::ModelBundle> b = LoadBundle(dir);
  ASSERT_NE(b, nullptr);
  const std::vector<int64_t> ids = ParseIds(text);
  const model::CachePositions where =
      positions == "cache" ? model::CachePositions::kCache : model::CachePositions::kOriginal;
  for (size_t i = 0; i < policies.size(); ++i) {
    const json& run = runs[i];
    EXPECT_EQ(run["policy"], policies[i]);
    EXPECT_EQ(run["positions"], positions);
    const engine::testing::RefEvaluation want =
        engine::testing::ReferenceEvaluation(*b, ids, policies[i], where);
    const std::vector<double> nll = run["nll"].get<std::vector<double>>();
    const double d = test::MaxAbsDiff(nll, want.nll);
    std::printf("%s %s: max |nll - reference| %.3g (closest ranking call %.3g)\n",
                policies[i].c_str(), positions.c_str(), d, want.margin);
    EXPECT_LE(d, kNllTol) << policies[i];
    EXPECT_EQ(run["max_cache_tokens"], want.max_cache_tokens) << policies[i];
    size_t evicted = 0;
    for (const auto& step : want.evicted) evicted += step.size();
    EXPECT_GT(evicted, 0u) << policies[i] << " never evicts: the check would be the full cache";
  }
}

TEST(StreamPplCliTest, PoliciesEqualTheReferenceOriginalPositions) {
  ExpectPoliciesEqualReference(Stories(), "original",
                               {"sinks:3+6", "window:9", "detected:3+6", "heavy:3+6"}, 48);
  // GPT-2's learned positions (the bundled model).
  ExpectPoliciesEqualReference(engine::testing::TinyModelDir(), "original",
                               {"detected:4+5", "heavy:3+6"}, 40);
}

// The first layer of stories260K with 16 positions, written here: 48 tokens
// with cache positions read past the model's positions.
TEST(StreamPplCliTest, PoliciesEqualTheReferenceCachePositionsOneLayer) {
  model::testing::ScratchDir dir;
  ASSERT_TRUE(engine::testing::WriteOneLayerCopy(Stories(), dir, 16));
  ExpectPoliciesEqualReference(dir.str(), "cache",
                               {"sinks:2+5", "window:7", "detected:2+5", "heavy:2+5"}, 48);
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
  // The full cache: shortening is the only way; cache positions, which
  // learned positions refuse, are not suggested.
  r = RunCli({"stream-ppl", "--ids-file", long_ids.path(), "--policy", "full"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--max-tokens 513"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("cache positions")));
}

}  // namespace
}  // namespace attnscope
