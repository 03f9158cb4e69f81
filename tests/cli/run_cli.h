// Runs build/bin/attnscope as a separate process, as a user would.
#pragma once

#include <string>
#include <vector>

namespace attnscope::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `attnscope args...` (arguments passed verbatim, no shell parsing).
CliResult RunCli(const std::vector<std::string>& args);
// The same with `stdin_bytes` as its standard input.
CliResult RunCliWithStdin(const std::vector<std::string>& args, const std::string& stdin_bytes);

}  // namespace attnscope::testing
