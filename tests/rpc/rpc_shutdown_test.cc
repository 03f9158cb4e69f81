// The server's shutdown as an operator and its clients see it: health turns
// NOT_SERVING as soon as the drain begins, SIGINT drains like SIGTERM, a
// second signal exits at once, and a client cut off at the drain limit is
// told why.
#include <signal.h>

#include <chrono>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;
using HealthResponse = grpc::health::v1::HealthCheckResponse;

// A 512-token analysis with every attention tensor: it stays in flight while
// its client is not reading.
v1::AnalyzeRequest HeavyRequest() {
  v1::AnalyzeRequest request = IdsRequest(SampleIds(512));
  request.mutable_options()->set_return_attention(true);
  return request;
}

// An Analyze call held open (its client not reading) after the first event.
struct HeldCall {
  explicit HeldCall(v1::Analyzer::Stub& stub) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    reader = stub.Analyze(&context, HeavyRequest());
    EXPECT_TRUE(reader->Read(&event));
    EXPECT_TRUE(event.has_tokens());
  }
  // Reads the rest (the last event read stays in `last`); the call's status.
  grpc::Status Drain() {
    while (reader->Read(&event)) last = event;
    return reader->Finish();
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::AnalyzeEvent>> reader;
  v1::AnalyzeEvent event, last;
};

TEST_F(RpcTest, HealthTurnsNotServingAsSoonAsTheDrainBegins) {
  StartServer({"--drain-seconds", "600"});
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext watch_context;
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("attnscope.v1.Analyzer");
  auto watch = health->Watch(&watch_context, request);
  HealthResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthResponse::SERVING);

  HeldCall held(*stub_);  // keeps the drain going until it is read
  server_->Signal(SIGTERM);
  // The next health update arrives while the request is still in flight.
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthResponse::NOT_SERVING);
  EXPECT_THAT(server_->Stderr(), ::testing::Not(HasSubstr("stopped")));
  // The held request still completes, then the server exits 0.
  EXPECT_TRUE(held.Drain().ok());
  watch_context.TryCancel();
  EXPECT_EQ(server_->WaitForExit(300), 0);
}

TEST_F(RpcTest, SigintDrainsLikeSigterm) {
  StartServer({"--drain-seconds", "600"});
  HeldCall held(*stub_);
  server_->Signal(SIGINT);
  ASSERT_TRUE(server_->WaitForStderr("SIGINT, draining in-flight requests", 60))
      << server_->Stderr();
  const grpc::Status status = held.Drain();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(held.last.has_summary());
  EXPECT_EQ(server_->WaitForExit(300), 0);
  EXPECT_THAT(server_->Stderr(), HasSubstr("stopped"));
}

TEST_F(RpcTest, SecondSignalDuringTheDrainExitsAtOnce) {
  for (int signal : {SIGINT, SIGTERM}) {
    StartServer({"--drain-seconds", "600"});
    HeldCall held(*stub_);
    server_->Signal(signal);
    ASSERT_TRUE(server_->WaitForStderr("draining", 60)) << server_->Stderr();
    server_->Signal(signal);
    // Not the 600 s drain: the held request is still unread.
    EXPECT_EQ(server_->WaitForExit(300), 128 + signal);
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_THAT(server_->Stderr(), HasSubstr("second " + name + " during the drain: exiting now"));
    EXPECT_FALSE(held.Drain().ok());
  }
}

// A client still reading when the drain ends is told why its stream stopped.
// It reads its long generation slowly (one event per 10 ms: pacing a slow
// consumer, not waiting for anything), and through a 1 KiB window the server
// goes at its pace, so 400 tokens outlast the 0.2 s drain by seconds. A
// client that reads nothing at all until the server has gone cannot be told:
// the status waits behind the bytes it has not read, and the server's exit
// may reset the connection first ("Broken pipe"; DrainIsBoundedWhenAClientStalls
// covers that the server still exits in bounded time).
TEST_F(RpcTest, ClientCutOffAtTheDrainLimitIsToldWhy) {
  StartServer({"--drain-seconds", "0.2", "--max-concurrent", "1"});
  LongGenerationCall call(server_->address(), "Once upon a time");
  auto& reader = call.reader;
  auto& event = call.event;
  // A second request waits in the queue behind it (--max-concurrent 1), and is
  // told too.
  grpc::Status queued_status;
  std::thread queued([&] { queued_status = RunAnalyze(*stub_, TextRequest("queued"), 300).status; });
  ASSERT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_queued_requests", 1), 1);
  server_->Signal(SIGTERM);
  int tokens = 0;
  while (reader->Read(&event)) {
    if (event.has_token()) ++tokens;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const grpc::Status status = reader->Finish();
  queued.join();
  for (const grpc::Status& s : {status, queued_status}) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
        << s.error_code() << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("shutting down"));
    EXPECT_THAT(s.error_message(), HasSubstr("within its 0.2 s drain"));
    EXPECT_THAT(s.error_message(), HasSubstr("--drain-seconds"));
  }
  // Told where it stopped: in the queue, or at layer 0 if the generation's
  // end gave it the slot first.
  EXPECT_THAT(queued_status.error_message(),
              ::testing::AnyOf(HasSubstr("(stopped while it waited for a free slot)"),
                               HasSubstr("(stopped after 0 of 6 layers)")));
  EXPECT_LT(tokens, 400);
  EXPECT_EQ(server_->WaitForExit(300), 0);
  EXPECT_THAT(server_->Stderr(), HasSubstr("stopped"));
}

}  // namespace
}  // namespace attnscope::testing
