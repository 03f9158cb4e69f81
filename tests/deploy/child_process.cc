#include "tests/deploy/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace attnscope::metrics::testing {

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  std::string* error) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  char err_path[] = "/tmp/attnscope-child-err-XXXXXX";
  const int err_fd = mkstemp(err_path);
  child->stderr_path_ = err_path;
  int out[2];
  if (err_fd < 0 || pipe2(out, O_CLOEXEC) != 0) {
    *error = std::string("pipe/mkstemp: ") + std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&child->pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err_fd);
  child->stdout_fd_ = out[0];
  if (rc != 0) {
    *error = argv[0] + ": " + std::strerror(rc);
    child->pid_ = -1;
    return nullptr;
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Stop(10);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  unlink(stderr_path_.c_str());
}

bool ChildProcess::ReadLine(std::string* line, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
  for (;;) {
    const std::size_t newline = stdout_buffer_.find('\n');
    if (newline != std::string::npos) {
      *line = stdout_buffer_.substr(0, newline);
      stdout_buffer_.erase(0, newline + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&fd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[1024];
    const ssize_t got = read(stdout_fd_, buffer, sizeof(buffer));
    if (got <= 0) return false;
    stdout_buffer_.append(buffer, static_cast<std::size_t>(got));
  }
}

int ChildProcess::Stop(double timeout_seconds) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  return Wait(timeout_seconds);
}

int ChildProcess::Wait(double timeout_seconds) {
  if (pid_ <= 0) return -1;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadAfter(ChildProcess& process, const std::string& prefix, double timeout_seconds) {
  std::string line;
  while (process.ReadLine(&line, timeout_seconds)) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

int ChildProcess::Kill() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ChildProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace attnscope::metrics::testing
