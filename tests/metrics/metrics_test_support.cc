#include "tests/metrics/metrics_test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

extern char** environ;

namespace attnscope::metrics::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string TempFile(const std::string& contents) {
  char path[] = "/tmp/attnscope-metrics-test-XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) {
    std::ofstream(path, std::ios::binary) << contents;
    close(fd);
  }
  return path;
}

}  // namespace

HttpReply SendRaw(int port, std::string_view request) {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return reply;
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string received;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) received.append(buffer, got);
  close(fd);
  const std::size_t split = received.find("\r\n\r\n");
  if (split == std::string::npos || received.compare(0, 7, "HTTP/1.") != 0) return reply;
  reply.status = std::atoi(received.c_str() + 9);
  reply.head = received.substr(0, split);
  reply.body = received.substr(split + 4);
  return reply;
}

HttpReply HttpGet(int port, const std::string& path) {
  return SendRaw(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n");
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text) {
  const std::string in_path = TempFile(stdin_text);
  const std::string out_path = TempFile("");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ProcessResult result;
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  result.output = Slurp(out_path);
  unlink(in_path.c_str());
  unlink(out_path.c_str());
  return result;
}

ProcessResult PromtoolCheckMetrics(const std::string& exposition) {
  return RunProcess({ATTNSCOPE_PROMTOOL, "check", "metrics"}, exposition);
}

std::string Exposition(const ServiceMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.Collector()());
}

bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l == line) return true;
  }
  return false;
}

}  // namespace attnscope::metrics::testing
