// Prometheus metrics of the attnscope service. Wraps prometheus-cpp; knows
// nothing of the model runtime or of gRPC. Names follow Prometheus rules:
// prefix attnscope_, base units (seconds), _total counters, no unbounded
// label values (never prompt text; model names come from the server's
// configuration, rpc and code names from a fixed set).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Registry;
}

namespace attnscope::metrics {

class ServiceMetrics {
 public:
  ServiceMetrics();
  ~ServiceMetrics();
  ServiceMetrics(const ServiceMetrics&) = delete;
  ServiceMetrics& operator=(const ServiceMetrics&) = delete;

  // A finished RPC: rpc in {ListModels, Analyze, Generate, Subscribe}, code a
  // gRPC status code name ("OK", "INVALID_ARGUMENT", ...).
  void RecordRequest(const std::string& rpc, const std::string& code, double seconds);
  // Time from receiving a streaming request to its first event.
  void RecordFirstEvent(const std::string& rpc, double seconds);
  void RecordPromptTokens(const std::string& model, int64_t tokens);
  void RecordGeneration(const std::string& model, int64_t tokens, double seconds);
  void SetInFlight(int64_t requests);
  void SetQueued(int64_t requests);
  void SetSubscribers(int64_t subscribers);
  void AddDroppedFeedEvents(int64_t events);
  // The model-internal numbers of one analyzed prompt.
  void RecordAnalysis(const std::string& model, double health, int64_t anomalous_sinks,
                      double last_layer_first_token_mass, double massive_ratio);
  // One next-token entropy (normalized, 0..1) of a prompt position or a
  // generated token.
  void RecordNextTokenEntropy(const std::string& model, double normalized_entropy);
  // attnscope_model_info{model,architecture,layers,heads,...} 1.
  void SetModelInfo(const std::string& model, const std::string& architecture, int64_t layers,
                    int64_t heads, int64_t width, int64_t vocab, int64_t positions);

  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves /metrics over HTTP for a ServiceMetrics (prometheus-cpp's Exposer).
class MetricsServer {
 public:
  // `listen` is "host:port" (port 0 picks a free one). Unavailable with the
  // reason if the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              const ServiceMetrics& metrics);
  ~MetricsServer();
  // The bound port.
  int port() const;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::metrics
