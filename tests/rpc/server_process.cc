#include "tests/rpc/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace attnscope::testing {
namespace {

constexpr char kListening[] = "attnscope-server listening on ";
constexpr char kMetrics[] = "metrics on ";

// Reads one line from `fd`, waiting at most until `deadline`. False on EOF
// or timeout.
bool ReadLine(int fd, std::chrono::steady_clock::time_point deadline, std::string* line) {
  line->clear();
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c = 0;
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

bool TakePrefix(const std::string& line, const std::string& prefix, std::string* rest) {
  if (line.rfind(prefix, 0) != 0) return false;
  *rest = line.substr(prefix.size());
  return true;
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args,
                                                    std::string* error) {
  const std::string binary = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server";
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  int out[2];
  if (pipe(out) != 0) return nullptr;
  char err_path[] = "/tmp/attnscope-server-err-XXXXXX";
  const int err_fd = mkstemp(err_path);
  server->stderr_path_ = err_path;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  // --listen in `args` (a replica restarted on its port) replaces the default.
  const bool listens = std::find(args.begin(), args.end(), "--listen") != args.end();
  std::vector<std::string> all = {binary, "--metrics-listen", "127.0.0.1:0"};
  if (!listens) all.insert(all.end(), {"--listen", "127.0.0.1:0"});
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int spawned = posix_spawn(&server->pid_, binary.c_str(), &actions, nullptr, argv.data(),
                                  environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err_fd);
  server->stdout_fd_ = out[0];
  if (spawned != 0) {
    *error = "cannot start " + binary;
    server->pid_ = -1;
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string line;
  if (!ReadLine(out[0], deadline, &line) || !TakePrefix(line, kListening, &server->address_) ||
      !ReadLine(out[0], deadline, &line) ||
      !TakePrefix(line, kMetrics, &server->metrics_address_)) {
    *error = "the server did not start: last line '" + line + "', stderr: " + server->Stderr();
    return nullptr;
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) StopWith(SIGKILL, 30);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
}

int ServerProcess::StopWith(int signal, double timeout_seconds) {
  if (pid_ <= 0) return -1;
  Signal(signal);
  return WaitForExit(timeout_seconds);
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

bool ServerProcess::WaitForStderr(const std::string& text, double timeout_seconds) const {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
  while (Stderr().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a file, bounded
  }
  return true;
}

int ServerProcess::WaitForExit(double timeout_seconds) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string ServerProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace attnscope::testing
