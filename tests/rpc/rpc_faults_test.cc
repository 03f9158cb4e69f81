// Faults on the real server: kill -9 in the middle of streams, then a
// restart on the same port. Clients see UNAVAILABLE and succeed on retry on
// the same channel (the one every attnscope client uses). The slow
// subscriber is rpc_feed_limits_test's; several replicas, replicas_test's.
#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "service/rpc/client_channel.h"
#include "tests/rpc/rpc_security_fixture.h"

namespace attnscope::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Retries `call` while it fails with UNAVAILABLE (the server restarting and
// the channel reconnecting), for at most 60 s; returns the last status.
template <typename Call>
grpc::Status RetryWhileUnavailable(Call call, int* attempts) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  grpc::Status status;
  do {
    ++*attempts;
    status = call();
  } while (status.error_code() == grpc::StatusCode::UNAVAILABLE && Clock::now() < deadline);
  return status;
}

TEST_F(RpcSecurityTest, KillNineMidStreamThenRestartOnTheSamePort) {
  StartServer();
  const std::string address = server_->address();
  const auto channel = rpc::CreateClientChannel(address);
  auto stub = v1::Analyzer::NewStub(channel);

  grpc::ClientContext feed_context;
  auto feed = stub->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  grpc::ClientContext generate_context;
  v1::GenerateRequest long_generation;
  long_generation.set_text("Once upon a time");
  long_generation.set_max_new_tokens(500);
  long_generation.set_stop_at_eos(false);
  auto generation = stub->Generate(&generate_context, long_generation);
  v1::GenerateEvent event;
  // The prompt, then the first generated token: the stream is under way.
  ASSERT_TRUE(generation->Read(&event));
  ASSERT_TRUE(generation->Read(&event));
  ASSERT_TRUE(event.has_token());

  ASSERT_EQ(server_->StopWith(SIGKILL, 30), 128 + SIGKILL);
  while (generation->Read(&event)) {
    ASSERT_FALSE(event.has_summary()) << "the generation finished before the kill";
  }
  EXPECT_EQ(generation->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::FeedEvent feed_event;
  while (feed->Read(&feed_event)) {
  }
  EXPECT_EQ(feed->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // Nothing listens now: a call fails at once with UNAVAILABLE.
  EXPECT_EQ(ListModelsCode(*stub), grpc::StatusCode::UNAVAILABLE);

  StartServer({"--listen", address});
  ASSERT_EQ(server_->address(), address);
  // The same channel reconnects by itself (its back-off is capped at 5 s):
  // wait for that, observably, rather than spin on calls that fail at once.
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(60)));
  int attempts = 0;
  const grpc::Status analyzed = RetryWhileUnavailable(
      [&] { return RunAnalyze(*stub, TextRequest("After the restart"), 60).status; }, &attempts);
  EXPECT_TRUE(analyzed.ok()) << analyzed.error_message();
  std::cerr << "analyze succeeded after " << attempts << " attempt(s) once reconnected\n";
  grpc::ClientContext again_context;
  auto again = stub->Subscribe(&again_context, v1::SubscribeRequest());
  again->WaitForInitialMetadata();
  std::thread request([&] { EXPECT_TRUE(RunAnalyze(*stub, TextRequest("Seen")).status.ok()); });
  ASSERT_TRUE(again->Read(&feed_event));
  EXPECT_TRUE(feed_event.has_started());
  request.join();
  again_context.TryCancel();
}

}  // namespace
}  // namespace attnscope::testing
