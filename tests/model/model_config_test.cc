#include "service/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "tests/model/test_models.h"

namespace attnscope::model {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ModelConfig> Parse(const std::string& json) {
  return ParseModelConfig(json, "dir/config.json");
}

TEST(ModelConfigTest, ReadsGpt2Keys) {
  auto c = Parse(R"({"model_type":"gpt2","n_layer":3,"n_head":4,"n_embd":48,
                     "vocab_size":1000,"n_positions":64,"n_inner":null,
                     "layer_norm_epsilon":1e-6,"n_ctx":99})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "gpt2");
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->hidden_size, 48);
  EXPECT_EQ(c->head_dim, 12);
  EXPECT_EQ(c->intermediate_size, 192);  // n_inner null -> 4 n_embd
  EXPECT_EQ(c->vocab_size, 1000);
  EXPECT_EQ(c->max_positions, 64);       // n_positions, not the old n_ctx
  EXPECT_DOUBLE_EQ(c->decoder.norm_eps, 1e-6);
  EXPECT_EQ(c->decoder.mlp.activation, Activation::kGeluTanh);
}

// Found by model_config_fuzz (corpus llama_huge_layers): "num_hidden_layers":
// 2^40 made the parser allocate one attention window per layer (8 TiB) and
// abort. Every family now refuses more than 4096 layers before allocating.
TEST(ModelConfigTest, RefusesMoreLayersThanTheLimit) {
  const struct {
    const char* json;
    const char* key;
  } cases[] = {
      {R"({"model_type":"llama","num_hidden_layers":1099511627776})", "num_hidden_layers"},
      {R"({"model_type":"mistral","num_hidden_layers":4097})", "num_hidden_layers"},
      {R"({"model_type":"gpt2","n_layer":4097})", "n_layer"},
      {R"({"model_type":"gpt_neox","num_hidden_layers":4097})", "num_hidden_layers"},
      {R"({"model_type":"opt","num_hidden_layers":4097})", "num_hidden_layers"},
  };
  for (const auto& c : cases) {
    auto config = ParseModelConfig(c.json, "config.json");
    ASSERT_FALSE(config.ok()) << c.json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(),
                HasSubstr(absl::StrCat("config.json: '", c.key, "' = ")));
    EXPECT_THAT(config.status().message(), HasSubstr("more than the 4096 layers attnscope accepts"));
  }
  auto at_limit = ParseModelConfig(
      R"({"model_type":"gpt2","n_layer":4096,"n_embd":8,"n_head":2,"vocab_size":10})", "config.json");
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->num_layers, 4096);
  EXPECT_EQ(at_limit->decoder.attention.window.size(), 4096u);
}

TEST(ModelConfigTest, AppliesHuggingFaceDefaults) {
  auto c = Parse(R"({"model_type":"gpt2"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 12);
  EXPECT_EQ(c->hidden_size, 768);
  EXPECT_EQ(c->vocab_size, 50257);
  EXPECT_EQ(c->max_positions, 1024);
  EXPECT_EQ(c->eos_token_id, 50256);
  EXPECT_DOUBLE_EQ(c->decoder.attention.score_scale, 1.0 / 8.0);  // 1/sqrt(768/12)
  EXPECT_FALSE(c->decoder.attention.divide_by_layer_number);
}

TEST(ModelConfigTest, ReadsTheBundledModel) {
  auto c = LoadModelConfig(testing::BundledModelDir());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->num_heads, 6);
  EXPECT_EQ(c->hidden_size, 192);
  EXPECT_EQ(c->max_positions, 512);
  EXPECT_EQ(c->torch_dtype, "float16");
}

struct BadConfig {
  const char* json;
  const char* message;
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsRejectedWithAClearMessage) {
  auto c = Parse(GetParam().json);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfigTest,
    ::testing::Values(BadConfig{"{not json", "not valid JSON"},
                      BadConfig{"[1,2]", "expected a JSON object"},
                      BadConfig{R"({"model_type":"bert"})", "model_type 'bert' is not supported"},
                      BadConfig{R"({"n_layer":2})",
                                "model_type is missing: config.json must name the family"},
                      BadConfig{R"({"model_type":7})", "model_type must be a string, got 7"},
                      BadConfig{R"({"model_type":"gpt2","n_head":5,"n_embd":48})",
                                "n_head=5 does not divide n_embd=48"},
                      BadConfig{R"({"model_type":"gpt2","n_layer":0})",
                                "'n_layer' must be a positive integer, got 0"},
                      BadConfig{R"({"model_type":"gpt2","n_embd":"wide"})",
                                "'n_embd' must be a positive integer"},
                      BadConfig{R"({"model_type":"gpt2","activation_function":"softsign"})",
                                "'activation_function' = \"softsign\" is not supported"},
                      BadConfig{R"({"model_type":"gpt2","layer_norm_epsilon":"x"})",
                                "'layer_norm_epsilon' must be a number"}));

TEST(ModelConfigTest, MissingFileIsNotFound) {
  auto c = LoadModelConfig("/nonexistent/model");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/model/config.json"));
}

}  // namespace
}  // namespace attnscope::model
