// Every kind of bad request gets its status code and a message naming the
// field, the value and the limit, and the server keeps serving afterwards.
#include <cmath>
#include <limits>

#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// Expects `code` and every substring in the message.
void ExpectError(const grpc::Status& status, grpc::StatusCode code,
                 const std::vector<std::string>& parts) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  for (const std::string& part : parts) EXPECT_THAT(status.error_message(), HasSubstr(part));
}

class RpcErrorTest : public RpcTest {
 protected:
  void TearDown() override {
    if (stub_ != nullptr) {
      EXPECT_TRUE(StillServes()) << "the server stopped serving after the error";
    }
  }

  grpc::Status Analyze(const v1::AnalyzeRequest& request) {
    return RunAnalyze(*stub_, request).status;
  }

  v1::GenerateRequest GoodGenerate() {
    v1::GenerateRequest request;
    request.set_text("Once upon a time");
    request.set_max_new_tokens(4);
    return request;
  }
};

TEST_F(RpcErrorTest, EmptyTextIsInvalidArgument) {
  StartServer();
  ExpectError(Analyze(TextRequest("")), grpc::StatusCode::INVALID_ARGUMENT,
              {"text:", "empty"});
}

TEST_F(RpcErrorTest, MissingPromptIsInvalidArgument) {
  StartServer();
  ExpectError(Analyze(v1::AnalyzeRequest()), grpc::StatusCode::INVALID_ARGUMENT,
              {"prompt:", "none of text, ids or chat"});
}

TEST_F(RpcErrorTest, EmptyIdListIsInvalidArgument) {
  StartServer();
  ExpectError(Analyze(IdsRequest({})), grpc::StatusCode::INVALID_ARGUMENT,
              {"ids:", "no token ids"});
}

TEST_F(RpcErrorTest, InvalidUtf8NamesTheByteOffset) {
  StartServer();
  ExpectError(Analyze(TextRequest("caf\xc3\x28 au lait")), grpc::StatusCode::INVALID_ARGUMENT,
              {"text:", "invalid UTF-8 at byte 3"});
}

TEST_F(RpcErrorTest, PromptOverTheServerLimitNamesBothNumbers) {
  StartServer({"--max-prompt-tokens", "100"});
  ExpectError(Analyze(IdsRequest(std::vector<int64_t>(101, 464))),
              grpc::StatusCode::INVALID_ARGUMENT,
              {"prompt: 101 tokens", "limit of 100", "--max-prompt-tokens"});
}

TEST_F(RpcErrorTest, PromptOverTheModelPositionsNamesBothNumbers) {
  StartServer();
  ExpectError(Analyze(IdsRequest(std::vector<int64_t>(513, 464))),
              grpc::StatusCode::INVALID_ARGUMENT,
              {"prompt: 513 tokens", "512 positions", "tiny-gpt2"});
}

TEST_F(RpcErrorTest, TokenIdOutsideTheVocabulary) {
  StartServer();
  ExpectError(Analyze(IdsRequest({464, 50257})), grpc::StatusCode::INVALID_ARGUMENT,
              {"ids:", "50257", "position 1", "[0, 50257)"});
}

TEST_F(RpcErrorTest, UnknownModelIsNotFoundAndListsTheLoadedOnes) {
  StartServer();
  v1::AnalyzeRequest request = TextRequest("hello");
  request.set_model("gpt-5");
  ExpectError(Analyze(request), grpc::StatusCode::NOT_FOUND,
              {"'gpt-5' is not loaded", "tiny-gpt2"});
}

TEST_F(RpcErrorTest, TextForAModelWithoutTokenizer) {
  StartServer({"--model", "tiny-gpt2=" + BundledModelDir(), "--model",
               "fixture=" + FixtureModelDir()});
  v1::AnalyzeRequest request = TextRequest("hello");
  request.set_model("fixture");
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"text:", "'fixture' has no tokenizer", "ids"});
}

TEST_F(RpcErrorTest, AttentionLayerOutOfRange) {
  StartServer();
  v1::AnalyzeRequest request = TextRequest("hello there");
  request.mutable_options()->set_return_attention(true);
  request.mutable_options()->add_attention_layers(2);
  request.mutable_options()->add_attention_layers(6);
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.attention_layers[1]", "layer 6", "[0, 6)"});
}

TEST_F(RpcErrorTest, AttentionHeadOutOfRange) {
  StartServer();
  v1::AnalyzeRequest request = TextRequest("hello there");
  request.mutable_options()->set_return_attention(true);
  request.mutable_options()->add_attention_heads(-1);
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.attention_heads[0]", "head -1", "[0, 6)"});
}

TEST_F(RpcErrorTest, BadAnalyzeOptions) {
  StartServer();
  v1::AnalyzeRequest request = TextRequest("hello there");
  request.mutable_options()->set_threshold(std::numeric_limits<double>::quiet_NaN());
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.threshold", "nan"});
  for (double threshold : {-3.0, 0.0}) {
    request = TextRequest("hello there");
    request.mutable_options()->set_threshold(threshold);
    ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
                {"options.threshold", "positive finite z-score"});
  }
  for (double epsilon : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    request = TextRequest("hello there");
    request.mutable_options()->set_sink_epsilon(epsilon);
    ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
                {"options.sink_epsilon", "[0, 1]"});
  }
  request = TextRequest("hello there");
  request.mutable_options()->set_template_("jinja");
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.template", "jinja"});
  request = TextRequest("hello there");
  request.mutable_options()->set_query_block_size(-4);
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.query_block_size", "-4", ">= 0"});
  request = TextRequest("hello there");
  request.mutable_options()->set_attention_dtype(static_cast<v1::TensorDtype>(9));
  ExpectError(Analyze(request), grpc::StatusCode::INVALID_ARGUMENT,
              {"options.attention_dtype", "9"});
}

TEST_F(RpcErrorTest, BadSamplingParameters) {
  StartServer();
  struct Case {
    std::function<void(v1::GenerateRequest*)> change;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](v1::GenerateRequest* r) { r->mutable_sampling()->set_temperature(-0.5); },
       {"temperature=-0.5"}},
      {[](v1::GenerateRequest* r) { r->mutable_sampling()->set_temperature(NAN); },
       {"temperature=nan"}},
      {[](v1::GenerateRequest* r) { r->mutable_sampling()->set_top_k(-3); }, {"top_k=-3"}},
      {[](v1::GenerateRequest* r) { r->mutable_sampling()->set_top_p(1.5); },
       {"top_p=1.5", "[0, 1]"}},
      {[](v1::GenerateRequest* r) { r->set_max_new_tokens(0); }, {"max_new_tokens=0"}},
      {[](v1::GenerateRequest* r) { r->set_num_alternatives(21); }, {"num_alternatives=21"}},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = GoodGenerate();
    c.change(&request);
    ExpectError(RunGenerate(*stub_, request).status, grpc::StatusCode::INVALID_ARGUMENT, c.parts);
  }
}

TEST_F(RpcErrorTest, GenerationBeyondTheModelPositions) {
  StartServer();
  v1::GenerateRequest request = GoodGenerate();
  request.set_max_new_tokens(510);
  ExpectError(RunGenerate(*stub_, request).status, grpc::StatusCode::INVALID_ARGUMENT,
              {"max_new_tokens", "510", "512"});
}

TEST_F(RpcErrorTest, OverLargeRequestIsResourceExhausted) {
  StartServer({"--max-message-bytes", "4096"});
  // Up to twice the limit the service refuses it and names the flag; beyond
  // that gRPC does (rpc_limits_test).
  ExpectError(Analyze(TextRequest(std::string(6000, 'a'))),
              grpc::StatusCode::RESOURCE_EXHAUSTED, {"limit of 4096", "--max-message-bytes"});
}

}  // namespace
}  // namespace attnscope::testing
