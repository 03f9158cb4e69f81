// Prometheus metrics of the attnscope service. Wraps prometheus-cpp; knows
// nothing of the model runtime or of gRPC. Names follow Prometheus rules:
// prefix attnscope_, base units (seconds), _total counters, no unbounded
// label values (never prompt text; model names come from the server's
// configuration, rpc and code names from a fixed set).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Registry;
struct MetricFamily;
}

namespace attnscope::metrics {

// The service's metric families in one prometheus::Registry. Every method is
// safe to call from any thread. Labelled series appear with their first record.
class ServiceMetrics {
 public:
  ServiceMetrics();
  ~ServiceMetrics();
  ServiceMetrics(const ServiceMetrics&) = delete;
  ServiceMetrics& operator=(const ServiceMetrics&) = delete;

  // Where a request came from (label origin): a user, or a dashboard fetching
  // details of a request it already shows.
  enum class Origin { kUser, kDashboard, kBatch };

  // A finished RPC: rpc in {ListModels, Analyze, Generate, Subscribe,
  // Tokenize, ScanHeads, Ablate}, model a served model's name ("" when the
  // request named none that is served, and for ListModels), code a gRPC
  // status code name ("OK", "INVALID_ARGUMENT", ...). Counts
  // attnscope_requests_total{rpc,model,origin,code} and observes
  // attnscope_request_duration_seconds{rpc,model,origin}.
  void RecordRequest(const std::string& rpc, const std::string& model, Origin origin,
                     const std::string& code, double seconds);
  // Seconds a request waited for a free model slot before it ran
  // (attnscope_queue_wait_seconds{model,origin}); only requests that got one.
  void RecordQueueWait(const std::string& model, Origin origin, double seconds);
  // Time from receiving a streaming request to its first event.
  void RecordFirstEvent(const std::string& rpc, double seconds);
  // Tokens of one prompt after tokenization (attnscope_prompt_tokens).
  void RecordPromptTokens(const std::string& model, int64_t tokens);
  // One finished generation: `tokens` generated in `seconds`. Adds to
  // attnscope_generated_tokens_total (tokens <= 0 adds nothing) and observes
  // tokens / seconds (only when both are positive).
  void RecordGeneration(const std::string& model, int64_t tokens, double seconds);
  // One policy of a finished EvaluateEviction: `steps` scored in `seconds`
  // with final `perplexity`. `policy` is the kind only (full, sinks, window,
  // detected, heavy: bounded label values). Adds to
  // attnscope_eviction_steps_total{model,policy} and observes
  // attnscope_eviction_perplexity{model,policy} (finite values only).
  void RecordEvictionRun(const std::string& model, const std::string& policy, int64_t steps,
                         double perplexity);
  // Progress of the Analyze passes running now: `layers` more layers to
  // compute (negative: fewer, e.g. a pass cancelled part-way) in
  // attnscope_analysis_layers_pending{model}; and `layers` computed, added
  // to attnscope_analysis_layers_total{model} (<= 0 adds nothing) and taken
  // from the pending gauge. pending / rate(total) is the time until the
  // running passes end.
  void AddAnalysisLayersPending(const std::string& model, int64_t layers);
  void AddAnalysisLayersDone(const std::string& model, int64_t layers);
  // Current values of the gauges attnscope_in_flight_requests,
  // attnscope_queued_requests and attnscope_subscribers.
  void SetInFlight(int64_t requests);
  void SetQueued(int64_t requests);
  void SetSubscribers(int64_t subscribers);
  // Adds to attnscope_feed_events_dropped_total (events <= 0 adds nothing).
  void AddDroppedFeedEvents(int64_t events);
  // The model-internal numbers of one analyzed prompt: context health 0..10,
  // anomalous sink count, last-layer first-token mass 0..1, massive-activation
  // ratio (service/analysis/definitions.md).
  void RecordAnalysis(const std::string& model, double health, int64_t anomalous_sinks,
                      double last_layer_first_token_mass, double massive_ratio);
  // One next-token entropy (normalized, 0..1) of a prompt position or a
  // generated token.
  void RecordNextTokenEntropy(const std::string& model, double normalized_entropy);
  // attnscope_model_info{model,architecture,layers,heads,...} 1; a second
  // call for the same model replaces its series.
  void SetModelInfo(const std::string& model, const std::string& architecture, int64_t layers,
                    int64_t heads, int64_t width, int64_t vocab, int64_t positions);

  // The registry holding every family but the process ones (shared: outlives
  // this object if held).
  std::shared_ptr<prometheus::Registry> registry() const;
  // Everything /metrics exposes: the registry's families, then the process
  // metrics read from /proc at the time of the call (process_resident_memory_bytes,
  // process_cpu_seconds_total, process_open_fds, ...). The function keeps what it
  // reads alive, so it may outlive this object.
  std::function<std::vector<prometheus::MetricFamily>()> Collector() const;

  // One registered metric family. registry()->Collect() leaves out families
  // that have no series yet (a labelled family before its first record).
  struct FamilyInfo {
    std::string name;  // "attnscope_requests_total"
    std::string type;  // "counter", "gauge" or "histogram"
    std::string help;
  };
  // Every family this class registers, series or not, in registration order,
  // then the process families of Collector().
  const std::vector<FamilyInfo>& families() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves /metrics over HTTP/1.1 for a ServiceMetrics (GET or HEAD; the text
// format of prometheus-cpp's TextSerializer) from one thread of its own. Not
// prometheus-cpp's Exposer: civetweb's fixed 100 KiB thread stacks cannot hold
// the static TLS of a process that links libtorch/OpenBLAS (see
// metrics_server.cc). Stops and joins its thread in the destructor.
class MetricsServer {
 public:
  // `listen` is "host:port" with an IP address or "localhost" (127.0.0.1),
  // "[ipv6]:port", or ":port" for every interface (port 0 picks a free one).
  // InvalidArgument for a malformed address or a host name (no DNS lookups),
  // Unavailable with the reason if it cannot be bound.
  // The server keeps the metrics' registry alive, so `metrics` may go first.
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
