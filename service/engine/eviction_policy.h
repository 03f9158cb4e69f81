// KV-cache eviction policies (StreamingLLM and two that use attnscope's own
// measurements): which cached tokens to keep once the cache is over budget.
// Definitions: service/analysis/definitions.md, "KV-cache eviction".
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attnscope::engine {

struct EvictionPolicy {
  enum class Kind {
    kFull,      // "full": keep everything
    kSinks,     // "sinks:S+R": the first S tokens ever cached + the R most recent
    kWindow,    // "window:R": sinks:0+R
    kDetected,  // "detected:K+R": K by mean received attention + R recent
    kHeavy,     // "heavy:K+R": K by attention received from the last R queries + R recent
  };
  Kind kind = Kind::kFull;
  int64_t keep = 0;    // S or K (0 for full and window)
  int64_t recent = 0;  // R (0 for full)

  bool bounded() const { return kind != Kind::kFull; }
  // Tokens kept after eviction (S + R or K + R); 0 for full.
  int64_t capacity() const { return keep + recent; }
  // True when the policy ranks tokens by the attention they receive.
  bool needs_attention() const { return kind == Kind::kDetected || kind == Kind::kHeavy; }
};

// Largest S, K or R accepted.
inline constexpr int64_t kMaxPolicyTokens = 1 << 20;

// Parses "full", "sinks:S+R", "window:R", "detected:K+R", "heavy:K+R" (S, K,
// R whole numbers >= 0, at most kMaxPolicyTokens, and S + R >= 1).
// InvalidArgument naming the text, the part at fault and what is accepted.
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view text);

// The policy as ParseEvictionPolicy reads it ("sinks:4+28", "window:32").
std::string PolicyName(const EvictionPolicy& policy);

// Scores cached tokens (by text position) from the attention they receive
// and picks the tokens a policy keeps.
class EvictionTracker {
 public:
  explicit EvictionTracker(const EvictionPolicy& policy) : policy_(policy) {}

  // One query's attention: `weights[i]` is the mean over layers and heads
  // of the probability it gave the key at text position `positions[i]`.
  void Observe(const std::vector<int64_t>& positions, const std::vector<double>& weights);

  // Cache indices (ascending) to keep of a cache holding `positions` (text
  // positions, cache order); all of them when the cache is within budget.
  std::vector<int64_t> SelectKept(const std::vector<int64_t>& positions) const;

  // Forgets the scores of tokens no longer cached.
  void Forget(const std::vector<int64_t>& evicted_positions);

  // The score SelectKept ranks a cached token by (detected: mean received
  // attention; heavy: attention summed over the last R queries); 0 unseen.
  double Score(int64_t position) const;

 private:
  struct Received {
    double sum = 0;     // detected: over every query that saw the token
    int64_t count = 0;  // queries that saw it
    double recent = 0;  // heavy: over the last R queries
  };
  EvictionPolicy policy_;
  std::unordered_map<int64_t, Received> received_;
  // heavy: the last R queries' (position, weight) pairs, oldest first.
  std::deque<std::vector<std::pair<int64_t, double>>> window_;
};

}  // namespace attnscope::engine
