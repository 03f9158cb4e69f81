// The gRPC channel every attnscope client opens to a server or to a set of
// replicas. The target is any gRPC target URI: "host:port" (resolved by DNS),
// "dns:///host:port" (every address DNS returns), or
// "ipv4:127.0.0.1:50051,127.0.0.1:50052" (a fixed list). Requests are spread
// over all resolved addresses by gRPC's own round_robin policy.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "service/rpc/client_security.h"

namespace attnscope::rpc {

// gRPC's service config selecting the round_robin load-balancing policy.
extern const char kRoundRobinServiceConfig[];

// A plaintext channel to `target` with round_robin over its addresses and a
// reconnect back-off capped at 5 s, so a restarted replica gets requests again
// within seconds. Nothing connects until the first call. An unparsable target
// gives a channel whose calls fail with UNAVAILABLE naming the target.
std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& target);

// The same channel with TLS from `security`'s PEM files and its bearer token
// on every call. InvalidArgument naming the flag of a file that cannot be
// read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(
    const std::string& target, const ClientSecurity& security);

}  // namespace attnscope::rpc
