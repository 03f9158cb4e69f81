// What bounds a generation: settings validation, stopping at eos or at the
// length limit, and cancellation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "service/engine/generation.h"
#include "tests/engine/engine_test_util.h"

namespace attnscope::engine {
namespace {

using ::testing::HasSubstr;

// A model that is `inner` in every way except the eos id its config names.
class EosOverride : public model::LanguageModel {
 public:
  EosOverride(const model::LanguageModel& inner, int64_t eos)
      : inner_(inner), config_(inner.config()) {
    config_.eos_token_id = eos;
  }
  const model::ModelConfig& config() const override { return config_; }
  absl::Status Forward(const std::vector<std::vector<int64_t>>& batch,
                       const model::ForwardOptions& options,
                       const std::vector<model::ForwardObserver*>& observers) const override {
    return inner_.Forward(batch, options, observers);
  }
  std::unique_ptr<model::KvCache> NewCache() const override { return inner_.NewCache(); }

 private:
  const model::LanguageModel& inner_;
  model::ModelConfig config_;
};

Prompt IdsPrompt(const ModelBundle& bundle, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((11 + 37 * i) % 997);
  absl::StatusOr<Prompt> p = PromptFromIds(bundle, ids);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Prompt{};
}

std::vector<int64_t> Ids(const GenerationResult& r) {
  std::vector<int64_t> ids;
  for (const GeneratedToken& t : r.tokens) ids.push_back(t.id);
  return ids;
}

TEST(GenerationStopTest, StopsAfterEmittingEos) {
  const ModelBundle* hub = testing::SharedBundle(testing::HubFixtureDir());
  ASSERT_NE(hub, nullptr);
  const Prompt prompt = IdsPrompt(*hub, 5);
  GenerationSettings s;
  s.max_new_tokens = 8;
  // The fixture's eos (50256) is outside its vocabulary: it never stops early.
  absl::StatusOr<GenerationResult> free_run = Generate(*hub, prompt, s);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  EXPECT_EQ(free_run->stop_reason, "max_new_tokens");
  ASSERT_EQ(free_run->tokens.size(), 8u);

  // Declare the greedy token at index 3 the eos: generation ends right after it.
  const std::vector<int64_t> greedy = Ids(*free_run);
  const int64_t eos = greedy[3];
  size_t first = 0;
  while (greedy[first] != eos) ++first;
  ModelBundle overridden;
  overridden.directory = hub->directory;
  overridden.model = std::make_unique<EosOverride>(*hub->model, eos);
  for (bool sinks : {false, true}) {
    s.layer_sink_scores = sinks;
    int calls = 0;
    absl::StatusOr<GenerationResult> r =
        Generate(overridden, prompt, s, [&](const GeneratedToken&) { ++calls; });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->stop_reason, "eos");
    ASSERT_EQ(r->tokens.size(), first + 1);
    EXPECT_EQ(r->tokens.back().id, eos);
    EXPECT_EQ(calls, static_cast<int>(first + 1));
    EXPECT_EQ(r->tokens.back().sink_scores.empty(), !sinks);
  }
  s.stop_at_eos = false;
  absl::StatusOr<GenerationResult> ignored = Generate(overridden, prompt, s);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_EQ(ignored->stop_reason, "max_new_tokens");
  EXPECT_EQ(Ids(*ignored), greedy);
}

TEST(GenerationStopTest, FillsTheContextExactly) {
  const ModelBundle* hub = testing::SharedBundle(testing::HubFixtureDir());
  ASSERT_NE(hub, nullptr);
  GenerationSettings s;
  s.max_new_tokens = 4;  // 60 + 4 = 64 positions
  s.layer_sink_scores = true;
  absl::StatusOr<GenerationResult> r = Generate(*hub, IdsPrompt(*hub, 60), s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tokens.size(), 4u);
  EXPECT_EQ(r->tokens.back().position, 63);
}

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bundle_ = testing::SharedBundle(testing::TinyModelDir());
    ASSERT_NE(bundle_, nullptr);
    prompt_ = IdsPrompt(*bundle_, 8);
  }
  // The error of ValidateGenerationSettings for invalid settings `s`;
  // Generate must return the same and never call on_token.
  absl::Status Check(const GenerationSettings& s) {
    const absl::Status status = ValidateGenerationSettings(*bundle_, prompt_, s);
    EXPECT_FALSE(status.ok());
    int calls = 0;
    absl::StatusOr<GenerationResult> r =
        Generate(*bundle_, prompt_, s, [&](const GeneratedToken&) { ++calls; });
    EXPECT_EQ(r.status(), status);
    EXPECT_EQ(calls, 0);
    return status;
  }
  const ModelBundle* bundle_ = nullptr;
  Prompt prompt_;
};

TEST_F(ValidationTest, MaxNewTokens) {
  GenerationSettings s;
  s.max_new_tokens = 600;
  absl::Status st = Check(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "max_new_tokens=600: the prompt has 8 tokens and the model accepts 512 positions, "
            "so at most 504 new tokens fit");
  s.max_new_tokens = 505;
  EXPECT_THAT(Check(s).message(), HasSubstr("max_new_tokens=505"));
  s.max_new_tokens = 504;
  EXPECT_TRUE(ValidateGenerationSettings(*bundle_, prompt_, s).ok());
  for (int bad : {0, -3}) {
    s.max_new_tokens = bad;
    st = Check(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("max_new_tokens=" + std::to_string(bad)));
    EXPECT_THAT(st.message(), HasSubstr("at least 1"));
  }
}

TEST_F(ValidationTest, Temperature) {
  GenerationSettings s;
  for (double bad : {-0.5, 100.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    s.sampling.temperature = bad;
    const absl::Status st = Check(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("temperature="));
    EXPECT_THAT(st.message(), HasSubstr("[0, 100]"));
  }
  s.sampling.temperature = -0.5;
  EXPECT_THAT(Check(s).message(), HasSubstr("temperature=-0.5"));
  s.sampling.temperature = 100;
  EXPECT_TRUE(ValidateGenerationSettings(*bundle_, prompt_, s).ok());
}

TEST_F(ValidationTest, TopKTopPAndAlternatives) {
  GenerationSettings s;
  s.sampling.top_k = -1;
  absl::Status st = Check(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("top_k=-1"));
  s.sampling.top_k = 0;
  for (double bad : {-0.1, 1.25, std::nan("")}) {
    s.sampling.top_p = bad;
    st = Check(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("top_p="));
    EXPECT_THAT(st.message(), HasSubstr("[0, 1]"));
  }
  s.sampling.top_p = 1.0;
  for (int bad : {-1, 21}) {
    s.num_alternatives = bad;
    st = Check(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("num_alternatives=" + std::to_string(bad)));
    EXPECT_THAT(st.message(), HasSubstr("[0, 20]"));
  }
  s.num_alternatives = 20;
  s.sampling.top_k = 100000;  // more than the vocabulary: no cut
  EXPECT_TRUE(ValidateGenerationSettings(*bundle_, prompt_, s).ok());
}

TEST_F(ValidationTest, EmptyPromptAndPromptTooLong) {
  GenerationSettings s;
  Prompt empty;
  EXPECT_EQ(ValidateGenerationSettings(*bundle_, empty, s).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Generate(*bundle_, empty, s).status().code(), absl::StatusCode::kInvalidArgument);
  s.max_new_tokens = 1;
  const Prompt full = IdsPrompt(*bundle_, 512);
  const absl::Status st = ValidateGenerationSettings(*bundle_, full, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("the prompt has 512 tokens"));
  EXPECT_THAT(st.message(), HasSubstr("at most 0 new tokens fit"));
}

TEST(GenerationCancelTest, ShouldStopAfterTwoStepsCancels) {
  const ModelBundle* tiny = testing::SharedBundle(testing::TinyModelDir());
  ASSERT_NE(tiny, nullptr);
  const Prompt prompt = IdsPrompt(*tiny, 6);
  for (bool sinks : {false, true}) {
    int emitted = 0;
    GenerationSettings s;
    s.max_new_tokens = 10;
    s.layer_sink_scores = sinks;
    s.should_stop = [&] { return emitted >= 2; };
    absl::StatusOr<GenerationResult> r =
        Generate(*tiny, prompt, s, [&](const GeneratedToken&) { ++emitted; });
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
    EXPECT_EQ(emitted, 2);
  }
}

TEST(GenerationCancelTest, ShouldStopDuringThePrefillCancels) {
  const ModelBundle* tiny = testing::SharedBundle(testing::TinyModelDir());
  ASSERT_NE(tiny, nullptr);
  int checks = 0, emitted = 0;
  GenerationSettings s;
  s.should_stop = [&] { return ++checks > 3; };  // inside the prefill's layers
  absl::StatusOr<GenerationResult> r =
      Generate(*tiny, IdsPrompt(*tiny, 6), s, [&](const GeneratedToken&) { ++emitted; });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(emitted, 0);
}

}  // namespace
}  // namespace attnscope::engine
