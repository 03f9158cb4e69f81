// How attnscope generate prints a generation, the same whether it ran
// locally or on a server.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "service/engine/generation.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// {"input_ids", "prompt_tokens", "text", "stop_reason", "generated_tokens",
//  "tokens": [{"index", "position", "id", "text", "probability",
//  "entropy_nats", "entropy_normalized", "alternatives": [{"id", "text",
//  "probability"}], "sink_scores" (only when computed)}],
//  "tokens_per_second"}. tokens_per_second is the only timing field.
nlohmann::json GenerationJson(const engine::Prompt& prompt, const engine::GenerationResult& result,
                              double tokens_per_second);

// The generated text, then one row per new token: index, position, the token,
// its probability, its next-token entropy in nats and normalized, and the
// most likely alternative. Free of timings, so it is reproducible.
std::string GenerationTable(const engine::GenerationResult& result);

}  // namespace attnscope::cli
