// Phi-3: Llama with fused projections (qkv_proj rows q | k | v, gate_up_proj
// rows gate | up), partial rotary, longrope scaling, and a sliding window in
// every layer when sliding_window is set.
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

absl::StatusOr<ModelConfig> ParsePhi3(const ConfigReader& c) {
  LlamaDefaults d;
  d.vocab_size = 32064;
  d.hidden_size = 3072;
  d.intermediate_size = 8192;
  d.max_positions = 4096;
  d.rms_norm_eps = 1e-5;
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, d));
  m.model_type = "phi3";
  TensorNames& n = m.decoder.names;
  n.qkv_layout = QkvLayout::kFused;
  n.qkv = "self_attn.qkv_proj";
  n.q = n.k = n.v = "";
  n.gate_up = "mlp.gate_up_proj";
  n.gate = n.up = "";
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t window, WindowSize(c, "sliding_window", 0));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.decoder.attention.window,
                             LayerWindows(c, m.num_layers, window, [](int64_t) { return true; }));
  if (!c.json().contains("eos_token_id")) m.eos_token_id = 32000;
  return m;
}

}  // namespace attnscope::model::families
