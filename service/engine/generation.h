// Text generation with a KV cache: greedy or sampled decoding that reports,
// for every new token, how uncertain the model was.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <optional>

#include "absl/status/statusor.h"
#include "service/engine/eviction_policy.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"

namespace attnscope::engine {

struct SamplingSettings {
  double temperature = 0.0;  // 0: greedy; otherwise > 0 (at most 100)
  int top_k = 0;             // 0: no cut; otherwise keep the k most likely
  double top_p = 0.0;        // 0 or 1: no cut; otherwise keep the smallest set with mass >= p
  uint64_t seed = 0;         // same seed and settings, same tokens
};

struct GenerationSettings {
  int max_new_tokens = 16;  // >= 1; prompt + max_new_tokens <= max_positions
  SamplingSettings sampling;
  int num_alternatives = 5;        // top alternatives reported per token, 0..20
  bool layer_sink_scores = false;  // report A[l,h,pos,0] of each new token
  bool stop_at_eos = true;         // stop after the model's eos_token_id
  // KV-cache eviction (eviction_policy.h): full by default. A bounded policy
  // evicts after the prefill and after every new token; with cache
  // positions the generation may then run past the model's positions.
  EvictionPolicy cache_policy;
  // Unset: cache positions for rotary models, original for learned ones.
  std::optional<model::CachePositions> cache_positions;
  // The forward passes' matrix products (model::ForwardOptions::precision);
  // unset: float32 (a remote call then leaves it to the server's default).
  std::optional<model::Precision> precision;
  // Checked before every decoding step (and every layer); true aborts with
  // CancelledError.
  std::function<bool()> should_stop;
};

struct Alternative {
  int64_t id = 0;
  std::string text;  // the token as it reads (valid UTF-8)
  double probability = 0;
};

struct GeneratedToken {
  int index = 0;         // 0 for the first new token
  int64_t position = 0;  // position in the sequence
  int64_t id = 0;
  std::string text;      // the token as it reads (valid UTF-8)
  double probability = 0;  // p(token) under the model's distribution (temperature 1)
  double entropy_nats = 0;  // entropy of that distribution
  double entropy_normalized = 0;  // divided by log V
  std::vector<Alternative> alternatives;  // most likely first
  std::vector<double> sink_scores;  // [layer * H + head] when asked, else empty
  // Tokens in the KV cache once this token was fed and the policy evicted
  // (for the last token, when it is not fed: the cache as it was), and the
  // text positions evicted since the previous token (the first token: since
  // the prefill began), ascending.
  int64_t cache_tokens = 0;
  std::vector<int64_t> evicted_positions;
};

struct GenerationResult {
  std::vector<GeneratedToken> tokens;
  std::string text;          // the generated text (valid UTF-8)
  std::string stop_reason;   // "eos" or "max_new_tokens"
  // Next-token entropy at each prompt position (from the prefill's logits).
  std::vector<double> prompt_entropy_nats;
  std::vector<double> prompt_entropy_normalized;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// InvalidArgument naming the field, the value and the limit: max_new_tokens
// < 1, prompt + max_new_tokens > max_positions, temperature < 0 or > 100 or
// not finite, top_k < 0, top_p outside [0, 1], num_alternatives outside
// [0, 20], cache positions the model cannot use, a bounded policy whose
// cache (S + R + 1) exceeds max_positions. With a bounded policy and cache
// positions only the prompt must fit in max_positions.
absl::Status ValidateGenerationSettings(const ModelBundle& bundle, const Prompt& prompt,
                                        const GenerationSettings& settings);

// Generates, calling `on_token` as each token is produced (before the next
// one is computed). Validates first. CancelledError if should_stop fires.
absl::StatusOr<GenerationResult> Generate(
    const ModelBundle& bundle, const Prompt& prompt, const GenerationSettings& settings,
    const std::function<void(const GeneratedToken&)>& on_token = nullptr);

}  // namespace attnscope::engine
