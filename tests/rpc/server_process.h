// Runs the real build/bin/attnscope-server as a child process on loopback
// port 0 and reads the addresses it prints, as a deployment would.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace attnscope::testing {

class ServerProcess {
 public:
  // Starts the server with `args` plus --metrics-listen 127.0.0.1:0 and
  // (unless `args` gives --listen) --listen 127.0.0.1:0, and waits (up to 120 s) for its
  // "listening on" and "metrics on" lines. nullptr (with the reason in
  // *error) if it exits or prints something else first.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args,
                                              std::string* error);
  // Sends SIGKILL if the process is still running.
  ~ServerProcess();

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  const std::string& metrics_address() const { return metrics_address_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits up to `timeout_seconds` for the exit; returns
  // the exit code (128 + signal number if killed by one), or -1 on timeout.
  int StopWith(int signal, double timeout_seconds);
  // Sends `signal` without waiting.
  void Signal(int signal);
  // Waits up to `timeout_seconds` for the exit; the exit code as StopWith.
  int WaitForExit(double timeout_seconds);
  // Waits up to `timeout_seconds` until stderr contains `text`.
  bool WaitForStderr(const std::string& text, double timeout_seconds) const;
  // Everything the server wrote to stderr so far.
  std::string Stderr() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string address_;
  std::string metrics_address_;
};

}  // namespace attnscope::testing
