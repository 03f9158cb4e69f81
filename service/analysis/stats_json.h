// PromptStats -> JSON, with the keys and nesting of the reference fixtures'
// stats.json (service/analysis/definitions.md names every value).
#pragma once

#include "nlohmann/json.hpp"
#include "service/analysis/prompt_stats.h"

namespace attnscope::analysis {

// Keys: sink_score, first_token_mass, first_token_importance,
// attention_entropy, prev_token_score ([L][H]); back_half_sink_share;
// sink_epsilon and sink_eps (Sink-epsilon); massive {max_norm [T],
// ratio_first_to_median_rest, argmax_token}; token_norms [L+1][T]; received,
// z, next_token_entropy_nats, next_token_entropy_normalized ([T]);
// structural (sorted), threshold, sinks (anomalous only), health;
// expected_sinks (structural positions with z > threshold),
// next_token_surprisal_nats ([T-1]) and top_predictions ([T][k] of {"id",
// "token", "p"}). When computed, also
// value_weighted_first_token_share {raw, normalized} ([L][H]) and
// induction_score ([L][H]); absent otherwise. Non-finite numbers become null
// (JSON has no NaN or Inf).
nlohmann::json StatsToJson(const PromptStats& stats);

}  // namespace attnscope::analysis
