// Runs build/bin/attnscope (or another program of build/bin) as a separate
// process, as a user would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  int64_t peak_rss_kib = -1;  // the process's peak resident set (wait4's ru_maxrss); -1: unknown
};

// Runs `attnscope args...` (arguments passed verbatim, no shell parsing).
CliResult RunCli(const std::vector<std::string>& args);
// The same with `stdin_bytes` as its standard input.
CliResult RunCliWithStdin(const std::vector<std::string>& args, const std::string& stdin_bytes);

// Runs `attnscope <arguments>` on a pseudo-terminal (util-linux's script);
// `arguments` is one shell string (it goes inside single quotes). out holds
// everything the terminal showed (stdout and stderr), exit_code the wait
// status pclose gave (0: exited 0).
CliResult RunCliOnTerminal(const std::string& arguments);

// Runs build/bin/`program` with `args`; after `timeout_seconds` it is killed
// (SIGKILL) and exit_code is -1. When it cannot be started at all (e.g. the
// kernel refuses an argument list that long) exit_code is -1 and err ends
// with posix_spawn's reason.
CliResult RunBinary(const std::string& program, const std::vector<std::string>& args,
                    double timeout_seconds = 300);

}  // namespace attnscope::testing
