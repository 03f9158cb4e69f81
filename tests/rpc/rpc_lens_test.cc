// Lens and Patch over gRPC on the real server: the streams carry what the
// engine computes locally (every lens cell, attribution and rollout row,
// every patched pass), in the documented order; bad requests are
// INVALID_ARGUMENT naming the field and the server keeps serving; a
// running patch stops when its client cancels or its deadline passes; both
// calls are counted in the metrics and stay off the feed.
#include <chrono>
#include <thread>

#include "service/engine/lens_run.h"
#include "service/engine/patching_run.h"
#include "service/engine/prompt.h"
#include "tests/common/float_compare.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kText[] = "The Eiffel Tower is in the city of";

template <typename Event, typename Request, typename Call>
grpc::Status ReadAll(const Request& request, Call call, std::vector<Event>* events,
                     double deadline_seconds = 300) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1e3)));
  auto reader = call(&context, request);
  Event event;
  while (reader->Read(&event)) {
    if (events != nullptr) events->push_back(event);
  }
  return reader->Finish();
}

grpc::Status Lens(v1::Analyzer::Stub& stub, const v1::LensRequest& r,
                  std::vector<v1::LensEvent>* events = nullptr) {
  return ReadAll<v1::LensEvent>(
      r, [&](grpc::ClientContext* c, const v1::LensRequest& q) { return stub.Lens(c, q); }, events);
}

grpc::Status Patch(v1::Analyzer::Stub& stub, const v1::PatchRequest& r,
                   std::vector<v1::PatchEvent>* events = nullptr, double deadline = 300) {
  return ReadAll<v1::PatchEvent>(
      r, [&](grpc::ClientContext* c, const v1::PatchRequest& q) { return stub.Patch(c, q); },
      events, deadline);
}

void ExpectInvalid(const grpc::Status& status, const std::string& message) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(message));
}

v1::PatchRequest EiffelPatch() {
  v1::PatchRequest r;
  r.set_clean_text("The Eiffel Tower is in the city of");
  r.set_corrupted_text("The Colosseum is in the city of");
  return r;
}

TEST_F(RpcTest, LensStreamsWhatTheEngineComputes) {
  StartServer();
  v1::LensRequest request;
  request.set_text(kText);
  request.set_logit_lens(true);
  request.set_attribution(true);
  request.set_rollout(true);
  request.set_lens_positions("all");
  request.set_top_k(3);
  request.set_attribution_positions("2,5");
  request.set_rollout_queries("last");
  std::vector<v1::LensEvent> events;
  const grpc::Status status = Lens(*stub_, request, &events);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const engine::ModelBundle& bundle = BundledModel();
  auto prompt = engine::PromptFromText(bundle, kText, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  const auto tokens = static_cast<int64_t>(prompt->ids.size());
  engine::LensSettings settings;
  settings.lens_options.top_k = 3;
  settings.attribution = true;
  settings.attribution_options.positions = {2, 5};
  settings.rollout = true;
  settings.rollout_options.queries = {tokens - 1};
  auto local = engine::RunLens(bundle, *prompt, settings);
  ASSERT_TRUE(local.ok()) << local.status();
  const int64_t layers = bundle.config().num_layers;

  // Order: tokens, the lens state by state, attributions, rollout rows, summary.
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(events.front().has_tokens());
  EXPECT_EQ(events.front().tokens().ids_size(), tokens);
  ASSERT_TRUE(events.back().has_summary());
  EXPECT_EQ(events.back().summary().num_layers(), layers);
  EXPECT_EQ(events.back().summary().lens_positions_size(), tokens);
  int last_state = -1, stage = 0;
  int64_t cells = 0, attributions = 0, rows = 0;
  double worst = 0;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const v1::LensEvent& e = events[i];
    if (e.has_lens()) {
      EXPECT_EQ(stage, 0);
      EXPECT_GE(e.lens().state(), last_state);
      last_state = e.lens().state();
      for (const v1::LensCell& c : e.lens().cells()) {
        const analysis::LensCell& want =
            local->lens->cells[static_cast<size_t>(e.lens().state())][static_cast<size_t>(c.position())];
        ASSERT_EQ(c.top_size(), 3);
        for (int k = 0; k < 3; ++k) {
          EXPECT_EQ(c.top(k).id(), want.top[static_cast<size_t>(k)].id);
          EXPECT_EQ(c.top(k).token(), want.top[static_cast<size_t>(k)].token);
          worst = test::Worse(worst, test::AbsDiff(c.top(k).p(), want.top[static_cast<size_t>(k)].p));
        }
        EXPECT_EQ(c.next_rank(), want.next_rank);
        if (c.position() + 1 < tokens) {
          worst = test::Worse(worst, test::AbsDiff(c.next_p(), want.next_p));
        } else {
          EXPECT_TRUE(std::isnan(c.next_p()));  // no next token at the last position
        }
        worst = test::Worse(worst, test::AbsDiff(c.entropy(), want.entropy));
        ++cells;
      }
    } else if (e.has_attribution()) {
      EXPECT_LE(stage, 1);
      stage = 1;
      const analysis::PositionAttribution& want =
          local->attribution.positions[static_cast<size_t>(attributions)];
      EXPECT_EQ(e.attribution().position(), want.position);
      EXPECT_EQ(e.attribution().target(), want.target);
      EXPECT_EQ(e.attribution().target_token(), local->target_tokens[static_cast<size_t>(attributions)]);
      ASSERT_EQ(e.attribution().heads_size(), layers * bundle.config().num_heads);
      for (int64_t l = 0; l < layers; ++l) {
        for (int64_t h = 0; h < bundle.config().num_heads; ++h) {
          worst = test::Worse(worst, test::AbsDiff(e.attribution().heads(static_cast<int>(l * bundle.config().num_heads + h)),
                                                   want.heads[static_cast<size_t>(l)][static_cast<size_t>(h)]));
        }
        worst = test::Worse(worst, test::AbsDiff(e.attribution().mlp(static_cast<int>(l)),
                                                 want.mlp[static_cast<size_t>(l)]));
      }
      worst = test::Worse(worst, test::AbsDiff(e.attribution().total(), want.total));
      worst = test::Worse(worst, test::AbsDiff(e.attribution().logit(), want.logit));
      ++attributions;
    } else if (e.has_rollout()) {
      stage = 2;
      EXPECT_EQ(e.rollout().layer(), rows);
      EXPECT_EQ(e.rollout().query(), tokens - 1);
      ASSERT_EQ(e.rollout().weights_size(), tokens);
      const std::vector<double>& want = local->rollout->rows[static_cast<size_t>(rows)][0];
      for (int64_t j = 0; j < tokens; ++j) {
        worst = test::Worse(worst, test::AbsDiff(e.rollout().weights(static_cast<int>(j)),
                                                 want[static_cast<size_t>(j)]));
      }
      ++rows;
    } else {
      ADD_FAILURE() << "unexpected event " << e.ShortDebugString();
    }
  }
  EXPECT_EQ(last_state, layers);
  EXPECT_EQ(cells, (layers + 1) * tokens);
  EXPECT_EQ(attributions, 2);
  EXPECT_EQ(rows, layers);
  std::cout << "Lens over gRPC vs local: max |diff| " << worst << "\n";
  EXPECT_TRUE(test::Within(worst, 1e-6)) << worst;
}

TEST_F(RpcTest, PatchStreamsEveryPassAsTheEngineComputesIt) {
  StartServer();
  std::vector<v1::PatchEvent> events;
  v1::PatchRequest request = EiffelPatch();
  request.set_target_a_text(" Paris");
  request.set_target_b_text(" Rome");
  const grpc::Status status = Patch(*stub_, request, &events);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const engine::ModelBundle& bundle = BundledModel();
  auto clean = engine::PromptFromText(bundle, request.clean_text(), true);
  auto corrupted = engine::PromptFromText(bundle, request.corrupted_text(), true);
  ASSERT_TRUE(clean.ok() && corrupted.ok());
  engine::PatchSettings settings;
  settings.token_a = *engine::SingleTokenId(bundle, "a", " Paris", "-");
  settings.token_b = *engine::SingleTokenId(bundle, "b", " Rome", "-");
  auto local = engine::RunPatching(bundle, *clean, *corrupted, settings);
  ASSERT_TRUE(local.ok()) << local.status();

  const int64_t layers = bundle.config().num_layers, heads = bundle.config().num_heads;
  ASSERT_EQ(events.size(), static_cast<size_t>(layers * heads + 2));
  ASSERT_TRUE(events.front().has_baseline());
  const v1::PatchBaseline& b = events.front().baseline();
  EXPECT_EQ(b.target_a(), local->token_a);
  EXPECT_EQ(b.target_b(), local->token_b);
  EXPECT_EQ(b.target_a_token(), " Paris");
  EXPECT_EQ(b.kind(), v1::PATCH_KIND_HEADS);
  EXPECT_EQ(b.num_layers(), layers);
  EXPECT_EQ(b.num_columns(), heads);
  EXPECT_EQ(b.clean().ids_size(), static_cast<int>(clean->ids.size()));
  // Logit differences agree within 1e-6; recoveries, which divide them by
  // clean - corrupted, within 1e-6 / |clean - corrupted|.
  const double span = std::fabs(local->clean_metric - local->corrupted_metric);
  double worst = test::Worse(test::AbsDiff(b.clean_metric(), local->clean_metric),
                             test::AbsDiff(b.corrupted_metric(), local->corrupted_metric));
  double worst_recovery = 0;
  for (int64_t i = 0; i < layers * heads; ++i) {
    ASSERT_TRUE(events[static_cast<size_t>(i + 1)].has_step());
    const v1::PatchStep& s = events[static_cast<size_t>(i + 1)].step();
    EXPECT_EQ(s.layer(), i / heads);
    EXPECT_EQ(s.column(), i % heads);
    EXPECT_EQ(s.done(), i + 1);
    EXPECT_EQ(s.total(), layers * heads);
    worst = test::Worse(worst, test::AbsDiff(s.metric(), local->metric[static_cast<size_t>(i / heads)][static_cast<size_t>(i % heads)]));
    worst_recovery = test::Worse(worst_recovery, test::AbsDiff(s.recovery(), local->recovery[static_cast<size_t>(i / heads)][static_cast<size_t>(i % heads)]));
  }
  ASSERT_TRUE(events.back().has_summary());
  EXPECT_EQ(events.back().summary().passes(), layers * heads);
  std::cout << "Patch over gRPC vs local: max |metric diff| " << worst << ", max |recovery diff| "
            << worst_recovery << " (clean - corrupted " << span << ")\n";
  EXPECT_TRUE(test::Within(worst, 1e-6)) << worst;
  EXPECT_TRUE(test::Within(worst_recovery, 1e-6 / span)) << worst_recovery;
}

TEST_F(RpcTest, LensAndPatchRequestsAreValidatedFieldByField) {
  StartServer({"--model", "tiny=" + BundledModelDir(), "--model", "ids-only=" + FixtureModelDir()});
  v1::LensRequest lens;
  lens.set_text(kText);
  ExpectInvalid(Lens(*stub_, lens), "none of logit_lens, attribution or rollout is set");
  lens.set_logit_lens(true);
  lens.set_top_k(0);
  ExpectInvalid(Lens(*stub_, lens), "top_k: 0 is outside 1..1000");
  lens.clear_top_k();
  lens.set_lens_positions("3-x");
  ExpectInvalid(Lens(*stub_, lens), "lens_positions");
  lens.set_lens_positions("0,400");
  ExpectInvalid(Lens(*stub_, lens), "lens_positions 400 is outside the prompt");
  lens.clear_lens_positions();
  lens.set_rollout_queries("1");
  ExpectInvalid(Lens(*stub_, lens), "rollout_queries: set for a part of the run that was not asked for");
  lens.set_rollout(true);
  lens.set_rollout_queries("all");
  ExpectInvalid(Lens(*stub_, lens), "rollout_queries: takes \"last\" or a list");
  lens.clear_rollout_queries();
  lens.set_attribution(true);
  lens.add_target_ids(13);
  lens.set_target_text(" Paris");
  ExpectInvalid(Lens(*stub_, lens), "target_ids or as target_text, not both");
  lens.clear_target_text();
  lens.set_target_ids(0, 60000);
  ExpectInvalid(Lens(*stub_, lens), "target_ids[0]: 60000 is outside the vocabulary [0, 50257)");
  lens.clear_target_ids();
  lens.set_target_text(" Eiffel Tower");
  ExpectInvalid(Lens(*stub_, lens), "target_text \" Eiffel Tower\" is 4 tokens");
  lens.clear_target_text();
  lens.set_attribution_positions("all");
  std::string many = "x";
  for (int i = 0; i < 70; ++i) many += " x";
  lens.set_text(many);
  ExpectInvalid(Lens(*stub_, lens), "attribution_positions: 71 positions");
  lens.set_precision("fp8");
  ExpectInvalid(Lens(*stub_, lens), "precision");
  lens.clear_precision();
  lens.set_model("nope");
  EXPECT_EQ(Lens(*stub_, lens).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::PatchRequest patch;
  patch.set_clean_text(kText);
  ExpectInvalid(Patch(*stub_, patch), "clean and corrupted: give both prompts");
  patch = EiffelPatch();
  patch.set_corrupted_text("The Colosseum is in Rome, the city of");
  ExpectInvalid(Patch(*stub_, patch), "activation patching needs prompts of the same token length");
  patch = EiffelPatch();
  patch.set_kind(static_cast<v1::PatchKind>(9));
  ExpectInvalid(Patch(*stub_, patch), "kind: 9 is not a PatchKind");
  patch = EiffelPatch();
  patch.set_target_a_id(1);
  patch.set_target_a_text(" Paris");
  ExpectInvalid(Patch(*stub_, patch), "give target_a as target_a_id or as target_a_text, not both");
  patch = EiffelPatch();
  patch.set_target_b_id(50257);
  ExpectInvalid(Patch(*stub_, patch), "target_b_id: 50257 is outside the vocabulary");
  patch = EiffelPatch();
  patch.set_corrupted_text("caf\xc3");
  ExpectInvalid(Patch(*stub_, patch), "corrupted: ");
  patch = EiffelPatch();
  patch.set_target_a_id(11);
  patch.set_target_b_id(11);
  ExpectInvalid(Patch(*stub_, patch), "nothing to recover");
  patch = EiffelPatch();
  patch.set_model("ids-only");
  ExpectInvalid(Patch(*stub_, patch), "has no tokenizer");
  EXPECT_TRUE(StillServes());
}

// A residual patch of 256 tokens is 6 x 256 passes over up to 256 tokens each
// (the passes reuse the corrupted run only before the patched position): it is
// cancelled, or runs out of its deadline, long before it ends. At 64 tokens it
// could end within the 2 s deadline below.
constexpr int kLongPatchTokens = 256;

v1::PatchRequest LongPatch() {
  v1::PatchRequest r;
  const std::vector<int64_t> ids = SampleIds(kLongPatchTokens);
  std::vector<int64_t> other = ids;
  other[10] = (other[10] + 1000) % 50257;
  r.mutable_clean_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  r.mutable_corrupted_ids()->mutable_ids()->Add(other.begin(), other.end());
  r.set_kind(v1::PATCH_KIND_RESIDUAL);
  r.set_target_a_id(262);
  r.set_target_b_id(13);
  return r;
}

TEST_F(RpcTest, PatchStopsWhenCancelledOrAtItsDeadlineAndIsCountedOffTheFeed) {
  StartServer();
  const std::string metrics = server_->metrics_address();
  grpc::ClientContext feed_context;
  feed_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();

  // Cancelled once its first step arrived: the server stops and frees its slot.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    auto reader = stub_->Patch(&context, LongPatch());
    v1::PatchEvent event;
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_TRUE(event.has_baseline());
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_TRUE(event.has_step());
    EXPECT_EQ(event.step().total(), 6 * kLongPatchTokens);
    context.TryCancel();
    while (reader->Read(&event)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_in_flight_requests", 0), 0);
  EXPECT_EQ(WaitForMetric(metrics,
                          R"(attnscope_requests_total{code="CANCELLED",model="tiny-gpt2",origin="user",rpc="Patch"})",
                          1),
            1);
  // A deadline of 2 s: DEADLINE_EXCEEDED, and the server stops too.
  EXPECT_EQ(Patch(*stub_, LongPatch(), nullptr, 2.0).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(WaitForMetric(metrics, "attnscope_in_flight_requests", 0), 0);
  v1::LensRequest lens;
  lens.set_text(kText);
  lens.set_logit_lens(true);
  ASSERT_TRUE(Lens(*stub_, lens).ok());
  EXPECT_EQ(WaitForMetric(metrics,
                          R"(attnscope_requests_total{code="OK",model="tiny-gpt2",origin="user",rpc="Lens"})",
                          1),
            1);
  // Neither call reached the feed: the next event is this Analyze's.
  v1::AnalyzeRequest analyze = TextRequest("hello");
  std::vector<v1::AnalyzeEvent> ignored;
  grpc::ClientContext analyze_context;
  auto reader = stub_->Analyze(&analyze_context, analyze);
  v1::AnalyzeEvent e;
  while (reader->Read(&e)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  v1::FeedEvent first;
  ASSERT_TRUE(feed->Read(&first));
  ASSERT_TRUE(first.has_started());
  EXPECT_EQ(first.started().rpc(), "Analyze");
  feed_context.TryCancel();
  while (feed->Read(&first)) {
  }
  feed->Finish();
  EXPECT_TRUE(StillServes());
}

}  // namespace
}  // namespace attnscope::testing
