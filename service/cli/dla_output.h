// What `attnscope dla` prints: per position, the target, the model's logit
// and how its parts add up to it, a layer x head grid of the heads'
// contributions with each layer's attention bias and MLP, and the largest
// parts; or all of it as one JSON document.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "service/engine/lens_run.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// {"model", "input_ids", "tokens", "num_layers", "num_heads",
//  "forward_seconds", "positions": [{"position", "token", "target": {"id",
//  "token", "source"}, "logit", "probability", "total", "offset",
//  "embedding", "heads": [[H numbers] per layer], "attention_bias": [L],
//  "mlp": [L]}]}; source is "given", "next_token" or "top_prediction".
nlohmann::json AttributionJson(const std::string& model, const engine::Prompt& prompt,
                               const engine::LensRun& run);

// The text report with the `top` largest parts (by |contribution|) of each
// position.
std::string RenderAttribution(const engine::Prompt& prompt, const engine::LensRun& run,
                              int64_t top);

}  // namespace attnscope::cli
