#include "service/engine/eviction_policy.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace attnscope::engine {
namespace {

constexpr char kAccepted[] =
    "accepted: full, sinks:S+R, window:R, detected:K+R, heavy:K+R (whole numbers, S + R >= 1)";

absl::Status PolicyError(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("policy \"", text, "\": ", why, "; ", kAccepted));
}

// One count of a policy: a whole number in [0, kMaxPolicyTokens].
absl::StatusOr<int64_t> ParseCount(absl::string_view text, absl::string_view name,
                                   absl::string_view part) {
  int64_t value = 0;
  const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (!digits || !absl::SimpleAtoi(part, &value)) {
    return PolicyError(text, absl::StrCat(name, " must be a whole number, got \"", part, "\""));
  }
  if (value > kMaxPolicyTokens) {
    return PolicyError(text, absl::StrCat(name, "=", value, " is above the limit ",
                                          kMaxPolicyTokens));
  }
  return value;
}

absl::StatusOr<EvictionPolicy::Kind> ParseKind(absl::string_view text, absl::string_view name) {
  using Kind = EvictionPolicy::Kind;
  if (name == "sinks") return Kind::kSinks;
  if (name == "window") return Kind::kWindow;
  if (name == "detected") return Kind::kDetected;
  if (name == "heavy") return Kind::kHeavy;
  return PolicyError(text, absl::StrCat("unknown policy \"", name, "\""));
}

}  // namespace

absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view text) {
  EvictionPolicy policy;
  if (text == "full") return policy;
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) {
    return PolicyError(text, text.empty() ? "empty" : "missing \":\" and the sizes");
  }
  absl::StatusOr<EvictionPolicy::Kind> kind = ParseKind(text, text.substr(0, colon));
  if (!kind.ok()) return kind.status();
  policy.kind = *kind;
  const absl::string_view sizes = text.substr(colon + 1);
  if (policy.kind == EvictionPolicy::Kind::kWindow) {
    absl::StatusOr<int64_t> r = ParseCount(text, "R", sizes);
    if (!r.ok()) return r.status();
    policy.recent = *r;
  } else {
    const std::vector<absl::string_view> parts = absl::StrSplit(sizes, '+');
    if (parts.size() != 2) return PolicyError(text, "expected two sizes joined by \"+\"");
    const char* first = policy.kind == EvictionPolicy::Kind::kSinks ? "S" : "K";
    absl::StatusOr<int64_t> k = ParseCount(text, first, parts[0]);
    if (!k.ok()) return k.status();
    absl::StatusOr<int64_t> r = ParseCount(text, "R", parts[1]);
    if (!r.ok()) return r.status();
    policy.keep = *k;
    policy.recent = *r;
  }
  if (policy.capacity() < 1) {
    return PolicyError(text, "keeps no token: the sizes must add up to at least 1");
  }
  return policy;
}

std::string PolicyName(const EvictionPolicy& p) {
  switch (p.kind) {
    case EvictionPolicy::Kind::kFull:
      return "full";
    case EvictionPolicy::Kind::kSinks:
      return absl::StrCat("sinks:", p.keep, "+", p.recent);
    case EvictionPolicy::Kind::kWindow:
      return absl::StrCat("window:", p.recent);
    case EvictionPolicy::Kind::kDetected:
      return absl::StrCat("detected:", p.keep, "+", p.recent);
    case EvictionPolicy::Kind::kHeavy:
      return absl::StrCat("heavy:", p.keep, "+", p.recent);
  }
  return "full";
}

void EvictionTracker::Observe(const std::vector<int64_t>& positions,
                              const std::vector<double>& weights) {
  if (!policy_.needs_attention()) return;
  std::vector<std::pair<int64_t, double>> row;
  row.reserve(positions.size());
  for (size_t i = 0; i < positions.size() && i < weights.size(); ++i) {
    Received& r = received_[positions[i]];
    r.sum += weights[i];
    r.count += 1;
    r.recent += weights[i];
    row.emplace_back(positions[i], weights[i]);
  }
  if (policy_.kind != EvictionPolicy::Kind::kHeavy) return;
  window_.push_back(std::move(row));
  // The window is the last R queries (at least one).
  while (static_cast<int64_t>(window_.size()) > std::max<int64_t>(1, policy_.recent)) {
    for (const auto& [position, weight] : window_.front()) {
      auto it = received_.find(position);
      if (it != received_.end()) it->second.recent -= weight;
    }
    window_.pop_front();
  }
}

double EvictionTracker::Score(int64_t position) const {
  auto it = received_.find(position);
  if (it == received_.end()) return 0.0;
  if (policy_.kind == EvictionPolicy::Kind::kHeavy) return it->second.recent;
  return it->second.count > 0 ? it->second.sum / it->second.count : 0.0;
}

std::vector<int64_t> EvictionTracker::SelectKept(const std::vector<int64_t>& positions) const {
  const int64_t n = static_cast<int64_t>(positions.size());
  std::vector<int64_t> kept(n);
  std::iota(kept.begin(), kept.end(), 0);
  if (!policy_.bounded() || n <= policy_.capacity()) return kept;
  const int64_t recent_begin = n - policy_.recent;
  std::vector<int64_t> chosen;
  if (policy_.needs_attention()) {
    // The K best-scored among the older tokens; ties go to the earlier one.
    std::vector<int64_t> older(kept.begin(), kept.begin() + recent_begin);
    std::stable_sort(older.begin(), older.end(), [&](int64_t a, int64_t b) {
      return Score(positions[a]) > Score(positions[b]);
    });
    older.resize(std::min<int64_t>(policy_.keep, older.size()));
    std::sort(older.begin(), older.end());
    chosen = std::move(older);
  } else {
    for (int64_t i = 0; i < policy_.keep; ++i) chosen.push_back(i);
  }
  for (int64_t i = recent_begin; i < n; ++i) chosen.push_back(i);
  return chosen;
}

void EvictionTracker::Forget(const std::vector<int64_t>& evicted_positions) {
  for (int64_t p : evicted_positions) received_.erase(p);
}

}  // namespace attnscope::engine
