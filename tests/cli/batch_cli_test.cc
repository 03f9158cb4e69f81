// `attnscope batch` end to end on the bundled model: local results equal
// `analyze --json` prompt by prompt, bad lines become error lines and the
// run goes on, --resume after kill -9 finishes with no duplicate id, and a
// remote run over three real attnscope-server replicas spreads the prompts
// evenly and gives the local numbers; a replica killed mid-batch loses no
// prompt.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/json_compare.h"
#include "tests/common/temp_path.h"
#include "tests/metrics/metrics_test_support.h"
#include "tests/rpc/server_process.h"

extern char** environ;

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

// Short prompts: the suite is near its time budget.
const std::vector<std::string> kTexts = {
    "The cat sat on the keyboard again.",
    "Dogs bark at night, and the neighbours complain.",
    "A quiet river runs under the old stone bridge.",
    "She counted the coins twice before paying.",
    "Rain fell on the roof all afternoon.",
    "The train left the station at noon.",
};

std::string WriteFile(const std::string& stem, const std::string& text) {
  const std::string path = test::UniqueTempPath(stem);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::string TextLine(const std::string& id, const std::string& text) {
  return json({{"id", id}, {"text", text}}).dump() + "\n";
}

// A JSONL input of `n` prompts "p0".."p{n-1}" cycling through kTexts.
std::string Prompts(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += TextLine("p" + std::to_string(i), kTexts[static_cast<size_t>(i) % kTexts.size()] +
                                                 " (" + std::to_string(i) + ")");
  }
  return out;
}

double Mean(const json& values) {
  double sum = 0;
  for (const json& v : values) sum += v.get<double>();
  return sum / static_cast<double>(values.size());
}

TEST(BatchCliTest, LocalResultsEqualAnalyzeAndBadLinesBecomeErrorLines) {
  const std::string input = WriteFile(
      "batch-in.jsonl",
      TextLine("cat", kTexts[0]) + "{\"id\": \"ids\", \"ids\": [464, 3797, 3332, 319]}\n" +
          "this line is not JSON\n" + "{\"id\": \"oov\", \"ids\": [1, 50257]}\n" +
          "{\"id\": [1], \"text\": \"an array is no id\"}\n\n" + TextLine("dogs", kTexts[1]) +
          "{\"id\": \"kw\", \"text\": \"x\", \"chat_template_kwargs\": {\"a\": 1}}\n" +
          "{\"id\": \"tools\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
          "\"tools\": {}}\n");
  const std::string output = test::UniqueTempPath("batch-out.jsonl");
  const testing::CliResult r = RunCli({"batch", "--input", input, "--output", output});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // some lines failed
  EXPECT_NE(r.err.find("batch: 8 prompts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 ok, 5 errors"), std::string::npos) << r.err;
  const std::vector<json> lines = ReadLines(output);
  ASSERT_EQ(lines.size(), 8u);
  std::map<std::string, json> by_id;
  for (const json& line : lines) by_id[line["id"].dump()] = line;
  EXPECT_EQ(by_id["3"]["line"], 3);  // no id of its own: its line number
  EXPECT_NE(by_id["3"]["error"].get<std::string>().find("not a JSON object"), std::string::npos);
  EXPECT_NE(by_id["\"oov\""]["error"].get<std::string>().find("50257"), std::string::npos);
  EXPECT_NE(by_id["5"]["error"].get<std::string>().find("\"id\""), std::string::npos);
  EXPECT_NE(by_id["\"kw\""]["error"].get<std::string>().find(
                "\"chat_template_kwargs\" goes with \"messages\" only"),
            std::string::npos)
      << by_id["\"kw\""].dump();
  EXPECT_NE(by_id["\"tools\""]["error"].get<std::string>().find("\"tools\": expected a JSON array"),
            std::string::npos)
      << by_id["\"tools\""].dump();

  const std::map<std::string, std::vector<std::string>> prompts = {
      {"\"cat\"", {"--text", kTexts[0]}},
      {"\"ids\"", {"--ids", "464,3797,3332,319"}},
      {"\"dogs\"", {"--text", kTexts[1]}}};
  for (const auto& [id, prompt] : prompts) {
    const json& line = by_id[id];
    ASSERT_FALSE(line.contains("error")) << id << ": " << line.dump();
    std::vector<std::string> args = {"analyze", "--json"};
    args.insert(args.end(), prompt.begin(), prompt.end());
    const testing::CliResult a = RunCli(args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const json stats = json::parse(a.out);
    EXPECT_EQ(line["tokens"], stats["input_ids"].size()) << id;
    for (const char* key : {"health", "sinks", "expected_sinks", "sink_score",
                            "first_token_importance", "sink_eps", "sink_epsilon",
                            "back_half_sink_share", "threshold"}) {
      std::string mismatch;
      EXPECT_LE(test::MaxJsonDiff(line[key], stats[key], &mismatch), 1e-12)
          << id << " " << key << ": " << mismatch;
    }
    EXPECT_LE(test::AbsDiff(line["entropy"]["next_token_mean_nats"].get<double>(),
                            Mean(stats["next_token_entropy_nats"])),
              1e-12)
        << id;
    EXPECT_LE(test::AbsDiff(line["surprisal_mean_nats"].get<double>(),
                            Mean(stats["next_token_surprisal_nats"])),
              1e-12)
        << id;
  }
}

TEST(BatchCliTest, RefusalsChangeNothing) {
  const std::string input = WriteFile("batch-dup.jsonl", TextLine("x", "one") + TextLine("x", "two"));
  const std::string output = test::UniqueTempPath("batch-dup-out.jsonl");
  testing::CliResult r = RunCli({"batch", "--input", input, "--output", output});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 2 has the id \"x\" of line 1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(output));
  // An existing output without --resume: a usage error, the file untouched.
  const std::string good = WriteFile("batch-good.jsonl", TextLine("x", "one"));
  const std::string existing = WriteFile("batch-existing.jsonl", "keep me\n");
  r = RunCli({"batch", "--input", good, "--output", existing});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  std::ifstream in(existing);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep me\n");
  r = RunCli({"batch", "--input", good, "--output", output, "--concurrency", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--concurrency applies with --server only"), std::string::npos) << r.err;
  for (const char* shard : {"4/4", "-1/4", "0/0", "1", "a/b", "0/4/1"}) {
    r = RunCli({"batch", "--input", good, "--output", output, "--shard", shard});
    EXPECT_EQ(r.exit_code, 2) << shard;
    EXPECT_NE(r.err.find("is not INDEX/COUNT"), std::string::npos) << shard << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(output));
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// analyze --input: one line per prompt, each the `analyze --json` of that
// prompt run alone (but for forward_seconds), bad lines as error lines.
TEST(BatchCliTest, AnalyzeInputFileEqualsAnalyzePerPrompt) {
  const std::string input = WriteFile(
      "analyze-in.jsonl", TextLine("cat", kTexts[0]) + "{\"id\": 7, \"ids\": [464, 3797, 3332]}\n" +
                              "{\"id\": \"oov\", \"ids\": [50257]}\nnot JSON\n" +
                              TextLine("dogs", kTexts[1]));
  const testing::CliResult r = RunCli({"analyze", "--input", input, "--threads", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("{\"id\":\"cat\","), std::string::npos);
  EXPECT_NE(lines[2]["error"].get<std::string>().find("50257"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3]["line"], 4);
  const std::vector<std::pair<size_t, std::vector<std::string>>> alone = {
      {0, {"--text", kTexts[0]}}, {1, {"--ids", "464,3797,3332"}}, {4, {"--text", kTexts[1]}}};
  for (const auto& [index, prompt] : alone) {
    std::vector<std::string> args = {"analyze", "--json", "--threads", "1"};
    args.insert(args.end(), prompt.begin(), prompt.end());
    const testing::CliResult a = RunCli(args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    json expected = json::parse(a.out);
    json line = lines[index];
    ASSERT_FALSE(line.contains("error")) << line.dump().substr(0, 300);
    line.erase("id");
    line.erase("forward_seconds");
    expected.erase("forward_seconds");
    ASSERT_GT(expected.size(), 10u);
    std::string mismatch;
    EXPECT_EQ(test::MaxJsonDiff(line, expected, &mismatch), 0.0) << index << ": " << mismatch;
  }
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--export", "x.safetensors"}, "batch --export-dir"},
           {{"--viewer", "x.html"}, "--viewer applies to one prompt"},
           {{"--top", "3"}, "--top applies to one prompt"},
           {{"--ids", "1,2"}, "--ids describes one prompt"}}) {
    std::vector<std::string> args = {"analyze", "--input", input};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::CliResult u = RunCli(args);
    EXPECT_EQ(u.exit_code, 2) << message;
    EXPECT_NE(u.err.find(message), std::string::npos) << u.err;
    EXPECT_EQ(u.out, "");
  }
  std::filesystem::remove(input);
}

// batch --export-dir: each prompt's file is byte for byte the file
// `analyze --export` writes for that prompt alone, with the same selection;
// ids that make one file name are refused before anything is written.
TEST(BatchCliTest, ExportDirWritesEachPromptsAnalyzeExport) {
  const std::string input = WriteFile(
      "batch-export.jsonl", TextLine("a/b c", kTexts[0]) + "{\"id\": 7, \"ids\": [464, 3797, 3332]}\n" +
                                TextLine("\xC3\xA9t\xC3\xA9", kTexts[2]) +
                                "{\"id\": \"bad\", \"ids\": [50257]}\n");
  const std::string dir = test::UniqueTempPath("batch-exports");
  const std::string output = test::UniqueTempPath("batch-export-out.jsonl");
  const std::vector<std::string> selection = {"--attention-layers", "1,3-4", "--attention-heads",
                                              "0,5", "--attention-dtype", "float16"};
  std::vector<std::string> args = {"batch", "--input", input, "--output", output, "--export-dir",
                                   dir, "--threads", "1"};
  args.insert(args.end(), selection.begin(), selection.end());
  testing::CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // "bad" failed
  const std::vector<json> lines = ReadLines(output);
  ASSERT_EQ(lines.size(), 4u);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"a%2Fb%20c.safetensors", {"--text", kTexts[0]}},
      {"7.safetensors", {"--ids", "464,3797,3332"}},
      {"%C3%A9t%C3%A9.safetensors", {"--text", kTexts[2]}}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, prompt] = expected[i];
    const std::string path = dir + "/" + name;
    EXPECT_EQ(lines[i]["export"], path) << lines[i].dump().substr(0, 200);
    const std::string alone = test::UniqueTempPath("alone.safetensors");
    std::vector<std::string> a = {"analyze", "--export", alone, "--threads", "1"};
    a.insert(a.end(), prompt.begin(), prompt.end());
    a.insert(a.end(), selection.begin(), selection.end());
    const testing::CliResult single = RunCli(a);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    const std::string bytes = FileBytes(path);
    EXPECT_GT(bytes.size(), 1000u) << path;
    EXPECT_TRUE(bytes == FileBytes(alone)) << name << " differs from analyze --export";
    std::filesystem::remove(alone);
  }
  EXPECT_TRUE(lines[3].contains("error"));
  EXPECT_FALSE(lines[3].contains("export"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 3);  // none for "bad"
  EXPECT_EQ(r.err.find("wrote"), std::string::npos) << r.err;  // no line per file

  // Refusals write nothing: ids that collide as file names, a layer the
  // model lacks, a selection without --export-dir.
  const std::string fresh = test::UniqueTempPath("batch-exports-refused");
  const std::string collide =
      WriteFile("batch-collide.jsonl", "{\"id\": 7, \"text\": \"a\"}\n{\"id\": \"7\", \"text\": \"b\"}\n");
  const std::string out2 = test::UniqueTempPath("batch-refused-out.jsonl");
  r = RunCli({"batch", "--input", collide, "--output", out2, "--export-dir", fresh});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("lines 1 and 2 both make the file name 7.safetensors"), std::string::npos)
      << r.err;
  r = RunCli({"batch", "--input", input, "--output", out2, "--export-dir", fresh,
              "--attention-layers", "6"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--attention-layers"), std::string::npos) << r.err;
  r = RunCli({"batch", "--input", input, "--output", out2, "--attention-dtype", "float16"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give --export-dir DIR too"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_FALSE(std::filesystem::exists(out2));
  std::filesystem::remove_all(dir);
  for (const std::string& f : {input, output, collide}) std::filesystem::remove(f);
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(BatchCliTest, ResumeAfterKill9FinishesWithNoDuplicateId) {
  constexpr int kPrompts = 16;
  const std::string input = WriteFile("batch-resume.jsonl", Prompts(kPrompts));
  const std::string output = test::UniqueTempPath("batch-resume-out.jsonl");
  const std::string bin = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope";
  std::vector<std::string> args = {bin, "batch", "--input", input, "--output", output,
                                   "--threads", "1"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv.data(), environ), 0);
  // Killed once a few results are in, well before the end.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountLines(output) < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the batch finished before the kill";
  const int before = CountLines(output);
  ASSERT_LT(before, kPrompts);
  // A write cut off by the kill leaves half a line: --resume drops it.
  std::ofstream(output, std::ios::app) << "{\"id\":\"p1";
  const testing::CliResult r = RunCli({"batch", "--input", input, "--output", output, "--resume"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dropped a cut-off last line"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(before) + " skipped (--resume)"), std::string::npos) << r.err;
  const std::vector<json> lines = ReadLines(output);
  std::set<std::string> ids;
  for (const json& line : lines) {
    EXPECT_FALSE(line.contains("error")) << line.dump();
    EXPECT_TRUE(ids.insert(line["id"].get<std::string>()).second) << "duplicate " << line["id"];
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kPrompts));
  std::cout << before << " of " << kPrompts << " results before kill -9; " << lines.size()
            << " lines after --resume\n";
}

// attnscope_requests_total{rpc="Analyze",origin=ORIGIN,code="OK"} in a
// /metrics body; 0 when absent, -1 when unreadable.
int AnalyzeCount(const std::string& metrics, const std::string& origin) {
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("attnscope_requests_total{", 0) == 0 &&
        line.find("rpc=\"Analyze\"") != std::string::npos &&
        line.find("origin=\"" + origin + "\"") != std::string::npos &&
        line.find("code=\"OK\"") != std::string::npos) {
      double value = 0;
      if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return -1;
      return static_cast<int>(value);
    }
  }
  return 0;
}

// attnscope_in_flight_requests of a replica's /metrics; 0 when unreadable.
double InFlight(const testing::ServerProcess& replica) {
  const std::string address = replica.metrics_address();
  const metrics::testing::HttpReply reply =
      metrics::testing::HttpGet(std::stoi(address.substr(address.rfind(':') + 1)), "/metrics");
  const std::string key = "\nattnscope_in_flight_requests ";
  const size_t at = reply.body.find(key);
  return at == std::string::npos ? 0.0 : std::atof(reply.body.c_str() + at + key.size());
}

int BatchCount(const testing::ServerProcess& replica) {
  const std::string address = replica.metrics_address();
  return AnalyzeCount(
      metrics::testing::HttpGet(std::stoi(address.substr(address.rfind(':') + 1)), "/metrics").body,
      "batch");
}

// Three replicas; one is killed with -9 while it serves a request of the
// batch and started again on its port. The requests in flight on it fail
// with UNAVAILABLE and are retried on the others; once back it is given
// prompts again; the run ends with every prompt answered once.
TEST(BatchReplicaKillTest, AReplicaKilledAndRestartedMidBatchLosesNoPrompt) {
  std::unique_ptr<testing::ServerProcess> replicas[3];
  std::string target = "ipv4:";
  for (auto& replica : replicas) {
    std::string error;
    replica = testing::ServerProcess::Start({"--threads", "1"}, &error);
    ASSERT_NE(replica, nullptr) << error;
    target += (target.size() > 5 ? "," : "") + replica->address();
  }
  // Prompts of ~450 tokens, so that requests are in flight on the replica
  // when it dies, and enough of them that the run outlasts its restart.
  constexpr int kPrompts = 90;
  std::string prompts;
  for (int i = 0; i < kPrompts; ++i) {
    std::string text;
    for (int r = 0; r < 40; ++r) text += kTexts[static_cast<size_t>(i + r) % kTexts.size()] + " ";
    prompts += TextLine("p" + std::to_string(i), text);
  }
  const std::string input = WriteFile("batch-kill.jsonl", prompts);
  const std::string output = test::UniqueTempPath("batch-kill-out.jsonl");
  const std::string err_path = test::UniqueTempPath("batch-kill-err.txt");
  const std::string bin = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope";
  std::vector<std::string> args = {bin, "--server", target, "batch", "--input", input,
                                   "--output", output, "--concurrency", "3"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  // Killed while its metrics say it is serving a request, a few results in.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((CountLines(output) < 3 || InFlight(*replicas[0]) <= 0.0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int before = CountLines(output);
  const std::string port = replicas[0]->address().substr(replicas[0]->address().rfind(':') + 1);
  EXPECT_EQ(replicas[0]->StopWith(SIGKILL, 10.0), 128 + SIGKILL);
  // Started again on the same port while the batch runs on.
  std::string error;
  replicas[0] = testing::ServerProcess::Start({"--threads", "1", "--listen", "127.0.0.1:" + port},
                                              &error);
  ASSERT_NE(replicas[0], nullptr) << error;
  const int at_restart = CountLines(output);
  // The restarted replica is given prompts again: wait until it has answered
  // one (or the batch has ended, which the checks below then report).
  int status = 0;
  pid_t ended = 0;
  while ((ended = waitpid(pid, &status, WNOHANG)) == 0 && BatchCount(*replicas[0]) < 1 &&
         std::chrono::steady_clock::now() < deadline + std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int restarted_answered = BatchCount(*replicas[0]);
  if (ended == 0) {
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "some prompt failed after the kill";
  ASSERT_LT(before, kPrompts) << "the batch finished before the kill";
  ASSERT_LT(at_restart, kPrompts) << "the batch finished before the restart";
  EXPECT_GE(restarted_answered, 1) << "the restarted replica was given no prompt";
  std::set<std::string> ids;
  std::map<std::string, int> per_replica;
  const std::vector<json> lines = ReadLines(output);
  for (const json& line : lines) {
    EXPECT_FALSE(line.contains("error")) << line.dump().substr(0, 300);
    EXPECT_TRUE(ids.insert(line["id"].get<std::string>()).second) << "duplicate " << line["id"];
    if (line.contains("replica")) ++per_replica[line["replica"].get<std::string>()];
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kPrompts));
  EXPECT_EQ(lines.size(), static_cast<size_t>(kPrompts));
  // Every answer the restarted process counted is a line of the output.
  EXPECT_GE(per_replica["ipv4:" + replicas[0]->address()], BatchCount(*replicas[0]));
  // The requests in flight on the killed replica were tried again.
  std::ifstream err_in(err_path);
  const std::string err(std::istreambuf_iterator<char>(err_in), {});
  EXPECT_NE(err.find(" retried"), std::string::npos) << err;
  std::cout << err << before << " of " << kPrompts << " results before the kill, " << at_restart
            << " at the restart; the restarted replica answered " << BatchCount(*replicas[0])
            << "; per replica:";
  for (const auto& [replica, count] : per_replica) std::cout << " " << replica << "=" << count;
  std::cout << "\n";
}

// Three replicas of the bundled model, started once for the suite.
class BatchReplicasTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = new std::string("ipv4:");
    for (auto& replica : replicas_) {
      std::string error;
      replica = testing::ServerProcess::Start({"--threads", "1"}, &error).release();
      ASSERT_NE(replica, nullptr) << error;
      *target_ += (target_->size() > 5 ? "," : "") + replica->address();
    }
  }
  static void TearDownTestSuite() {
    for (auto*& replica : replicas_) {
      delete replica;
      replica = nullptr;
    }
    delete target_;
  }
  static testing::ServerProcess* replicas_[3];
  static std::string* target_;
};
testing::ServerProcess* BatchReplicasTest::replicas_[3] = {nullptr, nullptr, nullptr};
std::string* BatchReplicasTest::target_ = nullptr;

TEST_F(BatchReplicasTest, SpreadsPromptsEvenlyAndGivesTheLocalNumbers) {
  constexpr int kPrompts = 30;
  const std::string input = WriteFile("batch-remote.jsonl", Prompts(kPrompts));
  const std::string remote = test::UniqueTempPath("batch-remote-out.jsonl");
  const testing::CliResult r =
      RunCli({"--server", *target_, "batch", "--input", input, "--output", remote,
              "--concurrency", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, int> per_replica;
  std::map<std::string, json> remote_by_id;
  for (const json& line : ReadLines(remote)) {
    ASSERT_TRUE(line.contains("replica")) << line.dump().substr(0, 200);
    ++per_replica[line["replica"].get<std::string>()];
    remote_by_id[line["id"].get<std::string>()] = line;
  }
  EXPECT_EQ(remote_by_id.size(), static_cast<size_t>(kPrompts));
  ASSERT_EQ(per_replica.size(), 3u) << r.err;
  for (const auto& [replica, count] : per_replica) {
    EXPECT_GE(count, 8) << replica;  // 10 +- 20%
    EXPECT_LE(count, 12) << replica;
    std::cout << replica << ": " << count << " prompts\n";
  }
  for (const auto* replica : replicas_) {
    EXPECT_EQ(per_replica.count("ipv4:" + replica->address()), 1u) << replica->address();
    // Each replica counted its prompts as a dataset's (the Grafana panel
    // "Dataset runs"), none as a user's.
    const std::string metrics_address = replica->metrics_address();
    const std::string body =
        metrics::testing::HttpGet(std::stoi(metrics_address.substr(metrics_address.rfind(':') + 1)),
                                  "/metrics")
            .body;
    EXPECT_EQ(AnalyzeCount(body, "batch"), per_replica["ipv4:" + replica->address()])
        << replica->address();
    EXPECT_EQ(AnalyzeCount(body, "user"), 0) << replica->address();
  }
  // The first six prompts locally, on one thread as each replica runs (a
  // BLAS's sums, unlike oneDNN's, depend on how many threads share them):
  // the same numbers.
  const std::string local_input = WriteFile("batch-local.jsonl", Prompts(6));
  const std::string local = test::UniqueTempPath("batch-local-out.jsonl");
  const testing::CliResult l =
      RunCli({"batch", "--input", local_input, "--output", local, "--threads", "1"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  for (json line : ReadLines(local)) {
    json other = remote_by_id[line["id"].get<std::string>()];
    for (json* j : {&line, &other}) {
      j->erase("replica");
      j->erase("forward_seconds");
    }
    std::string mismatch;
    EXPECT_EQ(test::MaxJsonDiff(line, other, &mismatch), 0.0) << line["id"] << ": " << mismatch;
  }
}

// Over the replicas: tokenize --input and analyze --input give the local
// lines, and batch --export-dir the local files, byte for byte.
TEST_F(BatchReplicasTest, InputFilesAndExportsGiveTheLocalResults) {
  const std::string input = WriteFile("remote-lines.jsonl", Prompts(3) + "{\"id\": \"bad\", \"ids\": [50257]}\n");
  const testing::CliResult local_tokens = RunCli({"tokenize", "--input", input});
  const testing::CliResult remote_tokens = RunCli({"--server", *target_, "tokenize", "--input", input});
  EXPECT_EQ(local_tokens.exit_code, 1);  // the ids line
  EXPECT_EQ(remote_tokens.exit_code, 1) << remote_tokens.err;
  EXPECT_EQ(remote_tokens.out, local_tokens.out);
  EXPECT_EQ(JsonLines(local_tokens.out).size(), 4u);

  const testing::CliResult local = RunCli({"analyze", "--input", input, "--threads", "1"});
  const testing::CliResult remote = RunCli({"--server", *target_, "analyze", "--input", input});
  EXPECT_EQ(local.exit_code, 1);
  EXPECT_EQ(remote.exit_code, 1) << remote.err;
  std::vector<json> local_lines = JsonLines(local.out), remote_lines = JsonLines(remote.out);
  ASSERT_EQ(local_lines.size(), 4u);
  ASSERT_EQ(remote_lines.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    local_lines[i].erase("forward_seconds");
    remote_lines[i].erase("forward_seconds");
    std::string mismatch;
    EXPECT_EQ(test::MaxJsonDiff(local_lines[i], remote_lines[i], &mismatch), 0.0) << i << mismatch;
  }
  EXPECT_NE(remote_lines[3]["error"].get<std::string>().find("50257"), std::string::npos);

  const std::string local_dir = test::UniqueTempPath("exports-local");
  const std::string remote_dir = test::UniqueTempPath("exports-remote");
  const std::string local_out = test::UniqueTempPath("exports-local.jsonl");
  const std::string remote_out = test::UniqueTempPath("exports-remote.jsonl");
  const testing::CliResult l =
      RunCli({"batch", "--input", input, "--output", local_out, "--export-dir", local_dir,
              "--attention-layers", "2", "--threads", "1"});
  const testing::CliResult rr =
      RunCli({"--server", *target_, "batch", "--input", input, "--output", remote_out,
              "--export-dir", remote_dir, "--attention-layers", "2", "--concurrency", "3"});
  EXPECT_EQ(l.exit_code, 1) << l.err;
  EXPECT_EQ(rr.exit_code, 1) << rr.err;
  for (const char* name : {"p0.safetensors", "p1.safetensors", "p2.safetensors"}) {
    const std::string bytes = FileBytes(remote_dir + "/" + name);
    EXPECT_GT(bytes.size(), 1000u) << name;
    EXPECT_TRUE(bytes == FileBytes(local_dir + "/" + name)) << name << " differs";
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(remote_dir), {}), 3);
  std::filesystem::remove_all(local_dir);
  std::filesystem::remove_all(remote_dir);
  for (const std::string& f : {input, local_out, remote_out}) std::filesystem::remove(f);
}

}  // namespace
}  // namespace attnscope
