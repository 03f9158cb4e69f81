// EvaluateEviction and Generate's cache policy through the real server:
// the stream's events against the engine run in process, generation against
// a masked full pass, the feed, the metrics, bad input, cancellation and
// admission.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "service/engine/eviction_eval.h"
#include "service/model/recorder.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

std::string StoriesDir() {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/llama-stories260K";
}

// Ids in the stories model's vocabulary (512) that are not all alike.
std::vector<int64_t> StoryIds(int64_t n) {
  std::vector<int64_t> ids = {1};
  for (int64_t i = 1; i < n; ++i) ids.push_back((i * 37 + 11 + (i * i) % 13) % 512);
  return ids;
}

v1::EvaluateEvictionRequest EvictionRequest(const std::vector<int64_t>& ids,
                                            const std::vector<std::string>& policies) {
  v1::EvaluateEvictionRequest r;
  r.set_model("stories");
  for (int64_t id : ids) r.mutable_ids()->add_ids(id);
  for (const std::string& p : policies) r.add_policies(p);
  return r;
}

struct EvictionCall {
  grpc::Status status;
  std::vector<v1::EvaluateEvictionEvent> events;
};

EvictionCall RunEviction(v1::Analyzer::Stub& stub, const v1::EvaluateEvictionRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto reader = stub.EvaluateEviction(&context, request);
  EvictionCall call;
  v1::EvaluateEvictionEvent event;
  while (reader->Read(&event)) call.events.push_back(event);
  call.status = reader->Finish();
  return call;
}

const engine::ModelBundle& Stories() {
  static const engine::ModelBundle* bundle = [] {
    auto loaded = engine::LoadModelBundle(StoriesDir());
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->release() : nullptr;
  }();
  return *bundle;
}

class RpcEvictionTest : public RpcTest {
 protected:
  void StartWithStories(std::vector<std::string> extra = {}) {
    // tiny-gpt2 first: the default model, with the tokenizer StillServes needs.
    std::vector<std::string> args = {"--threads", "1", "--model", "tiny-gpt2=" + BundledModelDir(),
                                     "--model", "stories=" + StoriesDir()};
    args.insert(args.end(), extra.begin(), extra.end());
    StartServer(args);
  }
};

TEST_F(RpcEvictionTest, StreamsProgressWindowsAndASummaryEqualToTheEngine) {
  StartWithStories();
  const int64_t n = 150;
  const std::vector<int64_t> ids = StoryIds(n);
  v1::EvaluateEvictionRequest request = EvictionRequest(ids, {"full", "sinks:4+12", "window:16"});
  request.set_include_kept_positions(true);
  const EvictionCall call = RunEviction(*stub_, request);
  ASSERT_TRUE(call.status.ok()) << call.status.error_message();
  ASSERT_FALSE(call.events.empty());
  ASSERT_TRUE(call.events.front().has_text());
  EXPECT_EQ(call.events.front().text().ids_size(), n);
  ASSERT_TRUE(call.events.back().has_summary());
  const v1::EvaluateEvictionSummary& summary = call.events.back().summary();
  ASSERT_EQ(summary.results_size(), 3);

  engine::EvictionEvalSettings settings;
  for (const char* p : {"full", "sinks:4+12", "window:16"}) {
    settings.policies.push_back(*engine::ParseEvictionPolicy(p));
  }
  auto local = engine::EvaluateEviction(Stories(), ids, settings);
  ASSERT_TRUE(local.ok()) << local.status();
  std::vector<int> progress(3, 0), windows(3, 0);
  for (const v1::EvaluateEvictionEvent& e : call.events) {
    if (e.has_progress()) {
      const v1::EvictionProgress& p = e.progress();
      ASSERT_GE(p.policy_index(), 0);
      ASSERT_LT(p.policy_index(), 3);
      ++progress[p.policy_index()];
      EXPECT_EQ(p.steps_done(), progress[p.policy_index()]);
      EXPECT_EQ(p.kept_positions_size(), p.cache_tokens());
      if (p.policy() == "sinks:4+12" && p.steps_done() > 16) {
        // The first 4 tokens and the 12 most recent.
        ASSERT_EQ(p.kept_positions_size(), 16);
        EXPECT_EQ(p.kept_positions(3), 3);
        EXPECT_EQ(p.kept_positions(4), p.steps_done() - 12);
        EXPECT_EQ(p.kept_positions(15), p.steps_done() - 1);
      }
    }
    if (e.has_window()) {
      const v1::EvictionWindow& w = e.window();
      ++windows[w.policy_index()];
      const engine::EvictionRunResult& r = (*local)[w.policy_index()];
      double sum = 0;
      for (int i = 0; i < w.steps(); ++i) sum += r.nll[w.first_step() + i];
      EXPECT_LE(test::AbsDiff(w.perplexity(), std::exp(sum / w.steps())), 1e-4 * w.perplexity());
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(progress[i], n - 1);
    EXPECT_EQ(windows[i], 3);  // 64 + 64 + 21 steps
    const v1::EvictionPolicyResult& got = summary.results(i);
    const engine::EvictionRunResult& want = (*local)[i];
    EXPECT_EQ(got.policy(), want.policy);
    EXPECT_EQ(got.positions(), "cache");
    EXPECT_EQ(got.steps(), n - 1);
    EXPECT_EQ(got.max_cache_tokens(), want.max_cache_tokens);
    EXPECT_EQ(got.max_cache_bytes(), want.max_cache_bytes);
    const std::vector<double> got_nll(got.nll().begin(), got.nll().end());
    EXPECT_LE(test::MaxAbsDiff(got_nll, want.nll), 1e-5) << got.policy();
    EXPECT_LE(test::AbsDiff(got.perplexity(), want.perplexity), 1e-4 * want.perplexity);
  }
  EXPECT_EQ(summary.results(1).max_cache_tokens(), 17);

  const std::string scrape = ScrapeMetrics(server_->metrics_address());
  EXPECT_EQ(MetricValue(scrape, "attnscope_eviction_steps_total{model=\"stories\",policy=\"sinks\"}"),
            n - 1);
  EXPECT_EQ(MetricValue(scrape, "attnscope_eviction_perplexity_count{model=\"stories\",policy=\"full\"}"),
            1);
  EXPECT_EQ(MetricValue(scrape, "attnscope_requests_total{code=\"OK\",model=\"stories\",origin=\"user\","
                                "rpc=\"EvaluateEviction\"}"),
            1);
}

TEST_F(RpcEvictionTest, TheFeedCarriesTheRunForDashboards) {
  StartWithStories();
  grpc::ClientContext feed_context;
  feed_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  const EvictionCall call = RunEviction(*stub_, EvictionRequest(StoryIds(40), {"window:8"}));
  ASSERT_TRUE(call.status.ok()) << call.status.error_message();
  v1::FeedEvent event;
  bool started = false;
  while (feed->Read(&event)) {
    if (event.has_started()) {
      EXPECT_EQ(event.started().rpc(), "EvaluateEviction");
      ASSERT_EQ(event.started().eviction_policies_size(), 1);
      EXPECT_EQ(event.started().eviction_policies(0), "window:8");
      started = true;
    }
    if (event.has_finished()) break;
  }
  feed_context.TryCancel();
  EXPECT_TRUE(started);
  ASSERT_TRUE(event.has_finished());
  const v1::RequestFinished& f = event.finished();
  EXPECT_EQ(f.rpc(), "EvaluateEviction");
  EXPECT_EQ(f.status(), "OK");
  EXPECT_EQ(f.eviction_positions(), "cache");
  ASSERT_EQ(f.eviction().results_size(), 1);
  EXPECT_EQ(f.eviction().results(0).nll_size(), 39);
  EXPECT_EQ(f.prompt_tokens(), 40);
}

TEST_F(RpcEvictionTest, BadInputIsInvalidArgumentAndTheServerKeepsServing) {
  StartWithStories({"--max-prompt-tokens", "600"});
  struct Case {
    v1::EvaluateEvictionRequest request;
    std::string want;
  };
  std::vector<Case> cases;
  cases.push_back({EvictionRequest(StoryIds(20), {"full", "sinks:4"}), "policies[1]: policy \"sinks:4\""});
  cases.push_back({EvictionRequest(StoryIds(20), {"window:0"}), "keeps no token"});
  cases.push_back({EvictionRequest(StoryIds(20), {}), "between 1 and 16"});
  cases.push_back({EvictionRequest(StoryIds(520), {"full"}), "at most 513 tokens"});
  cases.push_back({EvictionRequest(StoryIds(20), {"sinks:4+600"}), "605 cached tokens"});
  cases.push_back({EvictionRequest(StoryIds(700), {"window:8"}), "--max-prompt-tokens"});
  cases.push_back({EvictionRequest({1}, {"window:8"}), "at least 2"});
  Case positions{EvictionRequest(StoryIds(20), {"window:8"}), "must be cache or original"};
  positions.request.set_positions("shifted");
  cases.push_back(positions);
  Case learned{EvictionRequest(StoryIds(20), {"window:8"}), "learned absolute positions"};
  learned.request.set_model("tiny-gpt2");
  learned.request.set_positions("cache");
  cases.push_back(learned);
  Case tokens{EvictionRequest(StoryIds(20), {"window:8"}), "max_tokens: 1"};
  tokens.request.set_max_tokens(1);
  cases.push_back(tokens);
  for (const Case& c : cases) {
    const EvictionCall call = RunEviction(*stub_, c.request);
    EXPECT_EQ(call.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.want;
    EXPECT_THAT(call.status.error_message(), HasSubstr(c.want));
  }
  // A longer text than the positions with a bounded policy and cache
  // positions is fine.
  v1::EvaluateEvictionRequest ok = EvictionRequest(StoryIds(560), {"sinks:4+28"});
  const EvictionCall call = RunEviction(*stub_, ok);
  ASSERT_TRUE(call.status.ok()) << call.status.error_message();
  ASSERT_FALSE(call.events.empty());
  ASSERT_TRUE(call.events.back().has_summary());
  ASSERT_EQ(call.events.back().summary().results_size(), 1);
  const v1::EvictionPolicyResult& result = call.events.back().summary().results(0);
  EXPECT_EQ(result.steps(), 559);
  ASSERT_EQ(result.nll_size(), 559);
  EXPECT_EQ(result.max_cache_tokens(), 33);
  for (double nll : result.nll()) EXPECT_TRUE(std::isfinite(nll) && nll >= 0) << nll;
  EXPECT_TRUE(std::isfinite(result.perplexity()) && result.perplexity() > 1) << result.perplexity();
  EXPECT_TRUE(StillServes());
}

// The server stops working when its client cancels: the in-flight gauge
// returns to 0 and the feed reports the request CANCELLED during the
// evaluation. The run asked for is 16 policies x 49999 steps over caches of
// about 500 tokens, minutes of work for one CPU thread: finishing it instead
// of stopping would hold the gauge at 1 far past WaitForMetric's 60 s.
TEST_F(RpcEvictionTest, CancelledByItsClientStopsAndFreesTheSlot) {
  StartWithStories();
  grpc::ClientContext feed_context;
  feed_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto feed = stub_->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();

  const int64_t n = 50000;
  std::vector<std::string> policies;
  for (int i = 0; i < 8; ++i) {
    policies.push_back("detected:4+" + std::to_string(490 + i));
    policies.push_back("heavy:4+" + std::to_string(490 + i));
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto reader = stub_->EvaluateEviction(&context, EvictionRequest(StoryIds(n), policies));
  v1::EvaluateEvictionEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_text());
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_progress());
  EXPECT_EQ(event.progress().steps_total(), n - 1);
  EXPECT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_in_flight_requests", 1), 1);
  context.TryCancel();
  int later = 0;
  while (reader->Read(&event)) ++later;
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(later, 16 * (n - 1));
  ASSERT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_in_flight_requests", 0), 0);

  v1::FeedEvent fed;
  bool finished = false;
  while (feed->Read(&fed)) {
    if (fed.has_finished() && fed.finished().rpc() == "EvaluateEviction") {
      finished = true;
      break;
    }
  }
  feed_context.TryCancel();
  ASSERT_TRUE(finished);
  EXPECT_EQ(fed.finished().status(), "CANCELLED");
  EXPECT_THAT(fed.finished().error_message(),
              HasSubstr("the client cancelled the request during the evaluation"));
  EXPECT_EQ(fed.finished().eviction().results_size(), 0);
  EXPECT_EQ(fed.finished().prompt_tokens(), n);
  const std::string scrape = ScrapeMetrics(server_->metrics_address());
  EXPECT_EQ(MetricValue(scrape, "attnscope_requests_total{code=\"CANCELLED\",model=\"stories\","
                                "origin=\"user\",rpc=\"EvaluateEviction\"}"),
            1);
  EXPECT_TRUE(StillServes());
}

TEST_F(RpcEvictionTest, AdmissionLimitsApply) {
  StartWithStories({"--max-concurrent", "1", "--max-queue", "0"});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto holder = stub_->EvaluateEviction(&context, EvictionRequest(StoryIds(3000), {"window:64"}));
  v1::EvaluateEvictionEvent event;
  ASSERT_TRUE(holder->Read(&event));  // admitted: it holds the only slot
  const EvictionCall second = RunEviction(*stub_, EvictionRequest(StoryIds(20), {"window:8"}));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.status.error_message(), HasSubstr("--max-concurrent 1"));
  context.TryCancel();
  while (holder->Read(&event)) {
  }
  holder->Finish();
  EXPECT_EQ(WaitForMetric(server_->metrics_address(), "attnscope_in_flight_requests", 0), 0);
  EXPECT_TRUE(StillServes());
}

// The generated tokens of a Generate stream.
std::vector<v1::GeneratedToken> TokensOf(const GenerateResult& r) {
  std::vector<v1::GeneratedToken> tokens;
  for (const v1::GenerateEvent& e : r.events) {
    if (e.has_token()) tokens.push_back(e.token());
  }
  return tokens;
}

// Generate under sinks:2+6 through the server. With original positions, the
// tokens against one full pass in process over prompt + generated tokens
// with the mask the policy implies (written from its definition): the
// prefill sees the whole prompt, the token fed at t >= P the first 2, the 6
// before it and itself. With cache positions (the default for this rotary
// model) the cache size and the evictions the policy implies.
TEST_F(RpcEvictionTest, GenerateWithABoundedCacheFollowsThePolicy) {
  StartWithStories();
  const int64_t p = 10, sinks = 2, recent = 6;
  const int n = 30;
  const std::vector<int64_t> prompt = StoryIds(p);
  v1::GenerateRequest request;
  request.set_model("stories");
  for (int64_t id : prompt) request.mutable_ids()->add_ids(id);
  request.set_max_new_tokens(n);
  request.set_stop_at_eos(false);
  request.set_cache_policy("sinks:2+6");
  request.set_cache_positions("original");
  const GenerateResult original = RunGenerate(*stub_, request);
  ASSERT_TRUE(original.status.ok()) << original.status.error_message();
  const std::vector<v1::GeneratedToken> got = TokensOf(original);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));

  std::vector<int64_t> seq = prompt;
  for (int i = 0; i + 1 < n; ++i) seq.push_back(got[i].id());  // the last is not fed
  const int64_t len = static_cast<int64_t>(seq.size());
  model::ForwardOptions options;
  options.hidden_keys.assign(len * len, 0);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t j = 0; j < len; ++j) {
      const bool visible = j <= t && (t < p || j < sinks || j >= t - recent);
      options.hidden_keys[t * len + j] = !visible;
    }
  }
  model::ObserverNeeds needs;
  needs.logits = true;
  model::FullRecorder rec(Stories().config().num_layers, Stories().config().num_heads, needs);
  ASSERT_TRUE(Stories().model->Forward({seq}, options, {&rec}).ok());
  const int64_t vocab = Stories().config().vocab_size;
  ASSERT_EQ(rec.logits().size(), static_cast<size_t>(len * vocab));
  // float32 passes of different shapes and thread counts on the trained
  // model: differences of about 1e-5 seen; 1e-4 allowed.
  double entropy = 0, probability = 0;
  for (int i = 0; i < n; ++i) {
    const float* row = rec.logits().data() + (p - 1 + i) * vocab;
    const std::vector<double> lp = engine::testing::ReferenceLogProbs(row, vocab);
    EXPECT_EQ(got[i].id(), engine::testing::ReferenceArgMax(row, vocab)) << i;
    entropy = test::Worse(
        entropy, test::AbsDiff(got[i].entropy_nats(), engine::testing::ReferenceEntropy(lp)));
    probability = test::Worse(probability, test::AbsDiff(got[i].probability(), std::exp(lp[got[i].id()])));
    EXPECT_EQ(got[i].cache_tokens(), sinks + recent) << i;
  }
  std::printf("sinks:2+6 original vs masked full pass: entropy %.3g, probability %.3g\n", entropy,
              probability);
  EXPECT_TRUE(test::Within(entropy, 1e-4)) << entropy;
  EXPECT_TRUE(test::Within(probability, 1e-4)) << probability;

  // Cache positions: the prefill keeps 0, 1 and 4..9; then every fed token
  // (all but the last) evicts the oldest recent one: 2 .. 32 in all.
  request.clear_cache_positions();
  const GenerateResult cache = RunGenerate(*stub_, request);
  ASSERT_TRUE(cache.status.ok()) << cache.status.error_message();
  const std::vector<v1::GeneratedToken> shifted = TokensOf(cache);
  ASSERT_EQ(shifted.size(), static_cast<size_t>(n));
  std::vector<int64_t> evicted, want;
  for (const v1::GeneratedToken& t : shifted) {
    EXPECT_EQ(t.cache_tokens(), sinks + recent) << t.index();
    evicted.insert(evicted.end(), t.evicted_positions().begin(), t.evicted_positions().end());
  }
  for (int64_t j = sinks; j <= p - recent + n - 2; ++j) want.push_back(j);
  EXPECT_EQ(evicted, want);
  EXPECT_EQ(shifted.front().evicted_positions_size(), 3);  // 2, 3 by the prefill, 4 by its feed

  request.set_cache_policy("sinks:x");
  const GenerateResult bad = RunGenerate(*stub_, request);
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.status.error_message(), HasSubstr("cache_policy: policy \"sinks:x\""));
}

}  // namespace
}  // namespace attnscope::testing
