// The HTTP side of MetricsServer, free of sockets so it can be tested on
// strings: parsing the listen address and answering one request head.
// Internal to service/metrics (and its tests).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace attnscope::metrics {

// The longest request head (request line and headers) read from a scraper;
// a longer one is answered 431.
inline constexpr std::size_t kMaxRequestHeadBytes = 8192;

struct ListenAddress {
  std::string host;  // "" means every interface; brackets of "[::1]" removed.
  int port = 0;      // 0..65535; 0 picks a free port.
};

// Parses "host:port", "[ipv6]:port" or ":port"; the host is meant to be an
// IP address or "localhost" (MetricsServer checks). InvalidArgument naming the
// value when the port is missing, not a number or above 65535.
absl::StatusOr<ListenAddress> ParseListenAddress(std::string_view listen);

// True once `received` holds a whole request head (ends in an empty line).
bool HasCompleteHead(std::string_view received);

// The full HTTP/1.1 response (status line, headers, body; "Connection:
// close") to `request_head`. GET and HEAD of /metrics (any query string) get
// 200 with the Prometheus text format from `metrics_text`, which is called
// only then; other paths 404, other methods 405, garbage 400.
std::string BuildScrapeResponse(std::string_view request_head,
                                const std::function<std::string()>& metrics_text);

// The 431 response for a request head longer than kMaxRequestHeadBytes.
std::string HeadTooLargeResponse();

}  // namespace attnscope::metrics
