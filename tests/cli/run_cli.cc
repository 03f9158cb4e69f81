#include "tests/cli/run_cli.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

extern char** environ;

namespace attnscope::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

CliResult RunCli(const std::vector<std::string>& args) { return RunCliWithStdin(args, {}); }

CliResult RunCliWithStdin(const std::vector<std::string>& args, const std::string& stdin_bytes) {
  const std::string binary = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope";
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
  if (posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  unlink(in_path);
  result.out = Slurp(out_path);
  result.err = Slurp(err_path);
  unlink(out_path);
  unlink(err_path);
  return result;
}

}  // namespace attnscope::testing
