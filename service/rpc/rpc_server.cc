#include "service/rpc/rpc_server.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_interceptor.h"

namespace attnscope::rpc {
namespace {

// Registers its call with the tracker for the call's lifetime; intercepts
// nothing. libgrpc++ makes it on the thread that starts the call and destroys
// it on whichever thread ends the call, handing it over under locks of its own
// that TSan cannot see (uninstrumented); the release store and acquire load
// of tracker_ order the constructor's writes before the destructor's reads
// without relying on them.
class TrackingInterceptor : public grpc::experimental::Interceptor {
 public:
  TrackingInterceptor(RpcServer::CallTracker* tracker, grpc::ServerContextBase* call)
      : call_(call) {
    tracker->Add(call_);
    tracker_.store(tracker, std::memory_order_release);
  }
  ~TrackingInterceptor() override { tracker_.load(std::memory_order_acquire)->Remove(call_); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  std::atomic<RpcServer::CallTracker*> tracker_{nullptr};
  grpc::ServerContextBase* const call_;
};

class TrackingFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TrackingFactory(RpcServer::CallTracker* tracker) : tracker_(tracker) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new TrackingInterceptor(tracker_, info->server_context());
  }

 private:
  RpcServer::CallTracker* tracker_;
};

// After the drain: how long the handlers get to end their calls themselves,
// and when gRPC cancels whatever is left (RpcServer::Shutdown).
constexpr auto kEndGrace = std::chrono::seconds(2);
constexpr auto kBackstop = std::chrono::seconds(5);

}  // namespace

// The last calls end (Remove, from ~TrackingInterceptor) on gRPC's threads
// before the server's shutdown returns, but that wait is inside libgrpc++,
// which TSan cannot see; taking the mutex here orders every Remove before the
// set, the condition variable and the mutex are destroyed.
RpcServer::CallTracker::~CallTracker() { std::lock_guard<std::mutex> lock(mu_); }

void RpcServer::CallTracker::Add(grpc::ServerContextBase* call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.insert(call);
}

void RpcServer::CallTracker::Remove(grpc::ServerContextBase* call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
  if (calls_.empty()) none_.notify_all();
}

bool RpcServer::CallTracker::WaitUntilNone(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return none_.wait_until(lock, deadline, [this] { return calls_.empty(); });
}

void RpcServer::CallTracker::CancelAll(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  for (grpc::ServerContextBase* call : calls_) {
    if (call->c_call() != nullptr) {
      grpc_call_cancel_with_status(call->c_call(), GRPC_STATUS_UNAVAILABLE, message.c_str(),
                                   nullptr);
    }
  }
}

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
  ServiceConfig config = options.service;
  config.auth_token = options.security.token;
  config.max_message_bytes = options.max_message_bytes;
  server->service_ = std::make_unique<AnalyzerService>(models, metrics, config);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, ServerCredentialsFor(options.security), &port);
  // The service refuses a request over max_message_bytes with a message
  // naming --max-message-bytes; gRPC's own cap (twice that) only stops a
  // client from making the server buffer arbitrarily large messages.
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(int64_t{2} * options.max_message_bytes, std::numeric_limits<int>::max())));
  builder.RegisterService(server->service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> tracking;
  tracking.push_back(std::make_unique<TrackingFactory>(&server->calls_));
  builder.experimental().SetInterceptorCreators(std::move(tracking));
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
  // gRPC's own deadline would cancel the calls still running with a bare
  // CANCELLED (or none: the stream just closes). At the end of the drain the
  // handlers end their calls themselves with a status that says why; those
  // still running after kEndGrace (blocked writing to a client that does not
  // read) are cancelled from outside with that status, and gRPC's
  // cancellation kBackstop after the drain is the last resort.
  const auto deadline = std::chrono::system_clock::now() + drain;
  std::future<void> stopped = std::async(std::launch::async, [this, deadline] {
    server_->Shutdown(deadline + kBackstop);
  });
  if (stopped.wait_until(deadline) != std::future_status::ready) {
    const std::string why = absl::StrCat(
        "attnscope-server is shutting down and this request did not finish within its ",
        drain.count() / 1000.0, " s drain (attnscope-server --drain-seconds); retry it");
    service_->EndInFlight(why);
    if (!calls_.WaitUntilNone(std::chrono::steady_clock::now() + kEndGrace)) calls_.CancelAll(why);
    stopped.wait();
  }
  server_->Wait();
  server_.reset();
}

}  // namespace attnscope::rpc
