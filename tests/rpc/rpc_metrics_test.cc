// The rpc layer records every request in the metrics the server exposes.
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(RpcTest, EveryRequestIsRecordedInTheMetrics) {
  StartServer();
  grpc::ClientContext feed_context;
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  const std::string metrics = server_->metrics_address();
  EXPECT_EQ(MetricValue(ScrapeMetrics(metrics), "attnscope_subscribers"), 1);

  const AnalyzeResult analyzed = RunAnalyze(*stub_, TextRequest("Counting every request here"));
  ASSERT_TRUE(analyzed.status.ok());
  // A dashboard's own detail fetch: counted apart, not in the prompt metrics.
  v1::AnalyzeRequest detail = TextRequest("Counting every request here");
  detail.set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
  ASSERT_TRUE(RunAnalyze(*stub_, detail).status.ok());
  EXPECT_FALSE(RunAnalyze(*stub_, TextRequest("")).status.ok());
  v1::GenerateRequest generate;
  generate.set_text("Five more");
  generate.set_max_new_tokens(5);
  generate.set_stop_at_eos(false);
  ASSERT_TRUE(RunGenerate(*stub_, generate).status.ok());
  grpc::ClientContext list_context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&list_context, v1::ListModelsRequest(), &models).ok());
  feed_context.TryCancel();
  v1::FeedEvent event;
  while (feed->Read(&event)) {
  }
  feed->Finish();

  const int64_t tokens = analyzed.events.front().tokens().ids_size();
  const v1::Summary& summary = analyzed.events.back().summary();
  // The Subscribe handler notices the cancellation within its poll period;
  // its call is counted once it has ended, a moment after the subscriber
  // count drops (under TSan a scrape fell between the two): wait for both.
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_subscribers", 0), 0);
  const std::string cancelled_subscribe =
      R"(attnscope_requests_total{code="CANCELLED",model="",origin="user",rpc="Subscribe"})";
  EXPECT_EQ(WaitForMetric(metrics, cancelled_subscribe, 1), 1);
  const std::string scrape = ScrapeMetrics(metrics);
  const auto requests = [&](const std::string& labels) {
    return MetricValue(scrape, "attnscope_requests_total{" + labels + "}");
  };
  EXPECT_EQ(requests(R"(code="OK",model="tiny-gpt2",origin="user",rpc="Analyze")"), 1);
  EXPECT_EQ(requests(R"(code="OK",model="tiny-gpt2",origin="dashboard",rpc="Analyze")"), 1);
  EXPECT_EQ(requests(R"(code="INVALID_ARGUMENT",model="tiny-gpt2",origin="user",rpc="Analyze")"),
            1);
  EXPECT_EQ(requests(R"(code="OK",model="tiny-gpt2",origin="user",rpc="Generate")"), 1);
  EXPECT_EQ(requests(R"(code="OK",model="",origin="user",rpc="ListModels")"), 1);
  EXPECT_EQ(requests(R"(code="CANCELLED",model="",origin="user",rpc="Subscribe")"), 1);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_request_duration_seconds_count{model="tiny-gpt2",)"
                                R"(origin="user",rpc="Analyze"})"),
            2);
  // Every request that got a slot waited for it (hardly at all here): the
  // analysis, the empty prompt (refused after admission) and the generation.
  EXPECT_EQ(
      MetricValue(scrape, R"(attnscope_queue_wait_seconds_count{model="tiny-gpt2",origin="user"})"),
      3);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_queue_wait_seconds_count{model="tiny-gpt2",)"
                                R"(origin="dashboard"})"),
            1);
  EXPECT_GT(MetricValue(scrape, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(MetricValue(scrape, "process_open_fds"), 2);
  EXPECT_THAT(scrape, HasSubstr("attnscope_build_info{revision=\""));
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_time_to_first_event_seconds_count{rpc="Analyze"})"),
            2);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_prompt_tokens_count{model="tiny-gpt2"})"), 2);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_context_health_count{model="tiny-gpt2"})"), 1);
  EXPECT_NEAR(MetricValue(scrape, R"(attnscope_context_health_sum{model="tiny-gpt2"})"),
              summary.health(), 1e-6);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_anomalous_sinks_count{model="tiny-gpt2"})"), 1);
  // One entropy per prompt position of the analysis and per generated token.
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_next_token_entropy_count{model="tiny-gpt2"})"),
            tokens + 5);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_generated_tokens_total{model="tiny-gpt2"})"), 5);
  // Progress: both analyses computed their 6 layers; none is pending.
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_analysis_layers_total{model="tiny-gpt2"})"), 12);
  EXPECT_EQ(MetricValue(scrape, R"(attnscope_analysis_layers_pending{model="tiny-gpt2"})"), 0);
  EXPECT_EQ(MetricValue(scrape, "attnscope_in_flight_requests"), 0);
  EXPECT_EQ(MetricValue(scrape, "attnscope_queued_requests"), 0);
  EXPECT_THAT(scrape, HasSubstr(R"(architecture="gpt2")"));
  EXPECT_THAT(scrape, HasSubstr(R"(layers="6")"));
}

}  // namespace
}  // namespace attnscope::testing
