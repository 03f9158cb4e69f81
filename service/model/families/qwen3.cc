// Qwen3: Qwen2 without the q/k/v biases (attention_bias as in Llama) and
// with a per-head RMSNorm on q and k before the rotary embedding.
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

absl::StatusOr<std::vector<int64_t>> QwenWindows(const ConfigReader& c, int64_t layers);

absl::StatusOr<ModelConfig> ParseQwen3(const ConfigReader& c) {
  LlamaDefaults d;
  d.vocab_size = 151936;
  d.intermediate_size = 22016;
  d.max_positions = 32768;
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, d));
  m.model_type = "qwen3";
  m.decoder.attention.qk_norm = true;
  m.decoder.names.q_norm = "self_attn.q_norm";
  m.decoder.names.k_norm = "self_attn.k_norm";
  ATTNSCOPE_ASSIGN_OR_RETURN(m.decoder.attention.window, QwenWindows(c, m.num_layers));
  return m;
}

}  // namespace attnscope::model::families
