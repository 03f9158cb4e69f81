// The gRPC channel every attnscope client opens to a server or to a set of
// replicas. The target is any gRPC target URI: "host:port" (resolved by DNS),
// "dns:///host:port" (every address DNS returns), or
// "ipv4:127.0.0.1:50051,127.0.0.1:50052" (a fixed list). Requests are spread
// over all resolved addresses by gRPC's own round_robin policy.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "service/rpc/client_security.h"

namespace attnscope::rpc {

// gRPC's service config selecting the round_robin load-balancing policy.
extern const char kRoundRobinServiceConfig[];

// OK when `target` is one a client can connect to: HOST:PORT (an IPv6
// address in brackets, [::1]:50051), dns:[//AUTHORITY]/HOST:PORT,
// ipv4:ADDR:PORT,..., ipv6:[ADDR]:PORT,..., unix:PATH or unix-abstract:NAME,
// every port in 1..65535. InvalidArgument saying what is wrong otherwise
// (checked before connecting: gRPC itself only logs why it cannot parse one).
absl::Status CheckTarget(const std::string& target);

// Keeps gRPC's own log lines ("E1203 ... Handshake failed", resolver
// errors) off stderr for the rest of the process: a client reports the
// call's status, which carries the reason. For command-line tools; a
// --verbose run skips it.
void QuietGrpcLogs();

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
