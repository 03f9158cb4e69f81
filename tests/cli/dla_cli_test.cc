// attnscope dla end to end: --json against the independent float64 golden
// file of the Llama fixture (scripts/reference/dla_reference.py), the text
// report against the JSON, --target and --target-id, and the errors that
// need a prompt or a model to be seen.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/golden_tensors.h"
#include "tests/common/json_compare.h"

namespace attnscope {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using ::testing::HasSubstr;
using testing::RunCli;
using test::AbsDiff;
using test::JsonNumber;
using test::Worse;

class DlaCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = test::OpenGolden("reference/dla-llama.safetensors");
    ASSERT_NE(golden_, nullptr);
    ids_ = ReadTensor<int64_t>(*golden_, "input_ids");
    positions_ = ReadTensor<int64_t>(*golden_, "positions");
  }
  std::vector<std::string> Args(std::vector<std::string> more) const {
    return test::WithArgs(
        {"dla", "--model", TestDataPath("models/llama"), "--ids", absl::StrJoin(ids_, ",")}, more);
  }
  std::string BothPositions() const { return absl::StrCat(positions_[0], ",", positions_[1]); }
  std::unique_ptr<SafetensorsFile> golden_;
  std::vector<int64_t> ids_, positions_;
};

TEST_F(DlaCliTest, JsonMatchesTheFloat64Reference) {
  const auto r = RunCli(Args({"--positions", BothPositions(), "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const auto targets = ReadTensor<int64_t>(*golden_, "targets");
  const auto embedding = ReadTensor<double>(*golden_, "embedding");
  const auto heads = ReadTensor<double>(*golden_, "heads");
  const auto bias = ReadTensor<double>(*golden_, "attention_bias");
  const auto mlp = ReadTensor<double>(*golden_, "mlp");
  const auto total = ReadTensor<double>(*golden_, "logit_before_cap");
  const int64_t layers = out["num_layers"].get<int64_t>(), h = out["num_heads"].get<int64_t>();
  ASSERT_EQ(layers, 3);
  ASSERT_EQ(h, 8);
  ASSERT_EQ(out["positions"].size(), 2u);
  double worst = 0;
  for (size_t k = 0; k < 2; ++k) {
    const nlohmann::json& p = out["positions"][k];
    EXPECT_EQ(p["position"].get<int64_t>(), positions_[k]);
    EXPECT_EQ(p["target"]["id"].get<int64_t>(), targets[k]);
    EXPECT_EQ(p["target"]["source"], k == 0 ? "next_token" : "top_prediction");
    worst = Worse(worst, AbsDiff(JsonNumber(p["embedding"]), embedding[k]));
    worst = Worse(worst, AbsDiff(JsonNumber(p["total"]), total[k]));
    ASSERT_EQ(p["heads"].size(), static_cast<size_t>(layers));
    for (int64_t l = 0; l < layers; ++l) {
      ASSERT_EQ(p["heads"][l].size(), static_cast<size_t>(h));
      for (int64_t j = 0; j < h; ++j) {
        worst = Worse(worst, AbsDiff(JsonNumber(p["heads"][l][j]), heads[(k * layers + l) * h + j]));
      }
      worst = Worse(worst, AbsDiff(JsonNumber(p["attention_bias"][l]), bias[k * layers + l]));
      worst = Worse(worst, AbsDiff(JsonNumber(p["mlp"][l]), mlp[k * layers + l]));
    }
    // Llama has no soft-capping: the parts give the model's logit.
    worst = Worse(worst, AbsDiff(JsonNumber(p["total"]), JsonNumber(p["logit"])));
  }
  std::cout << "llama: max |diff| from the float64 reference " << worst << "\n";
  EXPECT_TRUE(test::Within(worst, 1e-4)) << worst;
}

TEST_F(DlaCliTest, TextShowsTheSumTheGridAndTheLargestParts) {
  const auto json = RunCli(Args({"--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json p = nlohmann::json::parse(json.out)["positions"][0];
  const auto text = RunCli(Args({"--top", "3"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(absl::StrCat("position ", ids_.size() - 1)));
  EXPECT_THAT(text.out, HasSubstr(absl::StrCat("-> target ", p["target"]["id"].get<int64_t>())));
  EXPECT_THAT(text.out, HasSubstr("(the model's top prediction)"));
  EXPECT_THAT(text.out, HasSubstr(absl::StrFormat("parts sum to %.4f", JsonNumber(p["total"]))));
  EXPECT_THAT(text.out, HasSubstr("  layer  H0      H1"));
  EXPECT_THAT(text.out, HasSubstr(absl::StrFormat("%+.3f", JsonNumber(p["heads"][2][7]))));
  EXPECT_THAT(text.out, HasSubstr("largest parts:"));
}

TEST_F(DlaCliTest, GivenTargetsAndTheirErrors) {
  // One id for both positions, then one id each.
  auto r = RunCli(Args({"--positions", BothPositions(), "--target-id", "5", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(r.out);
  for (const auto& p : out["positions"]) {
    EXPECT_EQ(p["target"]["id"], 5);
    EXPECT_EQ(p["target"]["source"], "given");
    EXPECT_TRUE(test::Within(AbsDiff(JsonNumber(p["total"]), JsonNumber(p["logit"])), 1e-4)) << p;
  }
  r = RunCli(Args({"--positions", BothPositions(), "--target-id", "7,9", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["positions"][0]["target"]["id"], 7);
  EXPECT_EQ(out["positions"][1]["target"]["id"], 9);

  r = RunCli(Args({"--target-id", "256"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--target-id: 256 is outside the vocabulary [0, 256)"));
  r = RunCli(Args({"--positions", BothPositions(), "--target-id", "1,2,3"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("3 ids for 2 positions"));
  r = RunCli(Args({"--positions", "0,99"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--positions 99 is outside the prompt"));
}

// --target takes text that is one token of the model's tokenizer.
TEST(DlaCliTargetTest, TargetTextMustBeOneToken) {
  // The bundled model (tiny-gpt2, GPT-2's tokenizer).
  const std::vector<std::string> base = {"dla", "--text", "The Eiffel Tower is in"};
  auto with = [&](const std::vector<std::string>& more) { return RunCli(test::WithArgs(base, more)); };
  auto r = with({"--target", " Paris", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out)["positions"][0];
  EXPECT_EQ(p["target"]["token"], " Paris");
  EXPECT_EQ(p["target"]["source"], "given");
  EXPECT_TRUE(test::Within(AbsDiff(JsonNumber(p["total"]), JsonNumber(p["logit"])), 1e-4)) << p;
  r = with({"--target", " Parisian Eiffel"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tokens ("));
  EXPECT_THAT(r.err, HasSubstr("not one; give a single token"));
}

}  // namespace
}  // namespace attnscope
