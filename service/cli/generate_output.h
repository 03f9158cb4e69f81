// How attnscope generate prints a generation, the same whether it ran
// locally or on a server.
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"
#include "service/engine/generation.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// Drops each token's own id from its alternatives and keeps at most `keep`
// of the others (most likely first): alternatives are the tokens the model
// did not choose.
void KeepOtherAlternatives(engine::GenerationResult& result, int keep);

// {"input_ids", "prompt_tokens", "text", "stop_reason", "generated_tokens",
//  "tokens": [{"index", "position", "id", "text", "probability",
//  "entropy_nats", "entropy_normalized", "alternatives": [{"id", "text",
//  "probability"}], "sink_scores" [layer][head] (only when computed)}],
//  "tokens_per_second"}. tokens_per_second is the only timing field.
// `num_heads` (H) nests the flat sink scores; 0 or a size that H does not
// divide keeps them flat.
nlohmann::json GenerationJson(const engine::Prompt& prompt, const engine::GenerationResult& result,
                              double tokens_per_second, int64_t num_heads);

// The generated text, then one row per new token: index, position, the token,
// its probability, its next-token entropy in nats and normalized, and its
// alternatives with their probabilities; when sink scores were computed, a
// layer x head block of them under each row (H = `num_heads`). Free of
// timings, so it is reproducible. With `color`, a chosen token's probability
// below 0.1 is bold yellow and sink scores of at least 0.5 are red.
std::string GenerationTable(const engine::GenerationResult& result, int64_t num_heads,
                            bool color = false);

}  // namespace attnscope::cli
