#include "service/engine/eviction_eval.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/engine/streaming_cache.h"

namespace attnscope::engine {
namespace {

using Clock = std::chrono::steady_clock;

// -log p(next) from the logits row of the single new token, in double.
class NextTokenLoss : public model::ForwardObserver {
 public:
  model::ObserverNeeds Needs() const override {
    model::ObserverNeeds needs;
    needs.logits = true;
    return needs;
  }
  void set_next(int64_t id) { next_ = id; }
  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override {
    if (sequence != 0 || num_tokens < 1) return;
    const float* row = logits + (num_tokens - 1) * vocab;
    double m = row[0];
    for (int64_t i = 1; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
    double z = 0;
    for (int64_t i = 0; i < vocab; ++i) z += std::exp(row[i] - m);
    nll_ = -(row[next_] - m - std::log(z));
    seen_ = true;
  }
  // The loss of the last pass; false when no logits came.
  bool Take(double& nll) {
    const bool seen = seen_;
    seen_ = false;
    nll = nll_;
    return seen;
  }

 private:
  int64_t next_ = 0;
  double nll_ = 0;
  bool seen_ = false;
};

absl::Status CheckLength(const model::ModelConfig& config, int64_t n,
                         const EvictionEvalSettings& s) {
  const int64_t limit = config.max_positions;
  for (const EvictionPolicy& p : s.policies) {
    // Step t feeds x_t at position t (original, or full) or at its cache
    // index, at most S + R (cache, bounded).
    const bool shifted = s.positions == model::CachePositions::kCache && p.bounded();
    const int64_t needed = shifted ? p.capacity() + 1 : n - 1;
    if (needed <= limit) continue;
    if (shifted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy ", PolicyName(p), " attends to ", needed, " cached tokens but ",
          config.model_type, " accepts at most ", limit, " positions; use a smaller S + R"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", n, " tokens: with ", CachePositionsName(s.positions),
        " positions and policy ", PolicyName(p), " step t feeds position t, and ",
        config.model_type, " accepts ", limit, " positions (max_positions), so at most ",
        limit + 1, " tokens; shorten the text (--max-tokens ", limit + 1, ")",
        // Only rotary models can shift their positions to cache indices.
        p.bounded() || config.decoder.rope.kind == model::RopeKind::kNone
            ? ""
            : " or use a bounded policy with cache positions"));
  }
  return absl::OkStatus();
}

// One policy over the whole text.
absl::StatusOr<EvictionRunResult> RunPolicy(
    const ModelBundle& bundle, const std::vector<int64_t>& ids, int index,
    const EvictionEvalSettings& settings,
    const std::function<void(const EvictionProgress&)>& on_progress) {
  const EvictionPolicy& policy = settings.policies[index];
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<StreamingCache> stream,
                             StreamingCache::Create(*bundle.model, policy, settings.positions));
  model::ForwardOptions forward;
  forward.cache = stream->cache();
  forward.should_stop = settings.should_stop;
  NextTokenLoss loss;
  std::vector<model::ForwardObserver*> observers = {&loss};
  if (stream->observer() != nullptr) observers.push_back(stream->observer());
  EvictionRunResult result;
  result.policy = PolicyName(policy);
  result.positions = CachePositionsName(settings.positions);
  const int64_t steps = static_cast<int64_t>(ids.size()) - 1;
  const Clock::time_point start = Clock::now();
  double sum = 0;
  for (int64_t t = 0; t < steps; ++t) {
    if (settings.should_stop && settings.should_stop()) {
      return absl::CancelledError(absl::StrCat("evaluation of ", result.policy,
                                               " stopped before step ", t, " of ", steps));
    }
    loss.set_next(ids[t + 1]);
    ATTNSCOPE_RETURN_IF_ERROR(bundle.model->Forward({{ids[t]}}, forward, observers));
    double nll = 0;
    if (!loss.Take(nll)) return absl::InternalError("a decoding step published no logits");
    ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> evicted, stream->AfterPass());
    result.nll.push_back(nll);
    sum += nll;
    if (on_progress) {
      EvictionProgress p;
      p.policy_index = index;
      p.steps_done = t + 1;
      p.steps_total = steps;
      p.nll = nll;
      p.running_perplexity = std::exp(sum / (t + 1));
      p.cache_tokens = stream->cache()->length();
      p.evicted = std::move(evicted);
      if (settings.report_kept_positions) p.kept_positions = stream->cache()->positions();
      p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      on_progress(p);
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = steps;
  result.perplexity = std::exp(sum / steps);
  result.max_cache_tokens = stream->max_tokens();
  result.max_cache_bytes = stream->max_bytes();
  result.tokens_per_second = result.seconds > 0 ? steps / result.seconds : 0;
  return result;
}

}  // namespace

absl::Status ValidateEvictionEval(const ModelBundle& bundle, const std::vector<int64_t>& ids,
                                  const EvictionEvalSettings& settings) {
  if (bundle.model == nullptr) return absl::FailedPreconditionError("no model is loaded");
  const model::ModelConfig& config = bundle.config();
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", n, " token", n == 1 ? "" : "s",
        ": perplexity needs at least 2 (each step predicts the next token)"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                     " is outside the vocabulary [0, ",
                                                     config.vocab_size, ")"));
    }
  }
  const int count = static_cast<int>(settings.policies.size());
  if (count < 1 || count > kMaxEvalPolicies) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policies: got ", count, "; give between 1 and ", kMaxEvalPolicies));
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckCachePositions(config, settings.positions));
  return CheckLength(config, n, settings);
}

absl::StatusOr<std::vector<EvictionRunResult>> EvaluateEviction(
    const ModelBundle& bundle, const std::vector<int64_t>& ids,
    const EvictionEvalSettings& settings,
    const std::function<void(const EvictionProgress&)>& on_progress) {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateEvictionEval(bundle, ids, settings));
  std::vector<EvictionRunResult> results;
  for (int i = 0; i < static_cast<int>(settings.policies.size()); ++i) {
    ATTNSCOPE_ASSIGN_OR_RETURN(EvictionRunResult r,
                               RunPolicy(bundle, ids, i, settings, on_progress));
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace attnscope::engine
