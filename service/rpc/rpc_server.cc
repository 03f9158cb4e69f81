#include "service/rpc/rpc_server.h"

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace attnscope::rpc {

std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(const ModelRegistry& models,
                                                             metrics::ServiceMetrics& metrics,
                                                             const RpcServerOptions& options) {
  // One gRPC library reference held until the process exits: otherwise
  // destroying the last server runs grpc_shutdown(), which sits out gRPC's
  // pending internal timers (up to ~10 s) before a drained server can exit.
  static const bool kept_alive = (grpc_init(), true);
  (void)kept_alive;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<RpcServer> server(new RpcServer());
  server->service_ = std::make_unique<AnalyzerService>(models, metrics, options.service);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on '", options.listen,
        "': the address is malformed or in use; pick another with --listen"));
  }
  server->address_ = WithPort(options.listen, port);
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus("attnscope.v1.Analyzer", true);
  }
  return server;
}

RpcServer::~RpcServer() {
  if (server_ != nullptr) Shutdown(std::chrono::milliseconds(0));
}

void RpcServer::Shutdown(std::chrono::milliseconds drain) {
  if (server_ == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  service_->CloseFeed();
  server_->Shutdown(std::chrono::system_clock::now() + drain);
  server_->Wait();
  server_.reset();
}

}  // namespace attnscope::rpc
