// attnscope generate --cache-policy / --cache-positions end to end: every
// greedy token, its probability, the positions evicted with it and the cache
// size it reports, against the reference of tests/engine/eviction_reference.h
// computed here through the library (the policy written out again, fed the
// attention of full passes over what it keeps: masked passes for original
// positions on the five-layer stories260K, passes over the kept tokens of a
// one-layer copy for cache positions, there past the model's positions).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/engine/streaming_cache.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/eviction_reference.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using model::CachePositions;
using nlohmann::json;
using testing::Fixture;
using testing::RunCli;

std::string Stories() { return Fixture("llama-stories260K"); }

// Ten prompt ids for the stories260K vocabulary (512), BOS first.
std::vector<int64_t> PromptIds() {
  std::vector<int64_t> ids = {1};
  for (int i = 1; i < 10; ++i) ids.push_back((i * 37 + 11) % 512);
  return ids;
}

std::string Joined(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

std::unique_ptr<engine::ModelBundle> LoadBundle(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<engine::ModelBundle>> b = engine::LoadModelBundle(dir);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// `attnscope generate --json` of PromptIds() under `policy` (and
// --cache-positions `positions` unless empty); a failure and null when it
// does not exit 0.
json Generate(const std::string& dir, const std::string& policy, const std::string& positions,
              int max_new, std::string* err = nullptr) {
  std::vector<std::string> args = {"generate",         "--model", dir, "--ids",
                                   Joined(PromptIds()), "--max-new-tokens",
                                   std::to_string(max_new), "--ignore-eos", "--json",
                                   "--threads",        "1",       "--cache-policy", policy};
  if (!positions.empty()) args.insert(args.end(), {"--cache-positions", positions});
  auto r = RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << policy << " " << positions << ": " << r.err;
  if (err != nullptr) *err = r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

// Probabilities from passes of different shapes; stories260K's activations
// reach about 12.
constexpr double kProbabilityTol = 1e-4;

// Reference step 0 is the prefill, step k >= 1 feeds new token k-1. Token k
// is the argmax of step k; it reports the evictions of the step that feeds
// it (the first token also the prefill's) and the cache after them; the last
// token is not fed: nothing evicted, the cache as it was.
void ExpectEqualsReference(const engine::ModelBundle& b, const json& out,
                           const std::string& policy, CachePositions where) {
  const std::vector<int64_t> prompt = PromptIds();
  const json& tokens = out["tokens"];
  const size_t m = tokens.size();
  ASSERT_GE(m, 2u);
  std::vector<int64_t> ids = prompt;
  for (const json& t : tokens) ids.push_back(t["id"].get<int64_t>());
  const std::vector<engine::testing::RefStep> steps = engine::testing::ReferenceStream(
      b, ids, static_cast<int64_t>(prompt.size()), engine::testing::RefPolicy::Parse(policy), where);
  ASSERT_EQ(steps.size(), m + 1);
  size_t evictions = 0;
  double worst = 0, margin = steps[0].margin;
  for (size_t k = 0; k < m; ++k) {
    const json& t = tokens[k];
    const std::vector<float>& row = steps[k].logits;
    const int64_t id = t["id"].get<int64_t>();
    EXPECT_EQ(id, engine::testing::ReferenceArgMax(row.data(), static_cast<int64_t>(row.size())))
        << policy << " token " << k;
    const double p = std::exp(-engine::testing::RefNll(row, id));
    worst = test::Worse(worst, test::AbsDiff(t["probability"].get<double>(), p));
    std::vector<int64_t> want_evicted = k == 0 ? steps[0].evicted : std::vector<int64_t>{};
    int64_t want_cache = steps[k].cache_tokens;
    if (k + 1 < m) {
      want_evicted.insert(want_evicted.end(), steps[k + 1].evicted.begin(),
                          steps[k + 1].evicted.end());
      want_cache = steps[k + 1].cache_tokens;
      margin = std::min(margin, steps[k + 1].margin);
    }
    const std::vector<int64_t> got =
        t.value("evicted_positions", json::array()).get<std::vector<int64_t>>();
    EXPECT_EQ(got, want_evicted) << policy << " token " << k;
    EXPECT_EQ(t["cache_tokens"].get<int64_t>(), want_cache) << policy << " token " << k;
    evictions += got.size();
  }
  std::printf("%s %s: max |p - reference| %.3g, closest ranking call %.3g\n", policy.c_str(),
              engine::CachePositionsName(where).c_str(), worst, margin);
  EXPECT_LE(worst, kProbabilityTol) << policy;
  EXPECT_GT(evictions, 0u) << policy << " never evicts: the check would be the full cache";
}

TEST(GenerateCacheCliTest, OriginalPositionsEqualTheReference) {
  std::unique_ptr<engine::ModelBundle> b = LoadBundle(Stories());
  ASSERT_NE(b, nullptr);
  for (const std::string policy : {"sinks:2+6", "window:8", "detected:3+5", "heavy:3+5"}) {
    const json out = Generate(Stories(), policy, "original", 24);
    ASSERT_TRUE(out.is_object()) << policy;
    EXPECT_EQ(out["generated_tokens"], 24);
    ExpectEqualsReference(*b, out, policy, CachePositions::kOriginal);
  }
  // The flag reaches the engine: cache positions (the default for this
  // rotary model) give other probabilities under the same policy.
  const json original = Generate(Stories(), "sinks:2+6", "original", 24);
  const json cache = Generate(Stories(), "sinks:2+6", "", 24);
  ASSERT_TRUE(original.is_object() && cache.is_object());
  std::vector<double> a, c;
  for (const json& t : original["tokens"]) a.push_back(t["probability"].get<double>());
  for (const json& t : cache["tokens"]) c.push_back(t["probability"].get<double>());
  EXPECT_GT(test::MaxAbsDiff(a, c), 1e-3);
}

// The first layer of stories260K with 16 positions: 10 prompt tokens + 24 new
// ones under cache positions run past them.
TEST(GenerateCacheCliTest, CachePositionsEqualTheReferencePastThePositions) {
  model::testing::ScratchDir dir;
  ASSERT_TRUE(engine::testing::WriteOneLayerCopy(Stories(), dir, 16));
  std::unique_ptr<engine::ModelBundle> b = LoadBundle(dir.str());
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->config().max_positions, 16);
  for (const std::string policy : {"sinks:2+5", "window:7", "detected:2+5", "heavy:2+5"}) {
    std::string err;
    const json out = Generate(dir.str(), policy, policy == "window:7" ? "cache" : "", 24, &err);
    ASSERT_TRUE(out.is_object()) << policy;
    EXPECT_EQ(out["generated_tokens"], 24) << policy;
    EXPECT_EQ(err, "") << policy;
    EXPECT_EQ(out["tokens"].back()["position"], 33) << policy;
    ExpectEqualsReference(*b, out, policy, CachePositions::kCache);
  }
  // Without the shift, the positions run out: cut to the 6 left, with a note.
  for (const auto& [policy, positions] : std::vector<std::pair<std::string, std::string>>{
           {"sinks:2+5", "original"}, {"full", ""}}) {
    std::string err;
    const json out = Generate(dir.str(), policy, positions, 24, &err);
    ASSERT_TRUE(out.is_object()) << policy;
    EXPECT_EQ(out["generated_tokens"], 6) << policy;
    EXPECT_THAT(err, HasSubstr("--max-new-tokens 24 cut to 6")) << policy;
  }
}

TEST(GenerateCacheCliTest, BadPolicyOrPositionsAreErrors) {
  auto bad_policy = RunCli({"generate", "--text", "hi", "--cache-policy", "sinks:4"});
  EXPECT_EQ(bad_policy.exit_code, 2);
  EXPECT_THAT(bad_policy.err, HasSubstr("policy \"sinks:4\": expected two sizes"));
  auto bad_positions = RunCli({"generate", "--text", "hi", "--cache-policy", "window:4",
                               "--cache-positions", "shift"});
  EXPECT_EQ(bad_positions.exit_code, 2);
  EXPECT_THAT(bad_positions.err, HasSubstr("--cache-positions=\"shift\": must be cache or original"));
  // GPT-2's positions are learned: they cannot be shifted to cache indices.
  auto learned = RunCli({"generate", "--text", "hi", "--cache-policy", "window:4",
                         "--cache-positions", "cache"});
  EXPECT_NE(learned.exit_code, 0);
  EXPECT_THAT(learned.err, HasSubstr("learned absolute positions"));
}

}  // namespace
}  // namespace attnscope
