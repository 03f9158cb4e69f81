// Gemma and Gemma-2: Llama with (1 + w) RMSNorms, the embedding scaled by
// sqrt(width), a tanh-GELU-gated MLP and a tied head. Gemma-2 adds a norm
// after each sublayer, scores scaled by query_pre_attn_scalar^-0.5 and
// soft-capped before the mask, a sliding window on even layers, and
// soft-capped logits.
#include <cmath>

#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

LlamaDefaults GemmaDefaults() {
  LlamaDefaults d;
  d.vocab_size = 256000;
  d.hidden_size = 3072;
  d.intermediate_size = 24576;
  d.num_layers = 28;
  d.num_heads = 16;
  d.max_positions = 8192;
  d.tie_word_embeddings = true;
  d.activation_key = "hidden_activation";
  d.activation = "gelu_pytorch_tanh";
  return d;
}

// A soft-cap value: `if_absent` when missing, 0 (none) when null.
absl::StatusOr<double> Softcap(const ConfigReader& c, const char* key, double if_absent) {
  if (!c.json().contains(key)) return if_absent;
  return c.Number(key, 0.0);
}

absl::StatusOr<ModelConfig> GemmaBase(const ConfigReader& c, const LlamaDefaults& d) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, d));
  DecoderSpec& s = m.decoder;
  s.norm = NormKind::kRmsNormPlusOne;
  s.embedding_scale = std::sqrt(static_cast<double>(m.hidden_size));
  if (m.bos_token_id == 1 && !c.Has("bos_token_id")) m.bos_token_id = 2;
  if (m.eos_token_id == 2 && !c.Has("eos_token_id")) m.eos_token_id = 1;
  return m;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseGemma(const ConfigReader& c) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, GemmaBase(c, GemmaDefaults()));
  m.model_type = "gemma";
  return m;
}

absl::StatusOr<ModelConfig> ParseGemma2(const ConfigReader& c) {
  LlamaDefaults d = GemmaDefaults();
  d.hidden_size = 2304;
  d.intermediate_size = 9216;
  d.num_layers = 26;
  d.num_heads = 8;
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, GemmaBase(c, d));
  m.model_type = "gemma2";
  DecoderSpec& s = m.decoder;
  s.post_sublayer_norms = true;
  s.names.mlp_norm = "pre_feedforward_layernorm";
  s.names.post_attn_norm = "post_attention_layernorm";
  s.names.post_mlp_norm = "post_feedforward_layernorm";
  ATTNSCOPE_ASSIGN_OR_RETURN(double scalar, c.Number("query_pre_attn_scalar", 224));
  if (!(scalar > 0)) return c.Invalid("'query_pre_attn_scalar' must be positive");
  s.attention.score_scale = 1.0 / std::sqrt(scalar);
  ATTNSCOPE_ASSIGN_OR_RETURN(s.attention.softcap, Softcap(c, "attn_logit_softcapping", 50.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.final_softcap, Softcap(c, "final_logit_softcapping", 30.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t window, WindowSize(c, "sliding_window", 4096));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.attention.window,
                             LayerWindows(c, m.num_layers, window,
                                          [](int64_t layer) { return layer % 2 == 0; }));
  return m;
}

}  // namespace attnscope::model::families
