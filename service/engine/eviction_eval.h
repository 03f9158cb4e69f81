// The StreamingLLM perplexity evaluation: reads a text one token at a time
// under each eviction policy and scores every next token (definitions.md,
// "KV-cache eviction").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/eviction_policy.h"
#include "service/engine/model_bundle.h"

namespace attnscope::engine {

struct EvictionEvalSettings {
  std::vector<EvictionPolicy> policies;  // 1 .. kMaxEvalPolicies, run in order
  model::CachePositions positions = model::CachePositions::kCache;
  // Checked before every step (and layer); true aborts with CancelledError.
  std::function<bool()> should_stop;
  // Fill EvictionProgress::kept_positions (a copy of the cache's positions
  // every step: only for a view that draws them).
  bool report_kept_positions = false;
};

inline constexpr int kMaxEvalPolicies = 16;

// After each step of one policy.
struct EvictionProgress {
  int policy_index = 0;
  int64_t steps_done = 0;   // t + 1
  int64_t steps_total = 0;  // N - 1
  double nll = 0;           // nll_t of this step
  double running_perplexity = 0;  // exp(mean nll) over the steps so far
  int64_t cache_tokens = 0;       // cache size after this step's eviction
  std::vector<int64_t> evicted;   // text positions this step evicted
  std::vector<int64_t> kept_positions;  // the cache after it, when asked
  double seconds = 0;             // since this policy started
};

struct EvictionRunResult {
  std::string policy;     // PolicyName
  std::string positions;  // "cache" or "original"
  int64_t steps = 0;      // scored steps: N - 1
  std::vector<double> nll;  // nll_t, t = 0 .. N-2
  double perplexity = 0;    // exp(mean nll)
  int64_t max_cache_tokens = 0;  // most keys one step attended to (|C_t| + 1)
  int64_t max_cache_bytes = 0;   // their keys + values, all layers, float32
  double seconds = 0;
  double tokens_per_second = 0;  // steps / seconds
};

// InvalidArgument naming the field, the value and the limit: fewer than 2
// ids, an id outside the vocabulary, no policy or more than
// kMaxEvalPolicies, cache positions on a learned-position model, a text (or
// with cache positions, a policy's cache) longer than the model's positions.
absl::Status ValidateEvictionEval(const ModelBundle& bundle, const std::vector<int64_t>& ids,
                                  const EvictionEvalSettings& settings);

// Runs every policy over `ids`, calling `on_progress` after each step.
// Validates first. CancelledError when should_stop fires.
absl::StatusOr<std::vector<EvictionRunResult>> EvaluateEviction(
    const ModelBundle& bundle, const std::vector<int64_t>& ids,
    const EvictionEvalSettings& settings,
    const std::function<void(const EvictionProgress&)>& on_progress = nullptr);

}  // namespace attnscope::engine
