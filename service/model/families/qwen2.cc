// Qwen2 / Qwen2.5: Llama with biases on q, k and v (not on o or the MLP),
// and a sliding window only when use_sliding_window is set, in the layers
// from max_window_layers on.
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

LlamaDefaults QwenDefaults() {
  LlamaDefaults d;
  d.vocab_size = 151936;
  d.intermediate_size = 22016;
  d.max_positions = 32768;
  return d;
}

absl::StatusOr<std::vector<int64_t>> QwenWindows(const ConfigReader& c, int64_t layers) {
  ATTNSCOPE_ASSIGN_OR_RETURN(bool use, c.Bool("use_sliding_window", false));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t window, WindowSize(c, "sliding_window", 4096));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t first, c.PositiveInt("max_window_layers", 28));
  return LayerWindows(c, layers, use ? window : 0,
                      [first](int64_t layer) { return layer >= first; });
}

absl::StatusOr<ModelConfig> ParseQwen2(const ConfigReader& c) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, QwenDefaults()));
  m.model_type = "qwen2";
  m.decoder.attention.qkv_bias = true;
  m.decoder.attention.o_bias = false;
  ATTNSCOPE_ASSIGN_OR_RETURN(m.decoder.attention.window, QwenWindows(c, m.num_layers));
  return m;
}

}  // namespace attnscope::model::families
