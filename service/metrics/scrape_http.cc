#include "service/metrics/scrape_http.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace attnscope::metrics {
namespace {

// The content type of Prometheus's text exposition format 0.0.4.
constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Debian's abseil has its own string_view, which StrCat wants.
absl::string_view Abs(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string Response(std::string_view status, std::string_view content_type,
                     std::string_view extra_headers, const std::string& body, bool with_body) {
  return absl::StrCat("HTTP/1.1 ", Abs(status), "\r\nContent-Type: ", Abs(content_type),
                      "\r\nContent-Length: ", body.size(), "\r\n", Abs(extra_headers),
                      "Connection: close\r\n\r\n", with_body ? body : std::string());
}

std::string TextResponse(std::string_view status, std::string_view extra_headers,
                         std::string_view message) {
  return Response(status, "text/plain; charset=utf-8", extra_headers, std::string(message),
                  /*with_body=*/true);
}

// The words of the request line ("GET /metrics HTTP/1.1").
std::vector<std::string_view> RequestLineWords(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> words;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    if (space != 0) words.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return words;
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(std::string_view listen) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics listen address '", Abs(listen),
                     "' has no port: give host:port, e.g. 127.0.0.1:9464"));
  }
  std::string_view host = listen.substr(0, colon);
  const std::string_view port_text = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(Abs(port_text), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics listen address '", Abs(listen),
                                                   "': port '", Abs(port_text),
                                                   "' is not a number in 0..65535"));
  }
  return ListenAddress{std::string(host), port};
}

bool HasCompleteHead(std::string_view received) {
  return received.find("\r\n\r\n") != std::string_view::npos ||
         received.find("\n\n") != std::string_view::npos;
}

std::string BuildScrapeResponse(std::string_view request_head,
                                const std::function<std::string()>& metrics_text) {
  const std::vector<std::string_view> parts = RequestLineWords(request_head);
  if (parts.size() != 3 || parts[2].substr(0, 7) != "HTTP/1.") {
    return TextResponse("400 Bad Request", "", "expected an HTTP/1.x request line\n");
  }
  const std::string_view method = parts[0];
  const std::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") {
    return TextResponse("404 Not Found", "",
                        absl::StrCat("no resource ", Abs(path), "; metrics are at /metrics\n"));
  }
  if (method != "GET" && method != "HEAD") {
    return TextResponse("405 Method Not Allowed", "Allow: GET, HEAD\r\n",
                        absl::StrCat("method ", Abs(method), " not allowed; use GET\n"));
  }
  return Response("200 OK", kMetricsContentType, "", metrics_text(),
                  /*with_body=*/method == "GET");
}

std::string HeadTooLargeResponse() {
  return TextResponse("431 Request Header Fields Too Large", "",
                      absl::StrCat("request head over ", kMaxRequestHeadBytes, " bytes\n"));
}

}  // namespace attnscope::metrics
