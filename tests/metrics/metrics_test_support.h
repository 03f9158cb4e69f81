// Helpers of the metrics tests: a raw HTTP/1.1 client for loopback ports and
// a runner for Debian's promtool.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "service/metrics/service_metrics.h"

namespace attnscope::metrics::testing {

struct HttpReply {
  int status = 0;    // 0 if the connection failed or the reply was garbage.
  std::string head;  // Status line and headers.
  std::string body;
};

// Sends `request` verbatim to 127.0.0.1:`port` and reads until the server
// closes (5 s at most). Understands HTTP/1.0 and 1.1 replies without chunked
// encoding (send HTTP/1.0 requests to servers that may chunk).
HttpReply SendRaw(int port, std::string_view request);

// GET `path` from 127.0.0.1:`port`.
HttpReply HttpGet(int port, const std::string& path);

struct ProcessResult {
  int exit_code = -1;  // 128 + signal if killed; -1 if it could not start.
  std::string output;  // stdout and stderr, interleaved.
};

// Runs argv[0] (a path) with `stdin_text` on its standard input.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text);

// `promtool check metrics` on an exposition text.
ProcessResult PromtoolCheckMetrics(const std::string& exposition);

// The text exposition of `metrics`, serialized directly (no HTTP).
std::string Exposition(const ServiceMetrics& metrics);

// Whether `text` has the line `line` exactly.
bool HasLine(const std::string& text, const std::string& line);

}  // namespace attnscope::metrics::testing
