// Generate against the local engine, and the Subscribe feed seen by a
// dashboard while other clients send requests.
#include <chrono>

#include "service/engine/generation.h"
#include "service/engine/prompt.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

template <typename T>
std::vector<T> Vec(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

v1::GenerateRequest GenerateText(const std::string& text, int max_new_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.set_max_new_tokens(max_new_tokens);
  return request;
}

// Checks a Generate stream against engine::Generate with the same settings.
void ExpectSameAsLocal(const GenerateResult& r, const std::string& text,
                       const engine::GenerationSettings& settings) {
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  auto prompt = engine::PromptFromText(BundledModel(), text);
  ASSERT_TRUE(prompt.ok());
  auto local = engine::Generate(BundledModel(), *prompt, settings);
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(r.events.size(), local->tokens.size() + 2);
  EXPECT_EQ(Vec(r.events.front().prompt().ids()), prompt->ids);
  for (size_t i = 0; i < local->tokens.size(); ++i) {
    const v1::GeneratedToken& got = r.events[i + 1].token();
    const engine::GeneratedToken& want = local->tokens[i];
    EXPECT_EQ(got.index(), want.index);
    EXPECT_EQ(got.position(), want.position);
    EXPECT_EQ(got.id(), want.id) << "token " << i;
    EXPECT_EQ(got.text(), want.text);
    EXPECT_EQ(got.probability(), want.probability);
    EXPECT_EQ(got.entropy_nats(), want.entropy_nats);
    EXPECT_EQ(got.entropy_normalized(), want.entropy_normalized);
    ASSERT_EQ(got.alternatives_size(), static_cast<int>(want.alternatives.size()));
    for (int a = 0; a < got.alternatives_size(); ++a) {
      EXPECT_EQ(got.alternatives(a).id(), want.alternatives[a].id);
      EXPECT_EQ(got.alternatives(a).probability(), want.alternatives[a].probability);
    }
    EXPECT_EQ(Vec(got.sink_scores()), want.sink_scores);
  }
  const v1::GenerateSummary& summary = r.events.back().summary();
  EXPECT_EQ(summary.text(), local->text);
  EXPECT_EQ(summary.stop_reason(), local->stop_reason);
  EXPECT_EQ(summary.generated_tokens(), static_cast<int>(local->tokens.size()));
  EXPECT_GT(summary.tokens_per_second(), 0);
}

TEST_F(RpcTest, GreedyGenerateEqualsTheLocalEngine) {
  StartServer();
  const std::string text = "The history of the city begins";
  v1::GenerateRequest request = GenerateText(text, 12);
  request.set_num_alternatives(3);
  request.set_layer_sink_scores(true);
  const GenerateResult r = RunGenerate(*stub_, request);
  engine::GenerationSettings settings;
  settings.max_new_tokens = 12;
  settings.num_alternatives = 3;
  settings.layer_sink_scores = true;
  ExpectSameAsLocal(r, text, settings);
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events[1].token().alternatives_size(), 3);
  EXPECT_EQ(r.events[1].token().sink_scores_size(), 36);
}

TEST_F(RpcTest, SampledGenerateIsReproducibleWithItsSeed) {
  StartServer();
  const std::string text = "In the morning we";
  v1::GenerateRequest request = GenerateText(text, 10);
  request.mutable_sampling()->set_temperature(0.9);
  request.mutable_sampling()->set_top_k(40);
  request.mutable_sampling()->set_top_p(0.95);
  request.mutable_sampling()->set_seed(1234);
  request.set_stop_at_eos(false);
  const GenerateResult r = RunGenerate(*stub_, request);
  engine::GenerationSettings settings;
  settings.max_new_tokens = 10;
  settings.sampling = {0.9, 40, 0.95, 1234};
  settings.stop_at_eos = false;
  ExpectSameAsLocal(r, text, settings);
  EXPECT_EQ(r.events.back().summary().stop_reason(), "max_new_tokens");
  // Unset num_alternatives means 5.
  EXPECT_EQ(r.events[1].token().alternatives_size(), 5);
}

// Reads feed events until `count` finished events have arrived.
std::vector<v1::FeedEvent> ReadUntilFinished(grpc::ClientReader<v1::FeedEvent>& reader,
                                             int count) {
  std::vector<v1::FeedEvent> events;
  v1::FeedEvent event;
  while (count > 0 && reader.Read(&event)) {
    events.push_back(event);
    count -= event.has_finished();
  }
  EXPECT_EQ(count, 0) << "the feed ended early";
  return events;
}

TEST_F(RpcTest, SubscriberSeesOtherClientsRequests) {
  StartServer({"--model", "tiny-gpt2=" + BundledModelDir(), "--model",
               "fixture=" + FixtureModelDir()});
  grpc::ClientContext all_context, fixture_context;
  all_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  fixture_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::SubscribeRequest all_request;
  all_request.set_include_token_entropy(true);
  auto all = stub_->Subscribe(&all_context, all_request);
  v1::SubscribeRequest fixture_request;
  fixture_request.set_model("fixture");
  auto fixture_only = stub_->Subscribe(&fixture_context, fixture_request);
  all->WaitForInitialMetadata();
  fixture_only->WaitForInitialMetadata();

  auto other = NewStub(server_->address());  // another client, its own channel
  const std::string text = "A dashboard is watching this prompt";
  const AnalyzeResult analyzed = RunAnalyze(*other, TextRequest(text));
  ASSERT_TRUE(analyzed.status.ok());
  const GenerateResult generated = RunGenerate(*other, GenerateText("Tell me", 5));
  ASSERT_TRUE(generated.status.ok());
  v1::AnalyzeRequest bad = TextRequest("");
  EXPECT_FALSE(RunAnalyze(*other, bad).status.ok());
  v1::AnalyzeRequest on_fixture = IdsRequest({1, 2, 3, 4});
  on_fixture.set_model("fixture");
  ASSERT_TRUE(RunAnalyze(*other, on_fixture).status.ok());

  const std::vector<v1::FeedEvent> events = ReadUntilFinished(*all, 4);
  // Analyze: started, finished. Generate: started, 5 tokens, finished.
  // The bad request: finished only. Fixture: started, finished.
  ASSERT_EQ(events.size(), 2u + 7u + 1u + 2u);
  const v1::Summary& summary = analyzed.events.back().summary();
  EXPECT_EQ(events[0].started().rpc(), "Analyze");
  EXPECT_EQ(events[0].started().model(), "tiny-gpt2");
  EXPECT_EQ(events[0].started().prompt_preview(), text);
  EXPECT_EQ(events[0].started().prompt_tokens(), analyzed.events[0].tokens().ids_size());
  const v1::RequestFinished& a = events[1].finished();
  EXPECT_EQ(events[1].request_id(), events[0].request_id());
  EXPECT_EQ(a.status(), "OK");
  EXPECT_EQ(a.health(), summary.health());
  EXPECT_EQ(a.sink_count(), summary.sinks_size());
  EXPECT_EQ(Vec(a.entropy_normalized()), Vec(summary.next_token_entropy_normalized()));
  EXPECT_GT(a.max_entropy(), 0);
  EXPECT_GT(a.duration_seconds(), 0);

  EXPECT_EQ(events[2].started().rpc(), "Generate");
  EXPECT_NE(events[2].request_id(), events[0].request_id());
  for (int i = 0; i < 5; ++i) {
    const v1::FeedEvent& e = events[3 + i];
    ASSERT_TRUE(e.has_token());
    EXPECT_EQ(e.request_id(), events[2].request_id());
    EXPECT_EQ(e.token().index(), i);
    EXPECT_EQ(e.token().entropy_nats(), generated.events[1 + i].token().entropy_nats());
  }
  EXPECT_EQ(events[8].finished().generated_tokens(), 5);
  EXPECT_EQ(events[9].finished().status(), "INVALID_ARGUMENT");
  EXPECT_EQ(events[10].started().model(), "fixture");
  for (const v1::FeedEvent& e : events) EXPECT_EQ(e.dropped(), 0u);

  // The filtered subscriber saw only the fixture model's request.
  const std::vector<v1::FeedEvent> filtered = ReadUntilFinished(*fixture_only, 1);
  ASSERT_EQ(filtered.size(), 2u);
  EXPECT_EQ(filtered[0].started().model(), "fixture");
  EXPECT_EQ(filtered[0].started().prompt_tokens(), 4);
  EXPECT_EQ(filtered[1].finished().status(), "OK");
  all_context.TryCancel();
  fixture_context.TryCancel();
}

// A finished Analyze carries what a dashboard shows (options, tokens, every
// layer's statistics, the summary), exactly as the stream sent them; a
// dashboard's own request says so in both feed events.
TEST_F(RpcTest, FeedCarriesTheAnalysisAndItsOrigin) {
  StartServer();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto feed = stub_->Subscribe(&context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  auto other = NewStub(server_->address());
  v1::AnalyzeRequest request = TextRequest("<|im_start|>user\nWhere do sinks come from?");
  request.mutable_options()->set_threshold(0.5);
  request.mutable_options()->set_template_("chatml");
  const AnalyzeResult analyzed = RunAnalyze(*other, request);
  ASSERT_TRUE(analyzed.status.ok());
  v1::AnalyzeRequest detail = IdsRequest(Vec(analyzed.events.front().tokens().ids()));
  *detail.mutable_options() = request.options();
  detail.mutable_options()->set_return_attention(true);
  detail.mutable_options()->add_attention_layers(5);
  detail.mutable_options()->add_attention_heads(2);
  detail.set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
  const AnalyzeResult fetched = RunAnalyze(*other, detail);
  ASSERT_TRUE(fetched.status.ok());

  const std::vector<v1::FeedEvent> events = ReadUntilFinished(*feed, 2);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].started().origin(), v1::REQUEST_ORIGIN_UNSPECIFIED);
  EXPECT_EQ(events[0].started().options().threshold(), 0.5);
  const v1::RequestFinished& f = events[1].finished();
  EXPECT_EQ(f.origin(), v1::REQUEST_ORIGIN_UNSPECIFIED);
  EXPECT_EQ(f.options().template_(), "chatml");
  EXPECT_EQ(f.tokens().SerializeAsString(), analyzed.events.front().tokens().SerializeAsString());
  std::vector<std::string> layers;
  for (const v1::AnalyzeEvent& e : analyzed.events) {
    if (e.has_layer()) layers.push_back(e.layer().SerializeAsString());
  }
  ASSERT_EQ(layers.size(), 6u);
  ASSERT_EQ(f.layers_size(), 6);
  for (int l = 0; l < f.layers_size(); ++l) {
    EXPECT_EQ(f.layers(l).SerializeAsString(), layers[l]) << "layer " << l;
  }
  EXPECT_EQ(f.summary().SerializeAsString(), analyzed.events.back().summary().SerializeAsString());
  EXPECT_EQ(f.summary().threshold(), 0.5);
  EXPECT_EQ(f.summary().template_(), "chatml");
  // The dashboard's fetch: marked in both events, and the same numbers.
  EXPECT_EQ(events[2].started().origin(), v1::REQUEST_ORIGIN_DASHBOARD);
  EXPECT_EQ(events[3].finished().origin(), v1::REQUEST_ORIGIN_DASHBOARD);
  EXPECT_EQ(events[3].finished().health(), f.health());
  int chunks = 0;
  for (const v1::AnalyzeEvent& e : fetched.events) {
    if (!e.has_attention()) continue;
    ++chunks;
    EXPECT_EQ(e.attention().layer(), 5);
    EXPECT_EQ(e.attention().head(), 2);
  }
  EXPECT_EQ(chunks, 1);
  context.TryCancel();
}

}  // namespace
}  // namespace attnscope::testing
