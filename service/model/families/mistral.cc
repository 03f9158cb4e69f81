// Mistral: Llama with a sliding window in every layer (none when
// sliding_window is null, as in v0.2+ configs).
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

absl::StatusOr<ModelConfig> ParseMistral(const ConfigReader& c) {
  LlamaDefaults d;
  d.max_positions = 4096 * 32;
  d.intermediate_size = 14336;
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig m, ParseLlamaLike(c, d));
  m.model_type = "mistral";
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t window, WindowSize(c, "sliding_window", 4096));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.decoder.attention.window,
                             LayerWindows(c, m.num_layers, window, [](int64_t) { return true; }));
  return m;
}

}  // namespace attnscope::model::families
