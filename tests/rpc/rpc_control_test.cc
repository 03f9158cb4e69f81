// Flow control of the service: client cancellation and deadlines stop the
// computation (seen from the server's side through the Subscribe feed), and
// admission control queues or turns away requests beyond its limits.
#include <chrono>
#include <thread>

#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// A 512-token analysis that asks for every attention tensor (36 MiB): a
// client that stops reading leaves it blocked mid-stream, holding its slot.
v1::AnalyzeRequest HeavyRequest() {
  v1::AnalyzeRequest request = IdsRequest(SampleIds(512));
  request.mutable_options()->set_return_attention(true);
  return request;
}

// An Analyze call left open after its first event.
struct OpenCall {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::AnalyzeEvent>> reader;
  v1::AnalyzeEvent first;
};

std::unique_ptr<OpenCall> Open(v1::Analyzer::Stub& stub, const v1::AnalyzeRequest& request,
                               double deadline_seconds = 120) {
  auto call = std::make_unique<OpenCall>();
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1e3)));
  call->reader = stub.Analyze(&call->context, request);
  EXPECT_TRUE(call->reader->Read(&call->first));
  return call;
}

// A Subscribe stream that is registered on the server once constructed.
class Feed {
 public:
  explicit Feed(v1::Analyzer::Stub& stub) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    reader_ = stub.Subscribe(&context_, v1::SubscribeRequest());
    reader_->WaitForInitialMetadata();
  }
  ~Feed() { context_.TryCancel(); }

  // The next RequestFinished of an `rpc` call.
  v1::RequestFinished NextFinished(const std::string& rpc) {
    v1::FeedEvent event;
    while (reader_->Read(&event)) {
      if (event.has_finished() && event.finished().rpc() == rpc) return event.finished();
    }
    ADD_FAILURE() << "the feed ended without a finished " << rpc;
    return {};
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::FeedEvent>> reader_;
};

TEST_F(RpcTest, ClientCancelMidStreamStopsTheAnalysis) {
  StartServer();
  Feed feed(*stub_);
  auto call = Open(*stub_, HeavyRequest());
  ASSERT_TRUE(call->first.has_tokens());
  v1::AnalyzeEvent event;
  ASSERT_TRUE(call->reader->Read(&event));
  ASSERT_TRUE(event.has_layer());
  EXPECT_EQ(event.layer().layer(), 0);
  call->context.TryCancel();
  while (call->reader->Read(&event)) {
  }
  EXPECT_EQ(call->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  const v1::RequestFinished finished = feed.NextFinished("Analyze");
  EXPECT_EQ(finished.status(), "CANCELLED");
  EXPECT_THAT(finished.error_message(), HasSubstr("cancelled"));
  EXPECT_THAT(finished.error_message(), HasSubstr("of 6 layers"));
  EXPECT_THAT(finished.error_message(), ::testing::Not(HasSubstr("after 6 of 6")));
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, DeadlineStopsALongAnalysis) {
  StartServer();
  Feed feed(*stub_);
  auto call = Open(*stub_, HeavyRequest(), 0.5);
  ASSERT_TRUE(call->first.has_tokens());
  // Not reading: the server blocks on flow control until the deadline; the
  // feed tells when the server has ended the call.
  const v1::RequestFinished finished = feed.NextFinished("Analyze");
  v1::AnalyzeEvent event;
  while (call->reader->Read(&event)) {
  }
  EXPECT_EQ(call->reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  EXPECT_EQ(finished.status(), "DEADLINE_EXCEEDED");
  EXPECT_THAT(finished.error_message(), HasSubstr("deadline"));
  EXPECT_THAT(finished.error_message(), ::testing::Not(HasSubstr("after 6 of 6")));
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, ExpiredDeadlineOnAShortRequestIsDeadlineExceeded) {
  StartServer();
  const AnalyzeResult r = RunAnalyze(*stub_, IdsRequest(SampleIds(512)), 0.001);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, ConcurrentRequestsBeyondTheLimitsAreResourceExhausted) {
  StartServer({"--max-concurrent", "1", "--max-queue", "0"});
  auto holder = Open(*stub_, HeavyRequest());
  ASSERT_TRUE(holder->first.has_tokens());
  std::vector<grpc::Status> statuses(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < statuses.size(); ++i) {
    clients.emplace_back([&, i] {
      auto stub = NewStub(server_->address());
      statuses[i] = RunAnalyze(*stub, TextRequest("Anyone there?")).status;
    });
  }
  for (std::thread& t : clients) t.join();
  for (const grpc::Status& s : statuses) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("--max-concurrent 1"));
    EXPECT_THAT(s.error_message(), HasSubstr("--max-queue 0"));
  }
  holder->context.TryCancel();
  v1::AnalyzeEvent event;
  while (holder->reader->Read(&event)) {
  }
  holder->reader->Finish();
  // The slot frees once the server has noticed the cancellation.
  EXPECT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_in_flight_requests", 0), 0);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, QueuedRequestWaitsForTheSlotThenRuns) {
  StartServer({"--max-concurrent", "1", "--max-queue", "1"});
  auto holder = Open(*stub_, HeavyRequest());
  ASSERT_TRUE(holder->first.has_tokens());
  AnalyzeResult queued;
  std::thread waiter([&] {
    auto stub = NewStub(server_->address());
    queued = RunAnalyze(*stub, TextRequest("Waiting in line"));
  });
  // The queued gauge tells when the waiter is in line.
  ASSERT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_queued_requests", 1), 1);
  const auto in_line = std::chrono::steady_clock::now();
  EXPECT_EQ(MetricValue(ScrapeMetrics(server_->metrics_address()),
                        "attnscope_in_flight_requests"), 1);
  const grpc::Status third = RunAnalyze(*stub_, TextRequest("One too many")).status;
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third.error_message(), HasSubstr("1 waiting (--max-queue 1)"));
  const double waited_at_least =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - in_line).count();
  holder->context.TryCancel();
  v1::AnalyzeEvent event;
  while (holder->reader->Read(&event)) {
  }
  holder->reader->Finish();
  waiter.join();
  ASSERT_TRUE(queued.status.ok()) << queued.status.error_message();
  ASSERT_TRUE(queued.events.back().has_summary());
  // It reports the time it spent in line, at least what the test saw.
  EXPECT_GE(queued.events.back().summary().timings().queued_seconds(), waited_at_least);
}

}  // namespace
}  // namespace attnscope::testing
