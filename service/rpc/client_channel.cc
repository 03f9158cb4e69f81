#include "service/rpc/client_channel.h"

#include "grpc/grpc.h"
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
grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kRoundRobinServiceConfig);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  return args;
}
}  // namespace

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
