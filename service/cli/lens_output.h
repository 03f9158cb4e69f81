// What `attnscope lens` prints: the logit lens as a table of states x
// positions (the top token and its probability, then the actual next token's
// probability and rank) and the attention rollout's largest entries per
// layer, or both as one JSON document.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "service/engine/lens_run.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// {"model", "input_ids", "tokens", "num_layers", "vocab", "forward_seconds",
//  "lens": {"positions": [...], "states": [[{"position", "top": [{"id",
//  "token", "p"}], "next_id", "next_p", "next_rank", "entropy"}, ...] per
//  state 0..L]}, "rollout": {"queries": [...], "rows": [[[T numbers] per
//  query] per layer]}}; next_* are null where there is no next token; lens
//  and rollout only when computed.
nlohmann::json LensJson(const std::string& model, const engine::Prompt& prompt,
                        const engine::LensRun& run, int64_t num_layers);

// The text report; `columns`: positions per block of the table.
std::string RenderLens(const engine::Prompt& prompt, const engine::LensRun& run,
                       int64_t num_layers, int64_t columns = 6);

}  // namespace attnscope::cli
