// Datasets through replicas: prompts/s of `attnscope batch` over 1, 2 and 3
// real attnscope-server replicas on loopback (the bundled model), one
// replica at --concurrency 1 against the default, and the same prompts as
// separate `attnscope --server ... analyze --json` calls (one process each,
// what a script without batch does). Prints each row's wall time, prompts/s,
// the spread over replicas (from the result lines' "replica") and the ratio
// to the separate calls.
//
// Usage: batch_bench [--prompts N] [--threads T]
//   N prompts (default 60) of 40-200 tokens from tests/data/english-sample.txt;
//   T compute threads per replica (default 1).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace attnscope::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs argv (argv[0] a path) with stdout and stderr to `log`; its exit code.
int Run(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One attnscope-server; its address from its first stdout line.
struct Replica {
  pid_t pid = -1;
  std::string address;

  bool Start(int threads) {
    int out[2];
    if (pipe(out) != 0) return false;
    const std::string binary = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server";
    const std::string thread_count = std::to_string(threads);
    std::vector<const char*> args = {binary.c_str(), "--listen", "127.0.0.1:0", "--metrics-listen",
                                     "127.0.0.1:0", "--threads",
                                     thread_count.c_str(), "--max-concurrent", "1", nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const bool spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                                     const_cast<char* const*>(args.data()), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    std::string line;
    char c = 0;
    while (spawned && read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    close(out[0]);
    const std::string prefix = "attnscope-server listening on ";
    if (line.rfind(prefix, 0) != 0) return false;
    address = line.substr(prefix.size());
    return true;
  }
  ~Replica() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Prompts of `words` words each, taken in turn from the sample text.
std::vector<std::string> Prompts(int n) {
  std::ifstream in(std::string(ATTNSCOPE_TEST_DATA_DIR) + "/english-sample.txt");
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<std::string> prompts;
  size_t at = 0;
  for (int i = 0; i < n && !words.empty(); ++i) {
    const int length = 30 + (i * 37) % 120;  // 30..149 words
    std::string text;
    for (int k = 0; k < length; ++k, at = (at + 1) % words.size()) {
      text += (k ? " " : "") + words[at];
    }
    prompts.push_back(text);
  }
  return prompts;
}

struct Row {
  std::string what;
  double seconds = 0;
  std::string spread;
};

// `attnscope --server TARGET batch` over the prompts file; the spread of the
// result lines over replicas ("a/b/c").
bool RunBatch(const std::string& target, const std::string& input, const fs::path& dir,
              const std::vector<std::string>& extra, Row* row) {
  static int runs = 0;
  const std::string output = (dir / ("out-" + std::to_string(++runs) + ".jsonl")).string();
  std::vector<std::string> args = {std::string(ATTNSCOPE_BIN_DIR) + "/attnscope", "--server", target,
                                   "batch", "--input", input, "--output", output};
  args.insert(args.end(), extra.begin(), extra.end());
  const Clock::time_point start = Clock::now();
  const int code = Run(args, (dir / "batch.log").string());
  row->seconds = Since(start);
  if (code != 0) {
    std::fprintf(stderr, "batch exited %d; see %s\n", code, (dir / "batch.log").c_str());
    return false;
  }
  std::map<std::string, int> per_replica;
  std::ifstream results(output);
  for (std::string line; std::getline(results, line);) {
    ++per_replica[nlohmann::json::parse(line).value("replica", "?")];
  }
  for (const auto& [replica, count] : per_replica) {
    row->spread += (row->spread.empty() ? "" : "/") + std::to_string(count);
  }
  return true;
}

int Main(int argc, char** argv) {
  int n = 60, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--prompts") n = std::atoi(argv[i + 1]);
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
  }
  if (n < 1 || threads < 1) {
    std::fprintf(stderr, "usage: batch_bench [--prompts N] [--threads T]\n");
    return 2;
  }
  char tmpl[] = "/tmp/attnscope-batch-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const fs::path dir = tmpl;
  const std::vector<std::string> prompts = Prompts(n);
  const std::string input = (dir / "prompts.jsonl").string();
  {
    std::ofstream out(input);
    for (size_t i = 0; i < prompts.size(); ++i) {
      out << nlohmann::json{{"id", i}, {"text", prompts[i]}}.dump() << "\n";
    }
  }
  std::printf("batch_bench: %d prompts of 30-149 words, bundled model, %d thread(s) per replica, "
              "--max-concurrent 1\nCPU: %s, %u cores; load average %s\n",
              n, threads, CpuName().c_str(), std::thread::hardware_concurrency(),
              LoadAverage().c_str());
  std::vector<Row> rows;
  Replica replicas[3];
  std::string target = "ipv4:";
  for (int k = 0; k < 3; ++k) {
    if (!replicas[k].Start(threads)) {
      std::fprintf(stderr, "attnscope-server did not start\n");
      return 1;
    }
    target += (k ? "," : "") + replicas[k].address;
    Row row;
    row.what = "batch, " + std::to_string(k + 1) + " replica(s), default concurrency";
    if (!RunBatch(target, input, dir, {}, &row)) return 1;
    rows.push_back(row);
    if (k == 0) {
      Row one;
      one.what = "batch, 1 replica, --concurrency 1";
      if (!RunBatch(target, input, dir, {"--concurrency", "1"}, &one)) return 1;
      rows.push_back(one);
    }
  }
  // The separate calls, against the first replica alone.
  Row separate;
  separate.what = "separate analyze calls, 1 replica";
  const Clock::time_point start = Clock::now();
  for (const std::string& text : prompts) {
    const int code = Run({std::string(ATTNSCOPE_BIN_DIR) + "/attnscope", "--server",
                          replicas[0].address, "analyze", "--json", "--text", text},
                         (dir / "analyze.log").string());
    if (code != 0) {
      std::fprintf(stderr, "analyze exited %d; see %s\n", code, (dir / "analyze.log").c_str());
      return 1;
    }
  }
  separate.seconds = Since(start);
  separate.spread = std::to_string(n);
  rows.push_back(separate);

  std::printf("\n| run | wall s | prompts/s | per replica | vs separate calls |\n|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    std::printf("| %s | %.2f | %.2f | %s | %.2fx |\n", row.what.c_str(), row.seconds,
                n / row.seconds, row.spread.c_str(), separate.seconds / row.seconds);
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) { return attnscope::bench::Main(argc, argv); }
