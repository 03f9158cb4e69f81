// Qwen3: Qwen2 without the q/k/v biases (attention_bias as in Llama) and
// with a per-head RMSNorm on q and k before the rotary embedding.
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

absl::StatusOr<ModelConfig> ParseQwen3(const ConfigReader& c) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, QwenDefaults()));
  m.model_type = "qwen3";
  m.decoder.attention.qk_norm = true;
  m.decoder.names.q_norm = "self_attn.q_norm";
  m.decoder.names.k_norm = "self_attn.k_norm";
  ATTNSCOPE_ASSIGN_OR_RETURN(m.decoder.attention.window, QwenWindows(c, m.num_layers));
  return m;
}

}  // namespace attnscope::model::families
