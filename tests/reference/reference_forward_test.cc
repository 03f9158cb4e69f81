// The forward pass against independent float64 reference tensors
// (scripts/reference/gpt2_reference.py, stored under tests/data/reference):
// the bundled model, the fixture at T = 1 and at T = n_positions, GPT-2's
// activation and attention-scaling branches, and BF16 checkpoints. Only the
// public LanguageModel interface is used, so these tests check any rewrite
// of the model layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "tests/common/float_compare.h"
#include "tests/reference/reference_forward.h"

namespace attnscope::reference {
namespace {

using test::AllClose;
using test::MaxAbsDiff;

const char kFixture[] = "models/gpt2-random-hub-layout";
const char kVariants[] = "reference/gpt2-fixture-variants.safetensors";

// float32 forward vs float64 reference on the small fixture: measured
// differences are ~1e-6 (see docs/models.md, Accuracy).
constexpr double kAttentionTol = 1e-5, kHiddenTol = 1e-4, kLogitTol = 1e-4;

ReferenceTensors Load(const std::string& file, const std::string& prefix = "") {
  auto r = LoadReferenceTensors(TestData(file), prefix);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReferenceTensors{};
}

ForwardOutput RunOrFail(const std::string& dir, const std::vector<int64_t>& ids) {
  auto out = RunForward(dir, ids);
  EXPECT_TRUE(out.ok()) << dir << ": " << out.status();
  return out.ok() ? *std::move(out) : ForwardOutput{};
}

struct Tolerances {
  double attentions = kAttentionTol, hidden = kHiddenTol, logits = kLogitTol;
};

void ExpectMatches(const ForwardOutput& got, const ReferenceTensors& ref, const std::string& what,
                   const Tolerances& tol = {}) {
  ASSERT_FALSE(ref.attentions.empty()) << what;
  std::printf("%s: T=%zu max |diff| attentions %.3g hidden %.3g logits %.3g\n", what.c_str(),
              ref.input_ids.size(), MaxAbsDiff(got.attentions, ref.attentions),
              MaxAbsDiff(got.hidden_states, ref.hidden_states),
              ref.logits.empty() ? MaxAbsDiff(got.LastLogits(), ref.logits_last)
                                 : MaxAbsDiff(got.logits, ref.logits));
  EXPECT_TRUE(AllClose(got.attentions, ref.attentions, tol.attentions)) << what << " attentions";
  EXPECT_TRUE(AllClose(got.hidden_states, ref.hidden_states, tol.hidden)) << what << " hidden";
  if (ref.logits.empty()) {
    EXPECT_TRUE(AllClose(got.LastLogits(), ref.logits_last, tol.logits)) << what << " logits";
  } else {
    EXPECT_TRUE(AllClose(got.logits, ref.logits, tol.logits)) << what << " logits";
  }
}

TEST(ReferenceForwardTest, SingleTokenMatchesTheReference) {
  const ReferenceTensors ref = Load(kVariants, "t1.");
  ASSERT_EQ(ref.input_ids.size(), 1u);
  ExpectMatches(RunOrFail(TestData(kFixture), ref.input_ids), ref, "T=1");
}

TEST(ReferenceForwardTest, FullPositionCountMatchesTheReference) {
  const ReferenceTensors ref = Load(kVariants, "full.");
  ASSERT_EQ(ref.input_ids.size(), 64u);  // the fixture's n_positions
  ExpectMatches(RunOrFail(TestData(kFixture), ref.input_ids), ref, "T=n_positions");
}

class Gpt2VariantTest
    : public ::testing::TestWithParam<std::tuple<const char*, const char*, const char*>> {};

TEST_P(Gpt2VariantTest, MatchesTheReferenceForThatConfig) {
  const auto [variant, key, value] = GetParam();
  ScratchDir dir;
  ASSERT_TRUE(CopyWithConfig(TestData(kFixture), dir.path(), {{key, value}}).ok());
  const ReferenceTensors ref = Load(kVariants, std::string(variant) + ".");
  // Tighter than the default (measured: ~2e-6 at most): on this small random
  // model gelu and gelu_new differ by only ~1e-4 in the logits.
  const Tolerances tight{1e-5, 1e-5, 1e-5};
  ExpectMatches(RunOrFail(dir.path(), ref.input_ids), ref, variant, tight);
  // The branch matters: the unchanged config is several tolerances away from
  // this reference, so a loader that ignored the field would fail above.
  const ForwardOutput base = RunOrFail(TestData(kFixture), ref.input_ids);
  EXPECT_GT(MaxAbsDiff(base.logits, ref.logits), 5 * tight.logits) << variant;
}

INSTANTIATE_TEST_SUITE_P(
    Gpt2, Gpt2VariantTest,
    ::testing::Values(std::make_tuple("gelu", "activation_function", "\"gelu\""),
                      std::make_tuple("relu", "activation_function", "\"relu\""),
                      std::make_tuple("inverse_layer_idx", "scale_attn_by_inverse_layer_idx",
                                      "true")),
    [](const auto& info) { return std::string(std::get<0>(info.param)); });

TEST(ReferenceForwardTest, BundledModelMatchesTheStoredReference) {
  const ReferenceTensors ref = Load("reference/tiny-gpt2-cat.safetensors");
  ASSERT_EQ(ref.input_ids.size(), 8u);
  const ForwardOutput got = RunOrFail(BundledModelDir(), ref.input_ids);
  std::printf("tiny-gpt2: max |diff| attentions %.3g hidden %.3g last logits %.3g\n",
              MaxAbsDiff(got.attentions, ref.attentions),
              MaxAbsDiff(got.hidden_states, ref.hidden_states),
              MaxAbsDiff(got.LastLogits(), ref.logits_last));
  EXPECT_TRUE(AllClose(got.attentions, ref.attentions, 1e-5)) << "attentions";
  // Trained weights give hidden states and logits of size ~10-100: relative.
  EXPECT_TRUE(AllClose(got.hidden_states, ref.hidden_states, 1e-4, 1e-5)) << "hidden";
  EXPECT_TRUE(AllClose(got.LastLogits(), ref.logits_last, 1e-3, 1e-5)) << "logits";
}

// BF16 tolerances against the float32 reference: bf16 keeps 8 bits of
// mantissa (relative rounding 2^-9 = 0.2% per weight).
constexpr double kBf16AttentionTol = 2e-2, kBf16LogitTol = 5e-2;

TEST(Bf16CheckpointTest, MatchesTheFloat32ForwardOfTheRoundedWeights) {
  ScratchDir bf16, rounded;
  ASSERT_TRUE(WriteRoundedCopy(TestData(kFixture), bf16.path(), true).ok());
  ASSERT_TRUE(WriteRoundedCopy(TestData(kFixture), rounded.path(), false).ok());
  const ReferenceTensors ref = Load(std::string(kFixture) + "/reference.safetensors");
  const ForwardOutput from_bf16 = RunOrFail(bf16.path(), ref.input_ids);
  const ForwardOutput from_f32 = RunOrFail(rounded.path(), ref.input_ids);
  std::printf("bf16 vs rounded float32: attentions %.3g logits %.3g; vs float32 reference: "
              "attentions %.3g logits %.3g\n",
              MaxAbsDiff(from_bf16.attentions, from_f32.attentions),
              MaxAbsDiff(from_bf16.logits, from_f32.logits),
              MaxAbsDiff(from_bf16.attentions, ref.attentions),
              MaxAbsDiff(from_bf16.logits, ref.logits));
  // Same weights, so the same forward pass: only the loading differs.
  EXPECT_TRUE(AllClose(from_bf16.attentions, from_f32.attentions, 1e-6));
  EXPECT_TRUE(AllClose(from_bf16.hidden_states, from_f32.hidden_states, 1e-6));
  EXPECT_TRUE(AllClose(from_bf16.logits, from_f32.logits, 1e-6));
  // And close to the float32 model, within what bf16 rounding moves.
  EXPECT_TRUE(AllClose(from_bf16.attentions, ref.attentions, kBf16AttentionTol));
  EXPECT_TRUE(AllClose(from_bf16.logits, ref.logits, kBf16LogitTol));
  // The rounding really happened (a loader that read the bytes as float32,
  // or a writer that kept float32, would not move anything).
  EXPECT_GT(MaxAbsDiff(from_bf16.logits, ref.logits), 1e-5);
}

TEST(Bf16CheckpointTest, BFloat16RoundingIsNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);  // halfway: to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82);  // halfway: to even (up)
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(NAN))));
}

}  // namespace
}  // namespace attnscope::reference
