// Generate over gRPC under flow control: cancelled by its client, stopped by
// its deadline, and many streams at once giving the single-client results.
#include <chrono>
#include <thread>

#include "google/protobuf/util/message_differencer.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// A Subscribe stream registered on the server once constructed.
class Feed {
 public:
  explicit Feed(v1::Analyzer::Stub& stub) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    reader_ = stub.Subscribe(&context_, v1::SubscribeRequest());
    reader_->WaitForInitialMetadata();
  }
  ~Feed() { context_.TryCancel(); }
  // The next RequestFinished of a `rpc` call (waits for it).
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

TEST_F(RpcTest, GenerateCancelledByItsClientStops) {
  StartServer();
  Feed feed(*stub_);
  LongGenerationCall call(server_->address(), "Once upon a time");
  auto& reader = call.reader;
  auto& event = call.event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_token());
  call.context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  const v1::RequestFinished finished = feed.NextFinished("Generate");
  EXPECT_EQ(finished.status(), "CANCELLED");
  EXPECT_THAT(finished.error_message(), HasSubstr("cancel"));
  EXPECT_LT(finished.generated_tokens(), 400);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, GenerateStopsAtItsDeadline) {
  StartServer();
  Feed feed(*stub_);
  LongGenerationCall call(server_->address(), "The weather today", 1.5);
  auto& reader = call.reader;
  auto& event = call.event;
  // Not reading: the server blocks on flow control until the deadline, and
  // the feed announces the end (the observable moment, no sleep).
  const v1::RequestFinished finished = feed.NextFinished("Generate");
  EXPECT_EQ(finished.status(), "DEADLINE_EXCEEDED");
  EXPECT_THAT(finished.error_message(), HasSubstr("deadline"));
  EXPECT_LT(finished.generated_tokens(), 400);
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(StillServes());
}

// The event without what differs run to run (timings, throughput).
v1::GenerateEvent Stable(v1::GenerateEvent event) {
  if (event.has_summary()) {
    event.mutable_summary()->clear_timings();
    event.mutable_summary()->clear_tokens_per_second();
  }
  return event;
}

TEST_F(RpcTest, ConcurrentGenerateStreamsMatchTheSingleClientResults) {
  StartServer({"--max-concurrent", "4"});
  std::vector<v1::GenerateRequest> requests;
  for (const char* text : {"The history of the city", "In the morning we", "A small dog",
                           "Rain fell on the"}) {
    requests.push_back(LongGeneration(text, 24));
  }
  requests[1].mutable_sampling()->set_temperature(0.8);  // sampled, seeded
  requests[1].mutable_sampling()->set_seed(77);
  std::vector<std::vector<v1::GenerateEvent>> single;
  for (const v1::GenerateRequest& request : requests) {
    GenerateResult r = RunGenerate(*stub_, request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    for (v1::GenerateEvent& e : r.events) e = Stable(std::move(e));
    single.push_back(std::move(r.events));
  }
  std::vector<GenerateResult> results(12);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] {
      auto stub = NewStub(server_->address());
      results[i] = RunGenerate(*stub, requests[i % requests.size()]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    const std::vector<v1::GenerateEvent>& want = single[i % requests.size()];
    ASSERT_EQ(results[i].events.size(), want.size()) << "client " << i;
    for (size_t e = 0; e < want.size(); ++e) {
      const v1::GenerateEvent got = Stable(results[i].events[e]);
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want[e]))
          << "client " << i << ", event " << e;
    }
  }
}

}  // namespace
}  // namespace attnscope::testing
