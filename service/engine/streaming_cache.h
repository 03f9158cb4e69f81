// A KV cache run under an eviction policy: after each forward pass it
// accumulates the attention the policy ranks tokens by, evicts what the
// policy drops, and keeps the figures a user sizes a deployment with.
// Shared by generation and the perplexity evaluation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/engine/eviction_policy.h"
#include "service/model/forward_observer.h"
#include "service/model/language_model.h"

namespace attnscope::engine {

// "cache" or "original".
std::string CachePositionsName(model::CachePositions positions);
// Parses "cache" / "original"; InvalidArgument naming the value otherwise.
absl::StatusOr<model::CachePositions> ParseCachePositions(absl::string_view text);
// kCache for a rotary model, kOriginal for learned absolute positions.
model::CachePositions DefaultCachePositions(const model::ModelConfig& config);
// InvalidArgument when `positions` cannot be used with the model (kCache on
// a model with learned absolute positions: the message says to use original).
absl::Status CheckCachePositions(const model::ModelConfig& config,
                                 model::CachePositions positions);

class StreamingCache {
 public:
  // A fresh cache of `model` under `policy`. InvalidArgument as
  // CheckCachePositions; Unimplemented when the model cannot make one.
  static absl::StatusOr<std::unique_ptr<StreamingCache>> Create(
      const model::LanguageModel& model, const EvictionPolicy& policy,
      model::CachePositions positions);
  ~StreamingCache();

  // For ForwardOptions::cache.
  model::KvCache* cache() const { return cache_.get(); }
  // Add to the pass's observers when not null (the policy ranks by attention).
  model::ForwardObserver* observer() const;

  // After a successful forward pass: scores the new queries' attention,
  // evicts what the policy drops, and returns the evicted text positions.
  absl::StatusOr<std::vector<int64_t>> AfterPass();

  // Largest number of keys a pass attended to (the new tokens included), and
  // the bytes of keys + values (all layers) at that moment.
  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_bytes() const { return max_bytes_; }
  const EvictionPolicy& policy() const { return policy_; }

 private:
  class RowMeans;
  StreamingCache(const model::LanguageModel& model, const EvictionPolicy& policy,
                 std::unique_ptr<model::KvCache> cache);

  EvictionPolicy policy_;
  std::unique_ptr<model::KvCache> cache_;
  std::unique_ptr<RowMeans> rows_;
  EvictionTracker tracker_;
  int64_t max_tokens_ = 0, max_bytes_ = 0;
};

}  // namespace attnscope::engine
