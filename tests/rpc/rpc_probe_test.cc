// Tokenize, ScanHeads and Ablate over gRPC: bad requests are INVALID_ARGUMENT
// naming the field, the value and the limit (NOT_FOUND for a model), the
// server keeps serving; the calls are admission-limited, stop at their
// deadline, are counted with the model label and stay off the feed.
#include <algorithm>
#include <chrono>
#include <thread>

#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

grpc::Status Scan(v1::Analyzer::Stub& stub, const v1::HeadScanRequest& request,
                  v1::HeadScanResponse* response = nullptr, double deadline_seconds = 120) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1e3)));
  v1::HeadScanResponse ignored;
  return stub.ScanHeads(&context, request, response ? response : &ignored);
}

grpc::Status Ablate(v1::Analyzer::Stub& stub, const v1::AblateRequest& request,
                    v1::AblateResponse* response = nullptr) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::AblateResponse ignored;
  return stub.Ablate(&context, request, response ? response : &ignored);
}

grpc::Status Tokenize(v1::Analyzer::Stub& stub, const v1::TokenizeRequest& request,
                      v1::TokenizeResponse* response = nullptr) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::TokenizeResponse ignored;
  return stub.Tokenize(&context, request, response ? response : &ignored);
}

v1::HeadScanRequest RandomScan(int64_t n, int64_t sequences) {
  v1::HeadScanRequest request;
  request.mutable_probe()->mutable_random()->set_n(n);
  request.mutable_probe()->mutable_random()->set_num_sequences(sequences);
  return request;
}

void ExpectInvalid(const grpc::Status& status, const std::string& message) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(message));
}

TEST_F(RpcTest, ProbeRequestsAreValidatedFieldByField) {
  StartServer({"--model", "tiny=" + BundledModelDir(), "--model", "ids-only=" + FixtureModelDir()});
  ExpectInvalid(Scan(*stub_, v1::HeadScanRequest()), "probe: none of random, sequences or text");
  ExpectInvalid(Scan(*stub_, RandomScan(0, 2)), "probe.random: n = 0 does not fit");
  ExpectInvalid(Scan(*stub_, RandomScan(256, 2)), "n must be in 1..255");
  ExpectInvalid(Scan(*stub_, RandomScan(5, 0)), "probe.random: the number of probe sequences is 0");
  ExpectInvalid(Scan(*stub_, RandomScan(5, 1025)), "it must be in 1..1024");
  v1::HeadScanRequest given;
  const std::vector<int64_t> four = {1, 2, 3, 2};
  given.mutable_probe()->mutable_sequences()->add_sequences()->mutable_ids()->Add(four.begin(),
                                                                                  four.end());
  ExpectInvalid(Scan(*stub_, given), "probe.sequences: probe sequence 0 has 4 ids, expected 2n+1 = 3");
  given.mutable_probe()->mutable_sequences()->mutable_sequences(0)->mutable_ids()->Set(1, 60000);
  given.mutable_probe()->mutable_sequences()->mutable_sequences(0)->mutable_ids()->RemoveLast();
  ExpectInvalid(Scan(*stub_, given), "position 1: id 60000 is outside the vocabulary [0, 50257)");
  v1::HeadScanRequest text;
  text.mutable_probe()->set_text("ok \xff");
  ExpectInvalid(Scan(*stub_, text), "probe.text: invalid UTF-8");
  text.mutable_probe()->set_text("");
  ExpectInvalid(Scan(*stub_, text), "probe.text: the prompt is empty");
  text.mutable_probe()->set_text(std::string(300, 'a') + " " + std::string(300, 'b'));
  text.set_model("ids-only");
  ExpectInvalid(Scan(*stub_, text), "probe.text: model 'ids-only' has no tokenizer");
  v1::HeadScanRequest unknown = RandomScan(5, 1);
  unknown.set_model("nope");
  EXPECT_EQ(Scan(*stub_, unknown).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::AblateRequest ablate;
  *ablate.mutable_probe() = RandomScan(5, 1).probe();
  ExpectInvalid(Ablate(*stub_, ablate), "heads: no heads to ablate");
  v1::HeadRef* head = ablate.add_heads();
  head->set_layer(1);
  head->set_head(6);
  ExpectInvalid(Ablate(*stub_, ablate), "heads[0]: head 1.6 does not exist: the model has layers 0..5 and heads 0..5");
  head->set_head(2);
  *ablate.add_heads() = *head;
  ExpectInvalid(Ablate(*stub_, ablate), "heads[1]: head 1.2 is listed twice");
  ablate.mutable_heads()->RemoveLast();
  ablate.set_mode(static_cast<v1::AblationMode>(7));
  ExpectInvalid(Ablate(*stub_, ablate), "mode: 7 is not an AblationMode");

  v1::TokenizeRequest tokenize;
  ExpectInvalid(Tokenize(*stub_, tokenize), "prompt: neither text nor chat");
  tokenize.set_text("caf\xc3");
  ExpectInvalid(Tokenize(*stub_, tokenize), "text: invalid UTF-8");
  tokenize.set_text("hello");
  tokenize.set_model("ids-only");
  ExpectInvalid(Tokenize(*stub_, tokenize), "model 'ids-only' has no tokenizer");
  tokenize.mutable_chat()->add_messages()->set_content("no role");
  tokenize.set_model("tiny");
  ExpectInvalid(Tokenize(*stub_, tokenize), "chat.messages[0].role is empty");
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, ProbeResultsAreTheEnginesAndTokenizeHasNoPositionLimit) {
  StartServer({"--max-prompt-tokens", "64"});
  v1::HeadScanResponse scan;
  ASSERT_TRUE(Scan(*stub_, RandomScan(10, 2), &scan).ok());
  EXPECT_EQ(scan.model(), "tiny-gpt2");
  EXPECT_EQ(scan.num_layers(), 6);
  EXPECT_EQ(scan.num_heads(), 6);
  EXPECT_EQ(scan.prev_token_score_size(), 36);
  ASSERT_EQ(scan.probe().sequences_size(), 2);
  EXPECT_EQ(scan.probe().sequences(0).ids_size(), 21);
  EXPECT_EQ(scan.probe().sequences(0).ids(0), 50256);  // BOS = eos of GPT-2
  EXPECT_EQ(scan.probe().sequences(0).ids(1), scan.probe().sequences(0).ids(11));
  for (double p : scan.prev_token_score()) EXPECT_TRUE(p >= 0 && p <= 1) << p;
  EXPECT_GT(scan.loss_first_half(), 0);
  // T = 2n+1 beyond --max-prompt-tokens is refused; tokenizing is not limited.
  ExpectInvalid(Scan(*stub_, RandomScan(40, 1)),
                "probe: T = 2n+1 = 81 tokens is over the server's limit of 64 tokens");
  v1::TokenizeRequest tokenize;
  std::string long_text = "word";
  for (int i = 1; i < 400; ++i) long_text += " word";
  tokenize.set_text(long_text);
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(Tokenize(*stub_, tokenize, &tokens).ok());
  EXPECT_EQ(tokens.tokens().ids_size(), 400);
  EXPECT_EQ(tokens.tokens().text(), long_text);
  EXPECT_EQ(tokens.tokens().offsets(1).begin(), 4);
}

// An Analyze call left open after its first event holds its compute slot
// (a 512-token analysis streaming every attention tensor blocks on flow
// control while nobody reads).
struct HeldSlot {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::AnalyzeEvent>> reader;
  ~HeldSlot() {
    context.TryCancel();
    v1::AnalyzeEvent event;
    while (reader->Read(&event)) {
    }
    reader->Finish();
  }
};

std::unique_ptr<HeldSlot> HoldSlot(v1::Analyzer::Stub& stub) {
  auto held = std::make_unique<HeldSlot>();
  v1::AnalyzeRequest request = IdsRequest(SampleIds(512));
  request.mutable_options()->set_return_attention(true);
  held->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  held->reader = stub.Analyze(&held->context, request);
  v1::AnalyzeEvent first;
  EXPECT_TRUE(held->reader->Read(&first));
  EXPECT_TRUE(first.has_tokens());
  return held;
}

TEST_F(RpcTest, ProbeCallsAreAdmissionLimitedAndStopAtTheirDeadline) {
  StartServer({"--max-concurrent", "1", "--max-queue", "1"});
  const std::string metrics = server_->metrics_address();
  {
    auto held = HoldSlot(*stub_);
    // One may wait in the queue (the gauge shows it in line); it gives up at
    // its deadline. The deadline only has to outlast the polling of the gauge.
    grpc::Status in_line(grpc::StatusCode::UNKNOWN, "not finished");
    std::thread waiter([&] {
      auto stub = NewStub(server_->address());
      in_line = Scan(*stub, RandomScan(5, 1), nullptr, 5.0);
    });
    EXPECT_EQ(WaitForMetric(metrics, "attnscope_queued_requests", 1), 1);
    // With the queue full as well, the next is turned away at once.
    v1::TokenizeRequest tokenize;
    tokenize.set_text("hi");
    const grpc::Status full = Tokenize(*stub_, tokenize);
    EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
    EXPECT_THAT(full.error_message(), HasSubstr("--max-queue 1"));
    waiter.join();
    EXPECT_EQ(in_line.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << in_line.error_message();
  }
  // The waiter's client has given up, but the server may still hold its call
  // in the queue until it notices (or admit it for a moment once the held
  // slot frees): wait until the line is empty, then until nothing runs.
  // Waiting only for in-flight = 0 raced with a waiter still in line on a
  // loaded machine, and the scan below was turned away (RESOURCE_EXHAUSTED).
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_queued_requests", 0), 0);
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_in_flight_requests", 0), 0);
  // A running scan stops when its call ends: a scan of 8 sequences of 511
  // tokens (~15 s on two cores; a machine would have to be hundreds of times
  // faster to finish it between the gauge and the cancel) is cancelled once
  // the in-flight gauge shows it admitted. The server checks between layers,
  // so the slot frees within one layer's time (~2.5 s here, under a minute
  // under TSan, which runs this test too).
  grpc::ClientContext scan_context;
  scan_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  grpc::Status big(grpc::StatusCode::UNKNOWN, "not finished");
  std::thread scanner([&] {
    v1::HeadScanResponse ignored;
    big = stub_->ScanHeads(&scan_context, RandomScan(255, 8), &ignored);
  });
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_in_flight_requests", 1), 1);
  scan_context.TryCancel();
  scanner.join();
  EXPECT_EQ(big.error_code(), grpc::StatusCode::CANCELLED) << big.error_message();
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_in_flight_requests", 0), 0);
  // Both calls are counted as stopped: the queued one DEADLINE_EXCEEDED (or
  // CANCELLED: a client cancels at its deadline, which the server may see a
  // little before its own copy of the deadline), the cancelled one CANCELLED.
  const auto stopped = [&] {
    const std::string scrape = ScrapeMetrics(metrics);
    const auto count = [&](const std::string& code) {
      return std::max(0.0, MetricValue(scrape, R"(attnscope_requests_total{code=")" + code +
                                                   R"(",model="tiny-gpt2",origin="user",rpc="ScanHeads"})"));
    };
    return count("DEADLINE_EXCEEDED") + count("CANCELLED");
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (stopped() != 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, bounded
  }
  EXPECT_EQ(stopped(), 2);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcTest, ProbeCallsAreCountedByModelAndStayOffTheFeed) {
  StartServer();
  grpc::ClientContext feed_context;
  feed_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  ASSERT_TRUE(Scan(*stub_, RandomScan(5, 1)).ok());
  v1::AblateRequest ablate;
  *ablate.mutable_probe() = RandomScan(5, 1).probe();
  *ablate.add_heads() = v1::HeadRef();
  ASSERT_TRUE(Ablate(*stub_, ablate).ok());
  v1::TokenizeRequest tokenize;
  tokenize.set_text("hi");
  ASSERT_TRUE(Tokenize(*stub_, tokenize).ok());
  ExpectInvalid(Scan(*stub_, RandomScan(0, 1)), "n = 0");
  // The next feed event is the Analyze that follows, not one of the above.
  ASSERT_TRUE(RunAnalyze(*stub_, TextRequest("After the probes")).status.ok());
  v1::FeedEvent event;
  ASSERT_TRUE(feed->Read(&event));
  ASSERT_TRUE(event.has_started());
  EXPECT_EQ(event.started().rpc(), "Analyze");
  feed_context.TryCancel();
  const std::string metrics = server_->metrics_address();
  const auto series = [](const std::string& code, const std::string& rpc) {
    return R"(attnscope_requests_total{code=")" + code +
           R"(",model="tiny-gpt2",origin="user",rpc=")" + rpc + R"("})";
  };
  EXPECT_EQ(WaitForMetric(metrics, series("OK", "ScanHeads"), 1), 1);
  EXPECT_EQ(WaitForMetric(metrics, series("INVALID_ARGUMENT", "ScanHeads"), 1), 1);
  EXPECT_EQ(WaitForMetric(metrics, series("OK", "Ablate"), 1), 1);
  EXPECT_EQ(WaitForMetric(metrics, series("OK", "Tokenize"), 1), 1);
}

}  // namespace
}  // namespace attnscope::testing
