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

}  // namespace attnscope::testing
