// A long-running child process of a test (a server), with its stdout read
// line by line and its stderr kept in a file.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace attnscope::metrics::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv`. nullptr, with the reason in *error,
  // if it cannot be started.
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             std::string* error);
  // Stops the process (Stop(10)) if it still runs.
  ~ChildProcess();

  // The next line of stdout (without '\n'); false on EOF or after
  // `timeout_seconds`.
  bool ReadLine(std::string* line, double timeout_seconds);
  // SIGTERM, then SIGKILL after `timeout_seconds`; returns the exit code
  // (128 + signal if killed by one).
  int Stop(double timeout_seconds);
  // Waits up to `timeout_seconds` for the process to end by itself (then
  // SIGKILL); returns the exit code as Stop does.
  int Wait(double timeout_seconds);
  // SIGKILL (a crash: nothing is drained), waits for the exit; returns
  // 128 + SIGKILL, or -1 if the process was already stopped.
  int Kill();
  // Everything written to stderr so far.
  std::string Stderr() const;

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string stdout_buffer_;
  std::string stderr_path_;
};

// The rest of the first stdout line of `process` that starts with `prefix`
// (lines before it are skipped); "" if none comes within `timeout_seconds`
// a line.
std::string ReadAfter(ChildProcess& process, const std::string& prefix,
                      double timeout_seconds = 120);

// A TCP port on 127.0.0.1 that was free a moment ago (bound and released).
int FreeLoopbackPort();

}  // namespace attnscope::metrics::testing
