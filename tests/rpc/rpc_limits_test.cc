// The server's per-request limits through the real server: each refusal
// names the limit and its flag, and the server keeps serving afterwards.
// (--max-prompt-tokens and --max-subscribers: rpc_errors_test and
// rpc_feed_limits_test.)
#include <chrono>

#include "tests/cli/run_cli.h"
#include "tests/rpc/rpc_security_fixture.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// tiny-gpt2: 6 layers x 6 heads.
constexpr int kLayers = 6;
constexpr int kHeads = 6;

v1::AnalyzeRequest AttentionRequest(int tokens, v1::TensorDtype dtype) {
  std::vector<int64_t> ids;
  for (int i = 0; i < tokens; ++i) ids.push_back(464 + i);
  v1::AnalyzeRequest request = IdsRequest(ids);
  request.mutable_options()->set_return_attention(true);
  request.mutable_options()->set_attention_dtype(dtype);
  return request;
}

TEST_F(RpcSecurityTest, MaxNewTokensRefusesLongerGenerations) {
  StartServer({"--max-new-tokens", "8"});
  v1::GenerateRequest request;
  request.set_text("Once upon a time");
  request.set_stop_at_eos(false);
  request.set_max_new_tokens(9);
  const grpc::Status refused = RunGenerate(*stub_, request).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("max_new_tokens: 9 is over the server's limit of 8"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-new-tokens"));
  request.set_max_new_tokens(8);
  const GenerateResult allowed = RunGenerate(*stub_, request);
  ASSERT_TRUE(allowed.status.ok()) << allowed.status.error_message();
  EXPECT_EQ(allowed.events.back().summary().generated_tokens(), 8);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcSecurityTest, MaxAttentionBytesRefusesLargerTensorRequests) {
  constexpr int kTokens = 10;
  const int64_t all_float32 = int64_t{kLayers} * kHeads * kTokens * kTokens * 4;
  StartServer({"--max-attention-bytes", std::to_string(all_float32 - 1)});
  const grpc::Status refused =
      RunAnalyze(*stub_, AttentionRequest(kTokens, v1::TENSOR_DTYPE_FLOAT32)).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("6 layers x 6 heads x 10^2 x 4 bytes = " + std::to_string(all_float32)));
  EXPECT_THAT(refused.error_message(), HasSubstr("limit of " + std::to_string(all_float32 - 1)));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-attention-bytes"));
  // Half the bytes, or one layer, fit.
  const AnalyzeResult half = RunAnalyze(*stub_, AttentionRequest(kTokens, v1::TENSOR_DTYPE_FLOAT16));
  ASSERT_TRUE(half.status.ok()) << half.status.error_message();
  int64_t received = 0;
  for (const v1::AnalyzeEvent& e : half.events) {
    if (e.has_attention()) received += static_cast<int64_t>(e.attention().data().size());
  }
  EXPECT_EQ(received, all_float32 / 2);
  v1::AnalyzeRequest one_layer = AttentionRequest(kTokens, v1::TENSOR_DTYPE_FLOAT32);
  one_layer.mutable_options()->add_attention_layers(0);
  const AnalyzeResult layer = RunAnalyze(*stub_, one_layer);
  ASSERT_TRUE(layer.status.ok()) << layer.status.error_message();
  received = 0;
  for (const v1::AnalyzeEvent& e : layer.events) {
    if (e.has_attention()) received += static_cast<int64_t>(e.attention().data().size());
  }
  EXPECT_EQ(received, all_float32 / kLayers);
  // Statistics without tensors are never limited.
  const AnalyzeResult stats = RunAnalyze(*stub_, IdsRequest(std::vector<int64_t>(200, 464)));
  ASSERT_TRUE(stats.status.ok()) << stats.status.error_message();
  ASSERT_FALSE(stats.events.empty());
  EXPECT_TRUE(stats.events.back().has_summary());
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcSecurityTest, MaxStreamsPerClientRefusesTheOneTooMany) {
  StartServer({"--max-streams-per-client", "1"});
  auto feed_context = std::make_unique<grpc::ClientContext>();
  auto feed = stub_->Subscribe(feed_context.get(), v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  const grpc::Status refused = RunAnalyze(*stub_, TextRequest("One too many")).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("client ipv4:127.0.0.1 already has 1 streams"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-streams-per-client 1"));
  {  // EvaluateEviction holds a stream like Analyze and Generate.
    v1::EvaluateEvictionRequest eviction;
    eviction.set_text("One too many");
    eviction.add_policies("window:4");
    grpc::ClientContext context;
    auto reader = stub_->EvaluateEviction(&context, eviction);
    v1::EvaluateEvictionEvent event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Another connection from the same host counts too; unary calls do not.
  EXPECT_EQ(RunAnalyze(*NewStub(server_->address()), TextRequest("Other channel")).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ListModelsCode(*stub_), grpc::StatusCode::OK);

  // Once the feed ends its place is given back (when its handler returns,
  // which the client cannot see: retried until then, bounded).
  feed_context->TryCancel();
  v1::FeedEvent event;
  while (feed->Read(&event)) {
  }
  feed->Finish();
  grpc::Status again;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    again = RunAnalyze(*stub_, TextRequest("Room again")).status;
  } while (again.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcSecurityTest, MaxMessageBytesNamesTheFlagAndGrpcCapsTwiceIt) {
  StartServer({"--max-message-bytes", "2048"});
  const grpc::Status refused = RunAnalyze(*stub_, TextRequest(std::string(3000, 'a'))).status;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("over the server's limit of 2048 bytes"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-message-bytes"));
  // Beyond twice the limit gRPC refuses it before the service reads it.
  const grpc::Status huge = RunAnalyze(*stub_, TextRequest(std::string(5000, 'a'))).status;
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(huge.error_message(), HasSubstr("larger than max"));
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcSecurityTest, LimitFlagsAreCheckedAndListedInHelp) {
  const CliResult help = RunBinary("attnscope-server", {"--help"}, 60);
  for (const char* flag : {"--max-new-tokens", "--max-attention-bytes", "--max-streams-per-client",
                           "--max-message-bytes", "--tls-cert", "--tls-key", "--tls-client-ca",
                           "--auth-token-file"}) {
    EXPECT_THAT(help.out, HasSubstr(flag));
  }
  const CliResult bad = RunBinary("attnscope-server", {"--max-streams-per-client", "-1"}, 60);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--max-streams-per-client: '-1' is not an integer in [0, 65536]"));
}

}  // namespace
}  // namespace attnscope::testing
