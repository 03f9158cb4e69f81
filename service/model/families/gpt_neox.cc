// GPT-NeoX / Pythia: LayerNorms with biases, a fused per-head
// query_key_value ([heads, 3, head_dim] rows), rotary embedding on the first
// rotary_pct of each head, a plain GELU MLP, parallel residual by default,
// and an untied head (embed_out).
#include <cmath>

#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

TensorNames NeoxNames() {
  TensorNames n;
  n.prefixes = {"gpt_neox.", ""};
  n.embed = "embed_in";
  n.final_norm = "final_layer_norm";
  n.head = "embed_out";
  n.layer_prefix = "layers.";
  n.attn_norm = "input_layernorm";
  n.mlp_norm = "post_attention_layernorm";
  n.qkv_layout = QkvLayout::kFusedPerHead;
  n.qkv = "attention.query_key_value";
  n.o = "attention.dense";
  n.up = "mlp.dense_h_to_4h";
  n.down = "mlp.dense_4h_to_h";
  n.ignored_suffixes = {"attention.bias", "attention.masked_bias", "rotary_emb.inv_freq"};
  return n;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseGptNeox(const ConfigReader& c) {
  ModelConfig m;
  m.model_type = "gpt_neox";
  MultiHeadDefaults d;
  d.hidden_size = 6144;
  d.num_layers = 44;
  d.num_heads = 64;
  d.intermediate_size = 24576;
  d.vocab_size = 50432;
  d.max_positions = 2048;
  ATTNSCOPE_RETURN_IF_ERROR(ReadMultiHeadShape(c, d, m));
  DecoderSpec& s = m.decoder;
  s.hidden_size = s.embed_dim = m.hidden_size;
  s.norm = NormKind::kLayerNorm;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.norm_eps, c.Number("layer_norm_eps", 1e-5));
  ATTNSCOPE_ASSIGN_OR_RETURN(double theta, c.Number("rotary_emb_base", 10000.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(double partial,
                             PartialRotaryFactor(c, {"rotary_pct", "partial_rotary_factor"}, 0.25));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.rope, ParseRope(c, theta, m.head_dim, partial, m.max_positions));
  AttentionSpec& a = s.attention;
  ATTNSCOPE_ASSIGN_OR_RETURN(a.qkv_bias, c.Bool("attention_bias", true));
  a.o_bias = a.qkv_bias;
  a.score_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  a.window.assign(m.num_layers, 0);
  s.mlp.gated = false;
  s.mlp.bias = true;
  s.mlp.intermediate_size = m.intermediate_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.mlp.activation, ParseActivation(c, "hidden_act", "gelu"));
  ATTNSCOPE_ASSIGN_OR_RETURN(bool parallel, c.Bool("use_parallel_residual", true));
  s.residual = parallel ? ResidualLayout::kParallel : ResidualLayout::kPreNorm;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.tied_head, c.Bool("tie_word_embeddings", false));
  s.names = NeoxNames();
  ReadTokenIdsAndDtype(c, 0, 2, m);
  return m;
}

}  // namespace attnscope::model::families
