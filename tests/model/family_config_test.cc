// config.json files as real checkpoints ship them (and as transformers v5
// writes them), parsed into the decoder description.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/model/model_config.h"

namespace attnscope::model {
namespace {

using ::testing::ElementsAre;
using ::testing::Each;
using ::testing::HasSubstr;

ModelConfig Parse(const std::string& json) {
  auto c = ParseModelConfig(json, "hub/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

TEST(FamilyConfigTest, Llama31WithLlama3RopeScaling) {
  const ModelConfig c = Parse(R"({"model_type":"llama","hidden_size":4096,
      "intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,
      "num_key_value_heads":8,"max_position_embeddings":131072,"rms_norm_eps":1e-05,
      "rope_theta":500000.0,"rope_scaling":{"factor":8.0,"low_freq_factor":1.0,
      "high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
      "vocab_size":128256,"tie_word_embeddings":false,"torch_dtype":"bfloat16",
      "bos_token_id":128000,"eos_token_id":[128001,128008,128009],"attention_bias":false,
      "mlp_bias":false,"pretraining_tp":1,"hidden_act":"silu"})");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  const RopeSpec& r = c.decoder.rope;
  EXPECT_EQ(r.kind, RopeKind::kLlama3);
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_DOUBLE_EQ(r.theta, 500000.0);
  EXPECT_DOUBLE_EQ(r.factor, 8.0);
  EXPECT_EQ(r.original_max_positions, 8192);
  EXPECT_DOUBLE_EQ(r.high_freq_factor, 4.0);
  EXPECT_DOUBLE_EQ(r.attention_scaling, 1.0);
  EXPECT_FALSE(c.decoder.tied_head);
  EXPECT_EQ(c.decoder.norm, NormKind::kRmsNorm);
  EXPECT_TRUE(c.decoder.mlp.gated);
  EXPECT_EQ(c.decoder.mlp.activation, Activation::kSilu);
  EXPECT_THAT(c.decoder.attention.window, Each(0));
  EXPECT_EQ(c.decoder.names.q, "self_attn.q_proj");
}

TEST(FamilyConfigTest, NullHeadDimAndKvHeadsFallBack) {
  const ModelConfig c = Parse(R"({"model_type":"llama","hidden_size":2048,
      "num_attention_heads":32,"num_key_value_heads":null,"head_dim":null,
      "num_hidden_layers":2,"intermediate_size":5632,"vocab_size":32000})");
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.decoder.rope.kind, RopeKind::kDefault);
  EXPECT_DOUBLE_EQ(c.decoder.attention.score_scale, 1.0 / 8.0);
}

TEST(FamilyConfigTest, Qwen25WithoutSlidingWindow) {
  const ModelConfig c = Parse(R"({"model_type":"qwen2","hidden_size":3584,
      "intermediate_size":18944,"num_hidden_layers":28,"num_attention_heads":28,
      "num_key_value_heads":4,"max_position_embeddings":32768,"max_window_layers":28,
      "rope_theta":1000000.0,"sliding_window":131072,"use_sliding_window":false,
      "tie_word_embeddings":false,"vocab_size":152064,"rms_norm_eps":1e-06})");
  EXPECT_THAT(c.decoder.attention.window, Each(0));
  EXPECT_TRUE(c.decoder.attention.qkv_bias);
  EXPECT_FALSE(c.decoder.attention.o_bias);
  EXPECT_DOUBLE_EQ(c.decoder.rope.theta, 1e6);
}

TEST(FamilyConfigTest, QwenSlidingWindowStartsAtMaxWindowLayers) {
  const ModelConfig c = Parse(R"({"model_type":"qwen2","hidden_size":64,
      "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,
      "intermediate_size":128,"vocab_size":256,"use_sliding_window":true,
      "sliding_window":8,"max_window_layers":2})");
  EXPECT_THAT(c.decoder.attention.window, ElementsAre(0, 0, 8, 8));
}

TEST(FamilyConfigTest, LayerTypesOverrideTheFamilyRule) {
  const ModelConfig c = Parse(R"({"model_type":"gemma2","hidden_size":64,
      "num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
      "intermediate_size":128,"vocab_size":256,"sliding_window":5,
      "layer_types":["full_attention","sliding_attention","sliding_attention"]})");
  EXPECT_THAT(c.decoder.attention.window, ElementsAre(0, 5, 5));
}

TEST(FamilyConfigTest, MistralWindowNullOrSet) {
  const std::string common = R"("model_type":"mistral","hidden_size":4096,
      "num_hidden_layers":3,"num_attention_heads":32,"num_key_value_heads":8,
      "intermediate_size":14336,"vocab_size":32000)";
  EXPECT_THAT(Parse("{" + common + R"(,"sliding_window":null})").decoder.attention.window,
              Each(0));
  EXPECT_THAT(Parse("{" + common + R"(,"sliding_window":4096})").decoder.attention.window,
              Each(4096));
  EXPECT_THAT(Parse("{" + common + "}").decoder.attention.window, Each(4096));
}

TEST(FamilyConfigTest, PythiaWithRotaryPct) {
  const ModelConfig c = Parse(R"({"model_type":"gpt_neox","hidden_size":512,
      "intermediate_size":2048,"num_attention_heads":8,"num_hidden_layers":6,
      "max_position_embeddings":2048,"rotary_emb_base":10000,"rotary_pct":0.25,
      "use_parallel_residual":true,"vocab_size":50304,"tie_word_embeddings":false,
      "layer_norm_eps":1e-05,"hidden_act":"gelu","bos_token_id":0,"eos_token_id":0})");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.decoder.rope.rotary_dim, 16);
  EXPECT_EQ(c.decoder.residual, ResidualLayout::kParallel);
  EXPECT_EQ(c.decoder.mlp.activation, Activation::kGeluErf);
  EXPECT_EQ(c.decoder.names.qkv_layout, QkvLayout::kFusedPerHead);
  EXPECT_EQ(c.decoder.names.head, "embed_out");
  EXPECT_FALSE(c.decoder.tied_head);
}

TEST(FamilyConfigTest, TransformersV5RopeParameters) {
  const ModelConfig llama = Parse(R"({"model_type":"llama","hidden_size":64,
      "num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":128,"vocab_size":256,
      "rope_parameters":{"rope_type":"linear","factor":2.0,"rope_theta":250000.0}})");
  EXPECT_EQ(llama.decoder.rope.kind, RopeKind::kLinear);
  EXPECT_DOUBLE_EQ(llama.decoder.rope.factor, 2.0);
  EXPECT_DOUBLE_EQ(llama.decoder.rope.theta, 250000.0);
  const ModelConfig neox = Parse(R"({"model_type":"gpt_neox","hidden_size":512,
      "num_attention_heads":8,"num_hidden_layers":1,"intermediate_size":2048,
      "vocab_size":1000,"rope_parameters":{"rope_type":"default","rope_theta":10000.0,
      "partial_rotary_factor":0.5}})");
  EXPECT_EQ(neox.decoder.rope.rotary_dim, 32);
  EXPECT_EQ(neox.decoder.rope.kind, RopeKind::kDefault);
}

TEST(FamilyConfigTest, Opt350mProjectsAndNormsAfterTheSublayers) {
  const ModelConfig c = Parse(R"({"model_type":"opt","hidden_size":1024,
      "word_embed_proj_dim":512,"do_layer_norm_before":false,"ffn_dim":4096,
      "num_attention_heads":16,"num_hidden_layers":24,"max_position_embeddings":2048,
      "vocab_size":50272,"activation_function":"relu","enable_bias":true,
      "_remove_final_layer_norm":false})");
  EXPECT_EQ(c.decoder.embed_dim, 512);
  EXPECT_EQ(c.decoder.hidden_size, 1024);
  EXPECT_EQ(c.decoder.residual, ResidualLayout::kPostNorm);
  EXPECT_FALSE(c.decoder.final_norm);
  EXPECT_EQ(c.decoder.names.project_in, "project_in");
  EXPECT_EQ(c.decoder.names.project_out, "project_out");
  EXPECT_EQ(c.decoder.position_offset, 2);
  EXPECT_TRUE(c.decoder.attention.scale_query_first);
  EXPECT_TRUE(c.decoder.tied_head);
}

TEST(FamilyConfigTest, YarnExplicitFactorWins) {
  const ModelConfig c = Parse(R"({"model_type":"qwen2","hidden_size":64,
      "num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,
      "intermediate_size":128,"vocab_size":256,"max_position_embeddings":32768,
      "rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
  const RopeSpec& r = c.decoder.rope;
  EXPECT_EQ(r.kind, RopeKind::kYarn);
  EXPECT_DOUBLE_EQ(r.factor, 4.0);
  EXPECT_EQ(r.original_max_positions, 32768);
  EXPECT_NEAR(r.attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.beta_fast, 32.0);
  EXPECT_EQ(c.max_positions, 4 * 32768);  // what yarn scaling is for
}

TEST(FamilyConfigTest, Phi3LongRope) {
  std::string factors;
  for (int i = 0; i < 48; ++i) factors += (i ? "," : "") + std::to_string(1.0 + i * 0.01);
  const ModelConfig c = Parse(absl::StrCat(R"({"model_type":"phi3","hidden_size":3072,
      "num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":32,
      "intermediate_size":8192,"vocab_size":32064,"max_position_embeddings":131072,
      "original_max_position_embeddings":4096,"sliding_window":262144,
      "rope_scaling":{"type":"longrope","long_factor":[)", factors,
      R"(],"short_factor":[)", factors, "]}}"));
  const RopeSpec& r = c.decoder.rope;
  EXPECT_EQ(r.kind, RopeKind::kLongRope);
  EXPECT_EQ(r.original_max_positions, 4096);
  EXPECT_DOUBLE_EQ(r.factor, 32.0);
  EXPECT_NEAR(r.attention_scaling, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  EXPECT_EQ(r.long_factor.size(), 48u);
  EXPECT_EQ(c.decoder.names.qkv, "self_attn.qkv_proj");
  EXPECT_EQ(c.decoder.names.gate_up, "mlp.gate_up_proj");
  EXPECT_THAT(c.decoder.attention.window, Each(262144));
}

TEST(FamilyConfigTest, Gemma2SoftCapsAndWindowsEvenLayers) {
  const ModelConfig c = Parse(R"({"model_type":"gemma2","hidden_size":3584,
      "num_hidden_layers":4,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":256,
      "intermediate_size":14336,"vocab_size":256000,"query_pre_attn_scalar":256,
      "sliding_window":4096,"attn_logit_softcapping":50.0,"final_logit_softcapping":30.0,
      "hidden_activation":"gelu_pytorch_tanh"})");
  const DecoderSpec& s = c.decoder;
  EXPECT_EQ(s.norm, NormKind::kRmsNormPlusOne);
  EXPECT_DOUBLE_EQ(s.embedding_scale, std::sqrt(3584.0));
  EXPECT_DOUBLE_EQ(s.attention.score_scale, 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(s.attention.softcap, 50.0);
  EXPECT_DOUBLE_EQ(s.final_softcap, 30.0);
  EXPECT_THAT(s.attention.window, ElementsAre(4096, 0, 4096, 0));
  EXPECT_TRUE(s.post_sublayer_norms);
  EXPECT_TRUE(s.tied_head);
  EXPECT_EQ(s.mlp.activation, Activation::kGeluTanh);
}

struct BadFamilyConfig {
  const char* json;
  const char* message;
};

class BadFamilyConfigTest : public ::testing::TestWithParam<BadFamilyConfig> {};

TEST_P(BadFamilyConfigTest, NamesTheKey) {
  auto c = ParseModelConfig(GetParam().json, "hub/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("hub/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadFamilyConfigTest,
    ::testing::Values(
        BadFamilyConfig{R"({"model_type":"mamba"})",
                        "model_type 'mamba' is not supported (supported: gemma, gemma2, gpt2, "
                        "gpt_neox, llama, mistral, opt, phi3, qwen2, qwen3)"},
        BadFamilyConfig{R"({"model_type":"llama","rope_scaling":{"rope_type":"mrope"}})",
                        "'rope_scaling.rope_type' = \"mrope\" is not supported"},
        BadFamilyConfig{R"({"model_type":"llama","rope_scaling":{"rope_type":"llama3",
                            "factor":8.0}})",
                        "llama3 scaling needs 'original_max_position_embeddings'"},
        BadFamilyConfig{R"({"model_type":"llama","rope_scaling":{"type":"linear"}})",
                        "'factor' must be a positive number"},
        BadFamilyConfig{R"({"model_type":"llama","num_attention_heads":32,
                            "num_key_value_heads":5})",
                        "num_key_value_heads=5 does not divide num_attention_heads=32"},
        BadFamilyConfig{R"({"model_type":"llama","hidden_act":"xielu"})",
                        "'hidden_act' = \"xielu\" is not supported"},
        BadFamilyConfig{R"({"model_type":"gpt_neox","rotary_pct":0.001})",
                        "partial rotary factor"},
        BadFamilyConfig{R"({"model_type":"gemma2","layer_types":["full_attention"]})",
                        "'layer_types' must list one type per layer"},
        BadFamilyConfig{R"({"model_type":"llama","rope_parameters":{
                            "full_attention":{"rope_type":"default"}}})",
                        "not one per layer type"}));

}  // namespace
}  // namespace attnscope::model
