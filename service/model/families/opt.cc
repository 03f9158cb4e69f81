// OPT: learned positions with an offset of 2, LayerNorms, every projection
// with a bias, q scaled before the product, a ReLU MLP; pre-LN or (350m)
// post-LN; project_in/out when word_embed_proj_dim differs from the width;
// the head tied to the (narrower) embedding.
#include <cmath>

#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

TensorNames OptNames(bool projected, bool final_norm) {
  TensorNames n;
  n.prefixes = {"model.decoder.", "decoder.", ""};
  n.embed = "embed_tokens";
  n.positions = "embed_positions";
  if (projected) {
    n.project_in = "project_in";
    n.project_out = "project_out";
  }
  if (final_norm) n.final_norm = "final_layer_norm";
  n.head = "lm_head";
  n.layer_prefix = "layers.";
  n.attn_norm = "self_attn_layer_norm";
  n.mlp_norm = "final_layer_norm";
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  n.o = "self_attn.out_proj";
  n.up = "fc1";
  n.down = "fc2";
  return n;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseOpt(const ConfigReader& c) {
  ModelConfig m;
  m.model_type = "opt";
  MultiHeadDefaults d;
  d.intermediate_key = "ffn_dim";
  d.hidden_size = 768;
  d.num_layers = 12;
  d.num_heads = 12;
  d.intermediate_size = 3072;
  d.vocab_size = 50272;
  d.max_positions = 2048;
  ATTNSCOPE_RETURN_IF_ERROR(ReadMultiHeadShape(c, d, m));
  DecoderSpec& s = m.decoder;
  s.hidden_size = m.hidden_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.embed_dim, c.PositiveInt("word_embed_proj_dim", m.hidden_size));
  s.norm = NormKind::kLayerNorm;
  s.norm_eps = 1e-5;  // PyTorch's default: OPT has no config key for it
  ATTNSCOPE_ASSIGN_OR_RETURN(s.norm_affine, c.Bool("layer_norm_elementwise_affine", true));
  s.learned_positions = true;
  s.position_offset = 2;
  AttentionSpec& a = s.attention;
  ATTNSCOPE_ASSIGN_OR_RETURN(bool bias, c.Bool("enable_bias", true));
  a.qkv_bias = a.o_bias = s.mlp.bias = bias;
  a.score_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  a.scale_query_first = true;
  a.window.assign(m.num_layers, 0);
  s.mlp.gated = false;
  s.mlp.intermediate_size = m.intermediate_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.mlp.activation, ParseActivation(c, "activation_function", "relu"));
  ATTNSCOPE_ASSIGN_OR_RETURN(bool pre_norm, c.Bool("do_layer_norm_before", true));
  ATTNSCOPE_ASSIGN_OR_RETURN(bool remove_final, c.Bool("_remove_final_layer_norm", false));
  s.residual = pre_norm ? ResidualLayout::kPreNorm : ResidualLayout::kPostNorm;
  s.final_norm = pre_norm && !remove_final;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.tied_head, c.Bool("tie_word_embeddings", true));
  s.names = OptNames(s.embed_dim != s.hidden_size, s.final_norm);
  ReadTokenIdsAndDtype(c, 2, 2, m);
  return m;
}

}  // namespace attnscope::model::families
