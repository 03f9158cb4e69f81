// The gRPC server of attnscope: the Analyzer service plus standard health
// checking (grpc.health.v1, SERVING once started) and server reflection.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "service/metrics/service_metrics.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/model_registry.h"
#include "service/rpc/transport_security.h"

namespace grpc {
class Server;
class ServerContextBase;
}  // namespace grpc

namespace attnscope::rpc {

struct RpcServerOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  int max_message_bytes = 4 << 20;          // largest request accepted
  ServiceConfig service;
  // TLS (and mutual TLS) on the port, and the bearer token every Analyzer
  // call must carry; the health service stays open to all.
  ServerSecurity security;
};

class RpcServer {
 public:
  // Starts serving. `models` (not empty) and `metrics` must outlive the
  // server. Unavailable naming the address if it cannot be bound.
  static absl::StatusOr<std::unique_ptr<RpcServer>> Start(const ModelRegistry& models,
                                                          metrics::ServiceMetrics& metrics,
                                                          const RpcServerOptions& options);
  ~RpcServer();

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }

  // Health NOT_SERVING, no new calls, feed streams ended; in-flight requests
  // get up to `drain` to finish, then are ended with UNAVAILABLE and a
  // message saying the server shut down before they finished. Returns when
  // all have.
  void Shutdown(std::chrono::milliseconds drain);

  // The calls in progress, so that the drain can end them with a message.
  class CallTracker {
   public:
    // Takes the mutex: the calls' last Remove ran on gRPC's threads.
    ~CallTracker();
    void Add(grpc::ServerContextBase* call);
    void Remove(grpc::ServerContextBase* call);
    // Ends every call in progress with UNAVAILABLE and `message`, from
    // outside the handlers (for those blocked writing to a client that does
    // not read).
    void CancelAll(const std::string& message);
    // Waits until no call is in progress or `deadline` passes; true if none is.
    bool WaitUntilNone(std::chrono::steady_clock::time_point deadline);

   private:
    std::mutex mu_;
    std::condition_variable none_;
    std::set<grpc::ServerContextBase*> calls_;
  };

 private:
  RpcServer() = default;
  CallTracker calls_;
  std::unique_ptr<AnalyzerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// "host:port" -> "host:<port>" (IPv6 hosts keep their brackets).
std::string WithPort(const std::string& listen, int port);

}  // namespace attnscope::rpc
