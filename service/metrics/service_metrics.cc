#include "service/metrics/service_metrics.h"

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/metrics/process_metrics.h"

#include "attnscope_version.h"

namespace attnscope::metrics {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;
using prometheus::Registry;

// Bucket upper bounds (constexpr arrays: no static objects to destroy).
// Seconds: from a cached ListModels (microseconds) to an hour. A real
// model's forward at T = 2,048 takes seconds (docs/performance.md, "Real
// sizes") and attention grows as T^2, so 32K-token prompts and 1B..8B models
// take minutes; with a top bucket of 60 s all of them fell in +Inf, where
// histogram_quantile can only answer the top bound.
constexpr double kLatencyBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,    5,     10,   30,    60,   120, 300,  600,
                                      1200,  1800,   3600};
// Tokens: powers of two up to 131072, the positions of Llama 3.1/3.2 (Qwen2.5
// has 32768); the old top bucket, 2048, put every long prompt in +Inf.
constexpr double kTokenBuckets[] = {1,    2,    4,    8,     16,    32,    64,    128,   256,
                                    512,  1024, 2048, 4096,  8192,  16384, 32768, 65536, 131072};
constexpr double kTokensPerSecondBuckets[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
constexpr double kPerplexityBuckets[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000};
// The context-health score is 0..10 (service/analysis/definitions.md); le="10" holds
// every healthy prompt, so the lower buckets show how bad the rest are.
constexpr double kHealthBuckets[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
constexpr double kSinkBuckets[] = {0, 1, 2, 3, 4, 5, 8, 16, 32, 64};
constexpr double kFractionBuckets[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
// maxnorm[0] / median maxnorm: GPT-2 small is about 12 on ordinary text.
constexpr double kRatioBuckets[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};

// Seconds waiting for a model slot: none at all (the usual case) up to a
// request that waited out long analyses queued before it (each can take
// minutes: see kLatencyBuckets).
constexpr double kQueueWaitBuckets[] = {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,    5,     10,    30,   60,   120, 300,  600, 1800};

const char* OriginLabel(ServiceMetrics::Origin origin) {
  switch (origin) {
    case ServiceMetrics::Origin::kDashboard:
      return "dashboard";
    case ServiceMetrics::Origin::kBatch:
      return "batch";
    case ServiceMetrics::Origin::kUser:
      break;
  }
  return "user";
}

template <std::size_t N>
Histogram::BucketBoundaries Buckets(const double (&bounds)[N]) {
  return Histogram::BucketBoundaries(bounds, bounds + N);
}

using Families = std::vector<ServiceMetrics::FamilyInfo>;

Family<Counter>& CounterFamily(Registry& registry, Families& families, const std::string& name,
                               const std::string& help) {
  families.push_back({name, "counter", help});
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Gauge>& GaugeFamily(Registry& registry, Families& families, const std::string& name,
                           const std::string& help) {
  families.push_back({name, "gauge", help});
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Histogram>& HistogramFamily(Registry& registry, Families& families, const std::string& name,
                                   const std::string& help) {
  families.push_back({name, "histogram", help});
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

// Every family is registered once, here; a metric name below is the whole
// list that deploy/ may query (tests/deploy checks the dashboard against it).
struct ServiceMetrics::Impl {
  std::shared_ptr<Registry> registry = std::make_shared<Registry>();
  Families families;  // Filled by the initializers below, in their order.
  Family<Counter>& requests =
      CounterFamily(*registry, families, "attnscope_requests_total",
                    "Finished RPCs by method (rpc), model, origin (user, dashboard or batch) and gRPC "
                    "status code name (code).");
  Family<Histogram>& request_duration = HistogramFamily(
      *registry, families, "attnscope_request_duration_seconds",
      "Wall time of a finished RPC, from receiving the request to sending its status, by "
      "rpc, model and origin.");
  Family<Histogram>& queue_wait = HistogramFamily(
      *registry, families, "attnscope_queue_wait_seconds",
      "Time an admitted request waited for a free model slot before running, by model and "
      "origin.");
  Family<Histogram>& first_event = HistogramFamily(
      *registry, families, "attnscope_time_to_first_event_seconds",
      "Time from receiving a streaming request to writing its first event, by rpc.");
  Family<Histogram>& prompt_tokens = HistogramFamily(
      *registry, families, "attnscope_prompt_tokens",
      "Tokens in each analyzed or generated-from prompt after tokenization, by model.");
  Family<Counter>& generated_tokens = CounterFamily(
      *registry, families, "attnscope_generated_tokens_total", "Tokens generated, by model.");
  Family<Histogram>& tokens_per_second = HistogramFamily(
      *registry, families, "attnscope_generation_tokens_per_second",
      "Generation throughput of each Generate call (generated tokens / its seconds), by model.");
  Family<Counter>& eviction_steps = CounterFamily(
      *registry, families, "attnscope_eviction_steps_total",
      "Text tokens scored by EvaluateEviction (one step each), by model and policy kind.");
  Family<Histogram>& eviction_perplexity = HistogramFamily(
      *registry, families, "attnscope_eviction_perplexity",
      "Perplexity of each finished EvaluateEviction policy run, by model and policy kind.");
  Family<Counter>& analysis_layers = CounterFamily(
      *registry, families, "attnscope_analysis_layers_total",
      "Layers computed by Analyze forward passes, by model: its rate is the progress of the "
      "passes in layers per second.");
  Family<Gauge>& analysis_layers_pending = GaugeFamily(
      *registry, families, "attnscope_analysis_layers_pending",
      "Layers the Analyze passes running now have still to compute, by model; divided by the "
      "rate of attnscope_analysis_layers_total, the seconds until they end.");
  Family<Gauge>& in_flight = GaugeFamily(*registry, families, "attnscope_in_flight_requests",
                                         "RPCs currently running a forward pass or generation.");
  Family<Gauge>& queued = GaugeFamily(*registry, families, "attnscope_queued_requests",
                                      "RPCs admitted but waiting for a free model slot.");
  Family<Gauge>& subscribers = GaugeFamily(*registry, families, "attnscope_subscribers",
                                           "Open Subscribe streams receiving the live feed.");
  Family<Counter>& dropped =
      CounterFamily(*registry, families, "attnscope_feed_events_dropped_total",
                    "Live-feed events dropped because a subscriber's queue was full.");
  Family<Histogram>& health = HistogramFamily(
      *registry, families, "attnscope_context_health",
      "Context-health score (0 = attention collapsed onto anomalous sinks, 10 = healthy) of "
      "each analyzed prompt, by model.");
  Family<Histogram>& sinks = HistogramFamily(
      *registry, families, "attnscope_anomalous_sinks",
      "Anomalous attention sinks (non-structural positions with z above the threshold) per "
      "analyzed prompt, by model.");
  Family<Histogram>& first_token_mass = HistogramFamily(
      *registry, families, "attnscope_last_layer_first_token_mass",
      "Mean over the last layer's heads of the attention share given to the first token "
      "(0..1), per analyzed prompt, by model.");
  Family<Histogram>& massive_ratio = HistogramFamily(
      *registry, families, "attnscope_massive_activation_ratio",
      "Max hidden-state norm of the first token divided by the median of the others' "
      "(dimensionless), per analyzed prompt, by model.");
  Family<Histogram>& entropy = HistogramFamily(
      *registry, families, "attnscope_next_token_entropy",
      "Next-token entropy divided by log(vocabulary size) (0..1) of each prompt position or "
      "generated token, by model.");
  Family<Gauge>& build_info =
      GaugeFamily(*registry, families, "attnscope_build_info",
                  "Always 1; its labels name the server's version and git revision.");
  Family<Gauge>& model_info =
      GaugeFamily(*registry, families, "attnscope_model_info",
                  "Always 1; its labels describe a served model (architecture and dimensions).");

  Gauge& in_flight_gauge = in_flight.Add({});
  Gauge& queued_gauge = queued.Add({});
  Gauge& subscribers_gauge = subscribers.Add({});
  Counter& dropped_counter = dropped.Add({});
  Gauge& build_info_gauge = build_info.Add(
      {{"version", kAttnscopeVersion}, {"revision", kAttnscopeGitRevision}});

  std::mutex model_info_mutex;
  std::map<std::string, Gauge*> model_info_by_model;  // Guarded by model_info_mutex.
};

ServiceMetrics::ServiceMetrics() : impl_(std::make_unique<Impl>()) {
  impl_->build_info_gauge.Set(1);
  for (const ProcessFamilyInfo& info : ProcessFamilyInfos()) {
    impl_->families.push_back({info.name, info.type, info.help});
  }
}

ServiceMetrics::~ServiceMetrics() = default;

void ServiceMetrics::RecordRequest(const std::string& rpc, const std::string& model, Origin origin,
                                   const std::string& code, double seconds) {
  const char* from = OriginLabel(origin);
  impl_->requests.Add({{"rpc", rpc}, {"model", model}, {"origin", from}, {"code", code}})
      .Increment();
  impl_->request_duration
      .Add({{"rpc", rpc}, {"model", model}, {"origin", from}}, Buckets(kLatencyBuckets))
      .Observe(seconds);
}

void ServiceMetrics::RecordQueueWait(const std::string& model, Origin origin, double seconds) {
  impl_->queue_wait
      .Add({{"model", model}, {"origin", OriginLabel(origin)}}, Buckets(kQueueWaitBuckets))
      .Observe(seconds);
}

void ServiceMetrics::RecordFirstEvent(const std::string& rpc, double seconds) {
  impl_->first_event.Add({{"rpc", rpc}}, Buckets(kLatencyBuckets)).Observe(seconds);
}

void ServiceMetrics::RecordPromptTokens(const std::string& model, int64_t tokens) {
  impl_->prompt_tokens.Add({{"model", model}}, Buckets(kTokenBuckets))
      .Observe(static_cast<double>(tokens));
}

void ServiceMetrics::RecordGeneration(const std::string& model, int64_t tokens, double seconds) {
  // Counters only go up: a negative count is a caller bug, not a decrement.
  if (tokens > 0) {
    impl_->generated_tokens.Add({{"model", model}}).Increment(static_cast<double>(tokens));
  }
  if (tokens > 0 && seconds > 0) {
    impl_->tokens_per_second.Add({{"model", model}}, Buckets(kTokensPerSecondBuckets))
        .Observe(static_cast<double>(tokens) / seconds);
  }
}

void ServiceMetrics::RecordEvictionRun(const std::string& model, const std::string& policy,
                                       int64_t steps, double perplexity) {
  if (steps > 0) {
    impl_->eviction_steps.Add({{"model", model}, {"policy", policy}})
        .Increment(static_cast<double>(steps));
  }
  if (std::isfinite(perplexity)) {
    impl_->eviction_perplexity
        .Add({{"model", model}, {"policy", policy}}, Buckets(kPerplexityBuckets))
        .Observe(perplexity);
  }
}

void ServiceMetrics::AddAnalysisLayersPending(const std::string& model, int64_t layers) {
  impl_->analysis_layers_pending.Add({{"model", model}}).Increment(static_cast<double>(layers));
}

void ServiceMetrics::AddAnalysisLayersDone(const std::string& model, int64_t layers) {
  if (layers <= 0) return;
  impl_->analysis_layers.Add({{"model", model}}).Increment(static_cast<double>(layers));
  impl_->analysis_layers_pending.Add({{"model", model}}).Decrement(static_cast<double>(layers));
}

void ServiceMetrics::SetInFlight(int64_t requests) {
  impl_->in_flight_gauge.Set(static_cast<double>(requests));
}

void ServiceMetrics::SetQueued(int64_t requests) {
  impl_->queued_gauge.Set(static_cast<double>(requests));
}

void ServiceMetrics::SetSubscribers(int64_t subscribers) {
  impl_->subscribers_gauge.Set(static_cast<double>(subscribers));
}

void ServiceMetrics::AddDroppedFeedEvents(int64_t events) {
  if (events > 0) impl_->dropped_counter.Increment(static_cast<double>(events));
}

void ServiceMetrics::RecordAnalysis(const std::string& model, double health,
                                    int64_t anomalous_sinks, double last_layer_first_token_mass,
                                    double massive_ratio) {
  const Labels labels = {{"model", model}};
  impl_->health.Add(labels, Buckets(kHealthBuckets)).Observe(health);
  impl_->sinks.Add(labels, Buckets(kSinkBuckets)).Observe(static_cast<double>(anomalous_sinks));
  impl_->first_token_mass.Add(labels, Buckets(kFractionBuckets))
      .Observe(last_layer_first_token_mass);
  impl_->massive_ratio.Add(labels, Buckets(kRatioBuckets)).Observe(massive_ratio);
}

void ServiceMetrics::RecordNextTokenEntropy(const std::string& model, double normalized_entropy) {
  impl_->entropy.Add({{"model", model}}, Buckets(kFractionBuckets)).Observe(normalized_entropy);
}

void ServiceMetrics::SetModelInfo(const std::string& model, const std::string& architecture,
                                  int64_t layers, int64_t heads, int64_t width, int64_t vocab,
                                  int64_t positions) {
  const Labels labels = {{"model", model},
                         {"architecture", architecture},
                         {"layers", std::to_string(layers)},
                         {"heads", std::to_string(heads)},
                         {"width", std::to_string(width)},
                         {"vocab", std::to_string(vocab)},
                         {"positions", std::to_string(positions)}};
  std::lock_guard<std::mutex> lock(impl_->model_info_mutex);
  Gauge& gauge = impl_->model_info.Add(labels);
  // One info series per model: a reloaded model with other dimensions
  // replaces its old series instead of reporting both.
  auto [it, inserted] = impl_->model_info_by_model.try_emplace(model, &gauge);
  if (!inserted && it->second != &gauge) {
    impl_->model_info.Remove(it->second);
    it->second = &gauge;
  }
  gauge.Set(1);
}

std::shared_ptr<prometheus::Registry> ServiceMetrics::registry() const { return impl_->registry; }

std::function<std::vector<prometheus::MetricFamily>()> ServiceMetrics::Collector() const {
  return [registry = impl_->registry] {
    std::vector<prometheus::MetricFamily> families = registry->Collect();
    for (prometheus::MetricFamily& family : ProcessFamilies(ReadProcessSample())) {
      families.push_back(std::move(family));
    }
    return families;
  };
}

const std::vector<ServiceMetrics::FamilyInfo>& ServiceMetrics::families() const {
  return impl_->families;
}

}  // namespace attnscope::metrics
