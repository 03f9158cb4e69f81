#include "service/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace attnscope::engine {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// NaN compares false with everything, which would break the strict weak
// ordering std::sort relies on; it ranks below every real value instead.
double Rank(double x) { return std::isnan(x) ? kMinusInf : x; }

// Orders ids most likely first, lowest id first among equals.
template <typename Values>
auto MoreLikely(const Values& values) {
  return [&values](int64_t a, int64_t b) {
    const double va = Rank(values[a]), vb = Rank(values[b]);
    return va != vb ? va > vb : a < b;
  };
}

// log sum exp(x - m) for the largest finite m; +-inf when no such shift
// exists (all -inf, or a +inf logit).
double LogSumExp(const float* logits, int64_t vocab, double* max_out) {
  double m = kMinusInf;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, Rank(logits[i]));
  *max_out = m;
  if (!std::isfinite(m)) return m;
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(Rank(logits[i]) - m);
  return m + std::log(sum);
}

}  // namespace

int64_t ArgMax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (Rank(logits[i]) > Rank(logits[best])) best = i;
  }
  return best;
}

RowDistribution Distribution(const float* logits, int64_t vocab) {
  RowDistribution d;
  double m = 0;
  const double lse = LogSumExp(logits, vocab, &m);
  if (!std::isfinite(lse)) {
    // No finite normalization (a +inf logit, or nothing but -inf/NaN): all
    // the mass goes to the argmax, which is the limit of the finite case.
    d.log_probs.assign(vocab, kMinusInf);
    d.log_probs[ArgMax(logits, vocab)] = 0.0;
    return d;
  }
  d.log_probs.resize(vocab);
  double entropy = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double lp = Rank(logits[i]) - lse;
    d.log_probs[i] = lp;
    const double p = std::exp(lp);
    if (p > 0) entropy -= p * lp;
  }
  d.entropy_nats = std::max(0.0, entropy);
  return d;
}

double EntropyNats(const float* logits, int64_t vocab) {
  double m = 0;
  const double lse = LogSumExp(logits, vocab, &m);
  if (!std::isfinite(lse)) return 0.0;
  double entropy = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double lp = Rank(logits[i]) - lse;
    const double p = std::exp(lp);
    if (p > 0) entropy -= p * lp;
  }
  return std::max(0.0, entropy);
}

double NormalizedEntropy(double entropy_nats, int64_t vocab) {
  if (vocab <= 1) return 0.0;
  return entropy_nats / std::log(static_cast<double>(vocab));
}

std::vector<int64_t> TopIds(const std::vector<double>& log_probs, int n) {
  std::vector<int64_t> ids(log_probs.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t count = std::min(ids.size(), static_cast<size_t>(std::max(n, 0)));
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), MoreLikely(log_probs));
  ids.resize(count);
  return ids;
}

int64_t ChooseToken(const float* logits, int64_t vocab, const SamplingSettings& sampling,
                    std::mt19937_64& rng) {
  if (!(sampling.temperature > 0)) return ArgMax(logits, vocab);
  std::vector<double> scaled(vocab);
  for (int64_t i = 0; i < vocab; ++i) scaled[i] = Rank(logits[i]) / sampling.temperature;
  std::vector<int64_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const bool cut_k = sampling.top_k > 0 && sampling.top_k < vocab;
  const bool cut_p = sampling.top_p > 0 && sampling.top_p < 1;
  if (cut_k) {
    std::partial_sort(ids.begin(), ids.begin() + sampling.top_k, ids.end(), MoreLikely(scaled));
    ids.resize(sampling.top_k);
  } else if (cut_p) {
    std::sort(ids.begin(), ids.end(), MoreLikely(scaled));
  }
  double m = kMinusInf;
  for (int64_t id : ids) m = std::max(m, scaled[id]);
  if (!std::isfinite(m)) return ArgMax(logits, vocab);
  std::vector<double> weights(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    weights[i] = std::exp(scaled[ids[i]] - m);
    total += weights[i];
  }
  size_t keep = ids.size();
  if (cut_p) {
    // ids are sorted here, most likely first.
    double mass = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      mass += weights[i];
      if (mass >= sampling.top_p * total) {
        keep = i + 1;
        total = mass;
        break;
      }
    }
  }
  // 53 random bits give a uniform double in [0, 1) the same on every
  // platform (std::uniform_real_distribution is implementation-defined).
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += weights[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

std::string StopReasonAfter(int64_t id, int index, int64_t eos_token_id,
                            const GenerationSettings& settings) {
  if (settings.stop_at_eos && eos_token_id >= 0 && id == eos_token_id) return "eos";
  if (index + 1 >= settings.max_new_tokens) return "max_new_tokens";
  return "";
}

}  // namespace attnscope::engine
