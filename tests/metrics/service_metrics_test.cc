// ServiceMetrics: names, labels, buckets and values of each family, read
// back from prometheus-cpp's text exposition.
#include "service/metrics/service_metrics.h"

#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::metrics {
namespace {

using testing::Exposition;
using testing::HasLine;

TEST(ServiceMetricsTest, CountsRequestsByRpcAndCode) {
  ServiceMetrics metrics;
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.02);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.3);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "INVALID_ARGUMENT", 0.001);
  metrics.RecordRequest("ListModels", "m", ServiceMetrics::Origin::kUser, "OK", 0.0005);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="Analyze"} 2)"))
      << text;
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_requests_total{code="INVALID_ARGUMENT",model="m",origin="user",rpc="Analyze"} 1)"));
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="ListModels"} 1)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_count{model="m",origin="user",rpc="Analyze"} 3)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_sum{model="m",origin="user",rpc="Analyze"} 0.321)"));
  // Cumulative buckets: 0.001 <= 0.001; 0.02 <= 0.025; 0.3 <= 0.5.
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le="0.001"} 1)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le="0.025"} 2)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le="0.25"} 2)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le="0.5"} 3)"));
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le="+Inf"} 3)"));
}

TEST(ServiceMetricsTest, FirstEventAndPromptTokens) {
  ServiceMetrics metrics;
  metrics.RecordFirstEvent("Generate", 0.2);
  metrics.RecordPromptTokens("gpt2", 9);
  metrics.RecordPromptTokens("gpt2", 1024);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_time_to_first_event_seconds_bucket{rpc="Generate",le="0.1"} 0)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_time_to_first_event_seconds_bucket{rpc="Generate",le="0.25"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="gpt2",le="8"} 0)")) << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="gpt2",le="16"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="gpt2",le="512"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="gpt2",le="1024"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_sum{model="gpt2"} 1033)"));
}

// Real runs last minutes and prompts reach 32K tokens and more: each gets a
// bucket of its own instead of the top one (before: 60 s and 2048 tokens,
// where a 25-minute request and a 32K-token prompt both landed in +Inf).
TEST(ServiceMetricsTest, BucketsCoverMinutesAndLongPrompts) {
  ServiceMetrics metrics;
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 25 * 60.0);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 4 * 60.0);
  metrics.RecordQueueWait("m", ServiceMetrics::Origin::kUser, 20 * 60.0);
  metrics.RecordFirstEvent("Analyze", 10 * 60.0);
  metrics.RecordPromptTokens("m", 32768);
  metrics.RecordPromptTokens("m", 100000);
  metrics.RecordPromptTokens("m", 131072);
  const std::string text = Exposition(metrics);
  const std::string duration =
      R"(attnscope_request_duration_seconds_bucket{model="m",origin="user",rpc="Analyze",le=")";
  EXPECT_TRUE(HasLine(text, duration + R"(120"} 0)")) << text;
  EXPECT_TRUE(HasLine(text, duration + R"(300"} 1)"));
  EXPECT_TRUE(HasLine(text, duration + R"(1200"} 1)"));
  EXPECT_TRUE(HasLine(text, duration + R"(1800"} 2)"));
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_queue_wait_seconds_bucket{model="m",origin="user",le="600"} 0)"));
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_queue_wait_seconds_bucket{model="m",origin="user",le="1800"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_time_to_first_event_seconds_bucket{rpc="Analyze",le="600"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="m",le="16384"} 0)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="m",le="32768"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="m",le="65536"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_prompt_tokens_bucket{model="m",le="131072"} 3)"));
}

TEST(ServiceMetricsTest, GenerationCountsTokensAndThroughput) {
  ServiceMetrics metrics;
  metrics.RecordGeneration("gpt2", 20, 0.5);
  metrics.RecordGeneration("gpt2", 5, 1.0);
  metrics.RecordGeneration("gpt2", -3, 1.0);  // Ignored: counters never go down.
  metrics.RecordGeneration("gpt2", 4, 0.0);   // Counted, but no rate from zero seconds.
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(text, R"(attnscope_generated_tokens_total{model="gpt2"} 29)")) << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_generation_tokens_per_second_count{model="gpt2"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_generation_tokens_per_second_sum{model="gpt2"} 45)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_generation_tokens_per_second_bucket{model="gpt2",le="5"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_generation_tokens_per_second_bucket{model="gpt2",le="50"} 2)"));
}

TEST(ServiceMetricsTest, GaugesHoldTheLastValueAndDropsAccumulate) {
  ServiceMetrics metrics;
  metrics.SetInFlight(3);
  metrics.SetInFlight(2);
  metrics.SetQueued(7);
  metrics.SetSubscribers(4);
  metrics.AddDroppedFeedEvents(5);
  metrics.AddDroppedFeedEvents(6);
  metrics.AddDroppedFeedEvents(-1);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(text, "attnscope_in_flight_requests 2")) << text;
  EXPECT_TRUE(HasLine(text, "attnscope_queued_requests 7"));
  EXPECT_TRUE(HasLine(text, "attnscope_subscribers 4"));
  EXPECT_TRUE(HasLine(text, "attnscope_feed_events_dropped_total 11"));
}

TEST(ServiceMetricsTest, AnalysisHistogramsUseTheirScales) {
  ServiceMetrics metrics;
  metrics.RecordAnalysis("gpt2", 10.0, 0, 0.62, 12.4);
  metrics.RecordAnalysis("gpt2", 3.5, 2, 0.95, 150.0);
  metrics.RecordAnalysis("gpt2", 0.0, 9, 0.05, 1.5);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_bucket{model="gpt2",le="0"} 1)")) << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_bucket{model="gpt2",le="3"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_bucket{model="gpt2",le="4"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_bucket{model="gpt2",le="9"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_bucket{model="gpt2",le="10"} 3)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_context_health_sum{model="gpt2"} 13.5)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_anomalous_sinks_bucket{model="gpt2",le="0"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_anomalous_sinks_bucket{model="gpt2",le="8"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_anomalous_sinks_bucket{model="gpt2",le="16"} 3)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_last_layer_first_token_mass_bucket{model="gpt2",le="0.1"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_last_layer_first_token_mass_bucket{model="gpt2",le="0.9"} 2)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_massive_activation_ratio_bucket{model="gpt2",le="2"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_massive_activation_ratio_bucket{model="gpt2",le="20"} 2)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_massive_activation_ratio_bucket{model="gpt2",le="200"} 3)"));
}

TEST(ServiceMetricsTest, NextTokenEntropyBucketsAreTenths) {
  ServiceMetrics metrics;
  for (double h : {0.05, 0.35, 0.35, 0.99}) metrics.RecordNextTokenEntropy("gpt2", h);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(text, R"(attnscope_next_token_entropy_bucket{model="gpt2",le="0.1"} 1)"))
      << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_next_token_entropy_bucket{model="gpt2",le="0.3"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_next_token_entropy_bucket{model="gpt2",le="0.4"} 3)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_next_token_entropy_bucket{model="gpt2",le="0.9"} 3)"));
  EXPECT_TRUE(HasLine(text, R"(attnscope_next_token_entropy_bucket{model="gpt2",le="1"} 4)"));
}

TEST(ServiceMetricsTest, ModelInfoKeepsOneSeriesPerModel) {
  ServiceMetrics metrics;
  metrics.SetModelInfo("tiny", "gpt2", 2, 2, 64, 1000, 128);
  metrics.SetModelInfo("gpt2", "gpt2", 12, 12, 768, 50257, 1024);
  metrics.SetModelInfo("tiny", "gpt2", 3, 2, 64, 1000, 128);  // Reloaded with another depth.
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_model_info{architecture="gpt2",heads="12",layers="12",model="gpt2",positions="1024",vocab="50257",width="768"} 1)"))
      << text;
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_model_info{architecture="gpt2",heads="2",layers="3",model="tiny",positions="128",vocab="1000",width="64"} 1)"));
  EXPECT_EQ(text.find(R"(layers="2",model="tiny")"), std::string::npos) << text;
}

TEST(ServiceMetricsTest, EveryFamilyIsNamedAndDocumented) {
  ServiceMetrics metrics;
  ASSERT_EQ(metrics.families().size(), 29u);
  for (const ServiceMetrics::FamilyInfo& family : metrics.families()) {
    // The process families keep the names every client library uses.
    EXPECT_TRUE(family.name.rfind("attnscope_", 0) == 0 || family.name.rfind("process_", 0) == 0)
        << family.name;
    EXPECT_GE(family.help.size(), 20u) << family.name;
    const bool ends_total =
        family.name.size() > 6 && family.name.compare(family.name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(family.type == "counter", ends_total) << family.name;
  }
}

TEST(ServiceMetricsTest, FamiliesMatchWhatTheRegistryExposes) {
  ServiceMetrics metrics;
  // Unlabelled families have their series from the start; labelled ones
  // appear with their first record.
  std::map<std::string, std::string> exposed;
  for (const prometheus::MetricFamily& family : metrics.Collector()()) {
    exposed[family.name] = "";
  }
  // In-flight, queued, subscribers, dropped, build info and 7 process families.
  EXPECT_EQ(exposed.size(), 12u);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.1);
  metrics.RecordQueueWait("m", ServiceMetrics::Origin::kDashboard, 0.5);
  metrics.RecordFirstEvent("Generate", 0.1);
  metrics.RecordPromptTokens("m", 3);
  metrics.RecordGeneration("m", 3, 1.0);
  metrics.RecordAnalysis("m", 9, 0, 0.5, 10);
  metrics.RecordNextTokenEntropy("m", 0.5);
  metrics.SetModelInfo("m", "gpt2", 1, 1, 8, 10, 16);
  metrics.RecordEvictionRun("m", "sinks", 10, 12.5);
  metrics.AddAnalysisLayersPending("m", 2);
  metrics.AddAnalysisLayersDone("m", 2);
  const char* kTypes[] = {"counter", "gauge", "summary", "untyped", "histogram"};
  for (const prometheus::MetricFamily& family : metrics.Collector()()) {
    exposed[family.name] = kTypes[static_cast<int>(family.type)];
  }
  std::map<std::string, std::string> registered;
  for (const ServiceMetrics::FamilyInfo& family : metrics.families()) {
    registered[family.name] = family.type;
  }
  EXPECT_EQ(exposed, registered);
}

TEST(ServiceMetricsTest, QueueWaitByModelAndOrigin) {
  ServiceMetrics metrics;
  metrics.RecordQueueWait("gpt2", ServiceMetrics::Origin::kUser, 0.0);
  metrics.RecordQueueWait("gpt2", ServiceMetrics::Origin::kUser, 3.0);
  metrics.RecordQueueWait("gpt2", ServiceMetrics::Origin::kDashboard, 0.2);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_queue_wait_seconds_bucket{model="gpt2",origin="user",le="0.0005"} 1)"))
      << text;
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_queue_wait_seconds_bucket{model="gpt2",origin="user",le="2.5"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_queue_wait_seconds_bucket{model="gpt2",origin="user",le="5"} 2)"));
  EXPECT_TRUE(
      HasLine(text, R"(attnscope_queue_wait_seconds_sum{model="gpt2",origin="dashboard"} 0.2)"));
}

TEST(ServiceMetricsTest, DashboardOriginIsItsOwnSeries) {
  ServiceMetrics metrics;
  metrics.RecordRequest("Analyze", "gpt2", ServiceMetrics::Origin::kUser, "OK", 1.0);
  metrics.RecordRequest("Analyze", "gpt2", ServiceMetrics::Origin::kDashboard, "CANCELLED", 0.5);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_requests_total{code="OK",model="gpt2",origin="user",rpc="Analyze"} 1)"))
      << text;
  EXPECT_TRUE(HasLine(
      text,
      R"(attnscope_requests_total{code="CANCELLED",model="gpt2",origin="dashboard",rpc="Analyze"} 1)"));
}

TEST(ServiceMetricsTest, BuildInfoNamesVersionAndRevision) {
  ServiceMetrics metrics;
  const std::string text = Exposition(metrics);
  const std::size_t at = text.find("\nattnscope_build_info{");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  // A 12-hex-digit revision (maybe "-dirty"), or "unknown" outside git.
  EXPECT_THAT(line, ::testing::MatchesRegex(
                        R"re(attnscope_build_info\{revision="([0-9a-f]{12}(-dirty)?|unknown)",)re"
                        R"re(version="[0-9]+\.[0-9]+\.[0-9]+"\} 1)re"));
}

TEST(ServiceMetricsTest, ConcurrentRecordsAreAllCounted) {
  ServiceMetrics metrics;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < 2500; ++i) {
        metrics.RecordRequest(t % 2 == 0 ? "Analyze" : "Generate", "m",
                              ServiceMetrics::Origin::kUser, "OK", 0.01);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="Analyze"} 5000)"))
      << text;
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="Generate"} 5000)"));
}

}  // namespace
}  // namespace attnscope::metrics

namespace attnscope::metrics {
namespace {

using testing::Exposition;
using testing::HasLine;

TEST(ServiceMetricsTest, EvictionRunsCountStepsAndObserveFinitePerplexity) {
  ServiceMetrics metrics;
  metrics.RecordEvictionRun("llama", "sinks", 511, 13.5);
  metrics.RecordEvictionRun("llama", "sinks", 100, std::nan(""));
  metrics.RecordEvictionRun("llama", "window", 0, 600.0);
  const std::string text = Exposition(metrics);
  EXPECT_TRUE(HasLine(text, R"(attnscope_eviction_steps_total{model="llama",policy="sinks"} 611)"))
      << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_eviction_perplexity_count{model="llama",policy="sinks"} 1)"))
      << text;
  EXPECT_TRUE(HasLine(text, R"(attnscope_eviction_perplexity_sum{model="llama",policy="sinks"} 13.5)"))
      << text;
  EXPECT_TRUE(HasLine(
      text, R"(attnscope_eviction_perplexity_bucket{model="llama",policy="window",le="1000"} 1)"))
      << text;
  EXPECT_EQ(text.find(R"(attnscope_eviction_steps_total{model="llama",policy="window"})"),
            std::string::npos);
}

}  // namespace
}  // namespace attnscope::metrics
