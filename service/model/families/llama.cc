// Llama 2/3 (LlamaForCausalLM): RMSNorm, rotary embedding, grouped-query
// attention, SiLU-gated MLP. The template the Llama-shaped families modify.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

TensorNames LlamaNames() {
  TensorNames n;
  n.prefixes = {"model.", ""};
  n.embed = "embed_tokens";
  n.final_norm = "norm";
  n.head = "lm_head";
  n.layer_prefix = "layers.";
  n.attn_norm = "input_layernorm";
  n.mlp_norm = "post_attention_layernorm";
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  n.o = "self_attn.o_proj";
  n.gate = "mlp.gate_proj";
  n.up = "mlp.up_proj";
  n.down = "mlp.down_proj";
  n.ignored_suffixes = {"rotary_emb.inv_freq"};
  return n;
}

absl::Status ReadShape(const ConfigReader& c, const LlamaDefaults& d, ModelConfig& m) {
  ATTNSCOPE_ASSIGN_OR_RETURN(m.hidden_size, c.PositiveInt("hidden_size", d.hidden_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_layers, LayerCount(c, "num_hidden_layers", d.num_layers));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_heads, c.PositiveInt("num_attention_heads", d.num_heads));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_kv_heads, c.PositiveInt("num_key_value_heads", m.num_heads));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.intermediate_size,
                             c.PositiveInt("intermediate_size", d.intermediate_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.vocab_size, c.PositiveInt("vocab_size", d.vocab_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.max_positions,
                             c.PositiveInt("max_position_embeddings", d.max_positions));
  if (!c.Has("head_dim") && m.hidden_size % m.num_heads != 0) {
    return c.Invalid(absl::StrCat("num_attention_heads=", m.num_heads,
                                  " does not divide hidden_size=", m.hidden_size,
                                  " and head_dim is not given"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(m.head_dim, c.PositiveInt("head_dim", m.hidden_size / m.num_heads));
  return CheckHeads(c, m);
}

}  // namespace

absl::StatusOr<ModelConfig> ParseLlamaLike(const ConfigReader& c, const LlamaDefaults& d) {
  ModelConfig m;
  ATTNSCOPE_RETURN_IF_ERROR(ReadShape(c, d, m));
  DecoderSpec& s = m.decoder;
  s.hidden_size = s.embed_dim = m.hidden_size;
  s.norm = NormKind::kRmsNorm;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.norm_eps, c.Number("rms_norm_eps", d.rms_norm_eps));
  ATTNSCOPE_ASSIGN_OR_RETURN(double partial, PartialRotaryFactor(c, {"partial_rotary_factor"}, 1.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.rope,
                             ParseRope(c, d.rope_theta, m.head_dim, partial, m.max_positions));
  // Dynamic NTK and yarn exist to run past the trained context.
  if (s.rope.kind == RopeKind::kDynamic || s.rope.kind == RopeKind::kYarn) {
    const int64_t base = s.rope.kind == RopeKind::kYarn ? s.rope.original_max_positions
                                                        : m.max_positions;
    m.max_positions =
        std::max(m.max_positions, static_cast<int64_t>(std::floor(s.rope.factor * base)));
  }
  AttentionSpec& a = s.attention;
  a.num_heads = m.num_heads;
  a.num_kv_heads = m.num_kv_heads;
  a.head_dim = m.head_dim;
  ATTNSCOPE_ASSIGN_OR_RETURN(a.qkv_bias, c.Bool("attention_bias", false));
  a.o_bias = a.qkv_bias;
  a.score_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  a.window.assign(m.num_layers, 0);
  s.mlp.gated = true;
  s.mlp.intermediate_size = m.intermediate_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.mlp.activation, ParseActivation(c, d.activation_key, d.activation));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.mlp.bias, c.Bool("mlp_bias", false));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.tied_head, c.Bool("tie_word_embeddings", d.tie_word_embeddings));
  s.names = LlamaNames();
  ReadTokenIdsAndDtype(c, 1, 2, m);
  return m;
}

absl::StatusOr<ModelConfig> ParseLlama(const ConfigReader& c) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, LlamaDefaults{}));
  m.model_type = "llama";
  return m;
}

}  // namespace attnscope::model::families
