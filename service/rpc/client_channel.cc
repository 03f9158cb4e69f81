#include "service/rpc/client_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpc/grpc.h"
#include "grpc/support/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "service/rpc/transport_security.h"

namespace attnscope::rpc {

const char kRoundRobinServiceConfig[] = R"({"loadBalancingConfig":[{"round_robin":{}}]})";

namespace {
// gRPC's default caps reconnect attempts at 120 s apart; a replica that comes
// back should not wait that long for traffic.
constexpr int kMaxReconnectBackoffMs = 5000;
constexpr int kInitialReconnectBackoffMs = 250;
}  // namespace

namespace {

// "HOST:PORT" or "[V6]:PORT" into host and port; false (with `why`) when
// the host is empty, the port missing, not a number or out of 1..65535, or
// an IPv6 address lacks its brackets.
bool SplitHostPort(absl::string_view text, std::string* host, std::string* why) {
  absl::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      *why = "an IPv6 address opened with '[' is not closed with ']'";
      return false;
    }
    *host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      *why = "no port after the address: give [ADDR]:PORT";
      return false;
    }
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) {
      *why = "no port: give HOST:PORT";
      return false;
    }
    *host = std::string(text.substr(0, colon));
    if (host->find(':') != std::string::npos) {
      *why = "an IPv6 address goes in brackets: [ADDR]:PORT";
      return false;
    }
    port = text.substr(colon + 1);
  }
  if (host->empty()) {
    *why = "the host is empty";
    return false;
  }
  int value = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (value = std::stoi(std::string(port))) < 1 || value > 65535) {
    *why = absl::StrCat("the port '", port, "' is not a number in 1..65535");
    return false;
  }
  return true;
}

// ipv4:/ipv6: lists: every entry an address of that family with a port.
absl::Status CheckAddressList(absl::string_view list, int family) {
  if (list.empty()) return absl::InvalidArgumentError("the address list is empty");
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    std::string host, why;
    if (!SplitHostPort(entry, &host, &why)) {
      return absl::InvalidArgumentError(absl::StrCat("'", entry, "': ", why));
    }
    unsigned char address[sizeof(struct in6_addr)];
    if (inet_pton(family, host.c_str(), address) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", host, "' is not an ", family == AF_INET ? "IPv4" : "IPv6", " address"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTargetParts(const std::string& target) {
  const absl::string_view t(target);
  if (absl::StartsWith(t, "ipv4:")) return CheckAddressList(t.substr(5), AF_INET);
  if (absl::StartsWith(t, "ipv6:")) return CheckAddressList(t.substr(5), AF_INET6);
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:")) {
    if (t.substr(t.find(':') + 1).empty()) {
      return absl::InvalidArgumentError("the socket path is empty");
    }
    return absl::OkStatus();
  }
  absl::string_view endpoint = t;
  if (absl::StartsWith(t, "dns:")) {
    endpoint = t.substr(4);
    if (absl::StartsWith(endpoint, "//")) {  // dns://AUTHORITY/HOST:PORT
      const size_t slash = endpoint.find('/', 2);
      if (slash == absl::string_view::npos) {
        return absl::InvalidArgumentError("expected dns:///HOST:PORT");
      }
      endpoint = endpoint.substr(slash + 1);
    }
  }
  std::string host, why;
  if (!SplitHostPort(endpoint, &host, &why)) return absl::InvalidArgumentError(why);
  return absl::OkStatus();
}

grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kRoundRobinServiceConfig);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  return args;
}
}  // namespace

void QuietGrpcLogs() {
  gpr_set_log_function([](gpr_log_func_args*) {});
}

absl::Status CheckTarget(const std::string& target) {
  const absl::Status parts = CheckTargetParts(target);
  if (parts.ok()) return parts;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", target, "' is not a server address: ", parts.message(),
      " (use HOST:PORT, dns:///HOST:PORT or ipv4:ADDR:PORT,ADDR:PORT,...)"));
}

std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& target) {
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   ClientChannelArguments());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(
    const std::string& target, const ClientSecurity& security) {
  auto credentials = ChannelCredentialsFor(security);
  if (!credentials.ok()) return credentials.status();
  return CreateChannelWithToken(target, *credentials, ClientChannelArguments(), security.token);
}

}  // namespace attnscope::rpc
