// The Subscribe feed at its limits on the real server: a subscriber that
// does not keep up loses events (counted in FeedEvent.dropped and in
// attnscope_feed_events_dropped_total) without slowing anyone down, and
// --max-subscribers turns away the subscriber beyond it.
#include <chrono>
#include <thread>

#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(RpcTest, SlowSubscriberLosesEventsAndTheCounterFollows) {
  StartServer();
  // The slow dashboard: a 1 KiB receive window and nobody reading, so the
  // server's per-subscriber queue (256 events) overflows.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto slow_stub = v1::Analyzer::NewStub(
      grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext feed_context;
  feed_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  v1::SubscribeRequest subscribe;
  subscribe.set_include_token_entropy(true);
  auto feed = slow_stub->Subscribe(&feed_context, subscribe);
  feed->WaitForInitialMetadata();
  EXPECT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_subscribers", 1), 1);

  // 1 started + 480 token events + 1 finished, at full speed.
  v1::GenerateRequest generate;
  generate.set_text("Hello");
  generate.set_max_new_tokens(480);
  generate.set_stop_at_eos(false);
  // A generous deadline: 480 tokens with per-token entropy took 130 s on a
  // 2-core machine at load 18, past the default 120 s (this is no timing test).
  const GenerateResult generated = RunGenerate(*stub_, generate, /*deadline_seconds=*/600);
  ASSERT_TRUE(generated.status.ok()) << generated.status.error_message();
  const int64_t produced = 2 + generated.events.back().summary().generated_tokens();
  ASSERT_EQ(produced, 482);

  // What was not dropped is queued or in flight: read exactly that much (the
  // queue is then empty), then a later request arrives carrying the count.
  const double counter =
      MetricValue(ScrapeMetrics(server_->metrics_address()), "attnscope_feed_events_dropped_total");
  ASSERT_GT(counter, 0) << "nothing was dropped: the subscriber kept up";
  ASSERT_LT(counter, produced);
  // Each event carries the count lost so far when it was sent: 0 for those
  // sent before the queue overflowed, then the final count.
  v1::FeedEvent event;
  uint64_t generation_id = 0, previous = 0;
  for (int64_t i = 0; i < produced - static_cast<int64_t>(counter); ++i) {
    ASSERT_TRUE(feed->Read(&event)) << "event " << i;
    if (i == 0) {
      EXPECT_TRUE(event.has_started());
      EXPECT_EQ(event.dropped(), 0u);
      generation_id = event.request_id();
    }
    EXPECT_EQ(event.request_id(), generation_id) << "event " << i;
    EXPECT_GE(event.dropped(), previous) << "event " << i << ": the count never decreases";
    EXPECT_LE(event.dropped(), static_cast<uint64_t>(counter)) << "event " << i;
    previous = event.dropped();
  }
  EXPECT_EQ(previous, static_cast<uint64_t>(counter)) << "the subscriber saw its count rise";
  std::thread later([&] {
    auto other = NewStub(server_->address());
    EXPECT_TRUE(RunAnalyze(*other, TextRequest("After the flood")).status.ok());
  });
  ASSERT_TRUE(feed->Read(&event));
  EXPECT_TRUE(event.has_started());
  EXPECT_EQ(event.started().rpc(), "Analyze");
  EXPECT_EQ(event.dropped(), static_cast<uint64_t>(counter));
  ASSERT_TRUE(feed->Read(&event));
  EXPECT_TRUE(event.has_finished());
  EXPECT_EQ(event.dropped(), static_cast<uint64_t>(counter));
  later.join();
  // The counter followed the subscriber's count, and nothing more was lost.
  EXPECT_EQ(MetricValue(ScrapeMetrics(server_->metrics_address()),
                        "attnscope_feed_events_dropped_total"),
            counter);
  feed_context.TryCancel();
}

TEST_F(RpcTest, MaxSubscribersTurnsAwayTheOneTooMany) {
  StartServer({"--max-subscribers", "1"});
  auto first_context = std::make_unique<grpc::ClientContext>();
  auto first = stub_->Subscribe(first_context.get(), v1::SubscribeRequest());
  first->WaitForInitialMetadata();
  ASSERT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_subscribers", 1), 1);

  grpc::ClientContext second_context;
  auto second = stub_->Subscribe(&second_context, v1::SubscribeRequest());
  v1::FeedEvent event;
  EXPECT_FALSE(second->Read(&event));
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-subscribers 1"));
  EXPECT_TRUE(StillServes());  // requests are not subscribers

  // Once the first one leaves (the gauge says when), there is room again.
  first_context->TryCancel();
  while (first->Read(&event)) {
  }
  first->Finish();
  ASSERT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_subscribers", 0), 0);
  grpc::ClientContext third_context;
  auto third = stub_->Subscribe(&third_context, v1::SubscribeRequest());
  third->WaitForInitialMetadata();
  EXPECT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_subscribers", 1), 1);
  std::thread request([&] {
    auto other = NewStub(server_->address());
    EXPECT_TRUE(RunAnalyze(*other, TextRequest("Room again")).status.ok());
  });
  ASSERT_TRUE(third->Read(&event));
  EXPECT_TRUE(event.has_started());
  request.join();
  third_context.TryCancel();
}

}  // namespace
}  // namespace attnscope::testing
