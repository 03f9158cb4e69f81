// GPT-2: learned positions, pre-LN LayerNorms, Conv1D matrices stored
// (in, out) with a fused c_attn (columns q | k | v), a tanh-GELU MLP, every
// bias, and the head tied to wte.
#include <cmath>

#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

TensorNames Gpt2Names() {
  TensorNames n;
  n.prefixes = {"transformer.", ""};
  n.conv1d = true;
  n.embed = "wte";
  n.positions = "wpe";
  n.final_norm = "ln_f";
  n.head = "lm_head";
  n.layer_prefix = "h.";
  n.attn_norm = "ln_1";
  n.mlp_norm = "ln_2";
  n.qkv_layout = QkvLayout::kFused;
  n.qkv = "attn.c_attn";
  n.o = "attn.c_proj";
  n.up = "mlp.c_fc";
  n.down = "mlp.c_proj";
  n.ignored_suffixes = {"attn.bias", "attn.masked_bias"};
  return n;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseGpt2(const ConfigReader& c) {
  ModelConfig m;
  m.model_type = "gpt2";
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_layers, LayerCount(c, "n_layer", 12));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_heads, c.PositiveInt("n_head", 12));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.hidden_size, c.PositiveInt("n_embd", 768));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.vocab_size, c.PositiveInt("vocab_size", 50257));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.max_positions, c.PositiveInt("n_positions", 1024));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.intermediate_size, c.PositiveInt("n_inner", 4 * m.hidden_size));
  ATTNSCOPE_RETURN_IF_ERROR(SetMultiHeadDims(c, "n_head", "n_embd", m));
  DecoderSpec& s = m.decoder;
  s.hidden_size = s.embed_dim = m.hidden_size;
  s.norm = NormKind::kLayerNorm;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.norm_eps, c.Number("layer_norm_epsilon", 1e-5));
  s.learned_positions = true;
  AttentionSpec& a = s.attention;
  a.qkv_bias = a.o_bias = s.mlp.bias = true;
  ATTNSCOPE_ASSIGN_OR_RETURN(bool scaled, c.Bool("scale_attn_weights", true));
  a.score_scale = scaled ? 1.0 / std::sqrt(static_cast<double>(m.head_dim)) : 1.0;
  ATTNSCOPE_ASSIGN_OR_RETURN(a.divide_by_layer_number,
                             c.Bool("scale_attn_by_inverse_layer_idx", false));
  a.window.assign(m.num_layers, 0);
  s.mlp.gated = false;
  s.mlp.intermediate_size = m.intermediate_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.mlp.activation,
                             ParseActivation(c, "activation_function", "gelu_new"));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.tied_head, c.Bool("tie_word_embeddings", true));
  s.names = Gpt2Names();
  ReadTokenIdsAndDtype(c, 50256, 50256, m);
  return m;
}

}  // namespace attnscope::model::families
