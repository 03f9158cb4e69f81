// Many clients at once, and the server's orderly shutdown on SIGTERM.
#include <signal.h>

#include <thread>

#include "google/protobuf/util/message_differencer.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

std::vector<v1::AnalyzeRequest> MixedRequests() {
  std::vector<v1::AnalyzeRequest> requests = {
      TextRequest("The cat sat on the mat because the mat was warm."),
      TextRequest("<|im_start|>user\nWhat is a sink token?<|im_end|>\n"),
      IdsRequest(SampleIds(200)),
      IdsRequest(SampleIds(64)),
  };
  v1::AnalyzeOptions* o = requests[3].mutable_options();
  o->set_return_attention(true);
  o->add_attention_layers(2);
  o->add_attention_heads(3);
  o->set_attention_dtype(v1::TENSOR_DTYPE_FLOAT16);
  requests[1].mutable_options()->set_template_("chatml");
  return requests;
}

void ExpectSameEvents(const std::vector<v1::AnalyzeEvent>& got,
                      const std::vector<v1::AnalyzeEvent>& want, size_t client) {
  ASSERT_EQ(got.size(), want.size()) << "client " << client;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got[i], want[i]))
        << "client " << client << ", event " << i;
  }
}

TEST_F(RpcTest, SixteenConcurrentStreamsMatchTheSingleClientResults) {
  // Four forward passes at once (the rest queued), so they really interleave.
  StartServer({"--max-concurrent", "4"});
  const std::vector<v1::AnalyzeRequest> requests = MixedRequests();
  std::vector<std::vector<v1::AnalyzeEvent>> single;
  for (const v1::AnalyzeRequest& request : requests) {
    AnalyzeResult r = RunAnalyze(*stub_, request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    single.push_back(WithoutTimings(std::move(r.events)));
  }
  std::vector<AnalyzeResult> results(16);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] {
      auto stub = NewStub(server_->address());
      results[i] = RunAnalyze(*stub, requests[i % requests.size()]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    ExpectSameEvents(WithoutTimings(results[i].events), single[i % requests.size()], i);
  }
}

// A 512-token analysis with every attention tensor: it stays in flight while
// its client is not reading.
v1::AnalyzeRequest HeavyRequest() {
  v1::AnalyzeRequest request = IdsRequest(SampleIds(512));
  request.mutable_options()->set_return_attention(true);
  return request;
}

TEST_F(RpcTest, SigtermDrainsInFlightRequestsAndExitsZero) {
  StartServer({"--drain-seconds", "600"});
  // A dashboard on the feed: its stream must end when the server stops.
  grpc::ClientContext feed_context;
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  grpc::ClientContext context;
  auto reader = stub_->Analyze(&context, HeavyRequest());
  v1::AnalyzeEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_tokens());
  grpc::Status feed_status(grpc::StatusCode::UNKNOWN, "not finished");
  std::thread dashboard([&] {
    v1::FeedEvent feed_event;
    while (feed->Read(&feed_event)) {
    }
    feed_status = feed->Finish();
  });

  server_->Signal(SIGTERM);
  // The drain has begun while the analysis is blocked mid-stream.
  ASSERT_TRUE(server_->WaitForStderr("draining", 60)) << server_->Stderr();
  size_t layers = 0, chunks = 0;
  bool summary = false;
  while (reader->Read(&event)) {
    layers += event.has_layer();
    chunks += event.has_attention();
    summary = summary || event.has_summary();
  }
  const grpc::Status status = reader->Finish();
  dashboard.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(layers, 6u);
  EXPECT_EQ(chunks, 36u);
  EXPECT_TRUE(summary);
  // It exits once the request is done: well before the 600 s drain limit
  // (the bound only catches a server that waits for the limit).
  EXPECT_EQ(server_->WaitForExit(300), 0);
  EXPECT_TRUE(feed_status.ok()) << feed_status.error_message();
}

// A client that never reads keeps its handler blocked on flow control: the
// drain limit, not the client, ends the call and the server exits 0. Were the
// server waiting for the client, it would never exit (the call has no
// deadline): StopWith's 60 s only bounds the wait. That a drain lets
// in-flight calls finish is SigtermDrainsInFlightRequestsAndExitsZero's.
TEST_F(RpcTest, DrainIsBoundedWhenAClientStalls) {
  StartServer({"--drain-seconds", "1"});
  grpc::ClientContext context;
  auto reader = stub_->Analyze(&context, HeavyRequest());
  v1::AnalyzeEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(server_->StopWith(SIGTERM, 60), 0) << server_->Stderr();
  EXPECT_THAT(server_->Stderr(), HasSubstr("draining"));
  EXPECT_THAT(server_->Stderr(), HasSubstr("attnscope-server: stopped"));
  size_t summaries = 0;
  while (reader->Read(&event)) summaries += event.has_summary();
  EXPECT_EQ(summaries, 0u) << "the stalled call was not cut off";
  const grpc::Status status = reader->Finish();
  // UNAVAILABLE, usually with the drain's message ("did not finish within
  // its 1 s drain"); the server exits right after cancelling the call, so on
  // a loaded machine the client may see the connection close first ("Broken
  // pipe"). ClientCutOffAtTheDrainLimitIsToldWhy checks the message.
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

}  // namespace
}  // namespace attnscope::testing
