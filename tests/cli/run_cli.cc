#include "tests/cli/run_cli.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace attnscope::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for `pid` until `deadline`; SIGKILL and -1 after it. `peak_rss_kib`
// receives the child's own peak resident set.
int WaitForExit(pid_t pid, std::chrono::steady_clock::time_point deadline, int64_t* peak_rss_kib) {
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, WNOHANG, &usage) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling an exit, bounded
  }
  *peak_rss_kib = usage.ru_maxrss;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// Runs build/bin/`program` with `stdin_bytes` as its standard input.
static CliResult RunProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stdin_bytes, double timeout_seconds) {
  const std::string binary = std::string(ATTNSCOPE_BIN_DIR) + "/" + program;
  char out_path[] = "/tmp/attnscope-cli-out-XXXXXX";
  char err_path[] = "/tmp/attnscope-cli-err-XXXXXX";
  const int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  char in_path[] = "/tmp/attnscope-cli-in-XXXXXX";
  const int in_fd = mkstemp(in_path);
  std::ofstream(in_path, std::ios::binary) << stdin_bytes;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path, O_RDONLY, 0);
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  CliResult result;
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  if (spawned == 0) {
    result.exit_code = WaitForExit(
        pid, std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3)),
        &result.peak_rss_kib);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  unlink(in_path);
  result.out = Slurp(out_path);
  result.err = Slurp(err_path);
  if (spawned != 0) result.err += "posix_spawn " + binary + ": " + std::strerror(spawned) + "\n";
  unlink(out_path);
  unlink(err_path);
  return result;
}

CliResult RunCli(const std::vector<std::string>& args) {
  return RunProgram("attnscope", args, {}, 300);
}

CliResult RunCliWithStdin(const std::vector<std::string>& args, const std::string& stdin_bytes) {
  return RunProgram("attnscope", args, stdin_bytes, 300);
}

CliResult RunBinary(const std::string& program, const std::vector<std::string>& args,
                    double timeout_seconds) {
  return RunProgram(program, args, {}, timeout_seconds);
}

CliResult RunCliOnTerminal(const std::string& arguments) {
  const std::string command = std::string("script -qec '") + ATTNSCOPE_BIN_DIR + "/attnscope " +
                              arguments + "' /dev/null";
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) result.out.append(buffer, n);
  result.exit_code = pclose(pipe);
  return result;
}

}  // namespace attnscope::testing
