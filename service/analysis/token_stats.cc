#include "service/analysis/token_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "service/core/parallel.h"
#include "service/core/vector_math.h"

namespace attnscope::analysis {
namespace {

constexpr double kLogFloor = 1e-8;
constexpr double kMadScale = 1.4826;
constexpr double kMinMad = 1e-8;
constexpr double kMaxSeverity = 5.0;

// A strict weak order even with NaN present (NaN last), so that sorting
// arbitrary inputs is well defined.
bool NanLastLess(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// Candidates as a mask over [0, T).
std::vector<bool> CandidateMask(int64_t num_tokens, const std::vector<int64_t>& structural) {
  std::vector<bool> candidate(static_cast<size_t>(num_tokens), true);
  for (int64_t p : structural) {
    if (p >= 0 && p < num_tokens) candidate[static_cast<size_t>(p)] = false;
  }
  return candidate;
}

}  // namespace

double LowerMedian(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end(), NanLastLess);
  return values[(values.size() - 1) / 2];
}

std::vector<double> RowNorms(const float* x, int64_t num_tokens, int64_t width) {
  std::vector<double> norms(static_cast<size_t>(num_tokens), 0.0);
  for (int64_t i = 0; i < num_tokens; ++i) {
    norms[static_cast<size_t>(i)] = std::sqrt(vmath::SumSquares(x + i * width, width));
  }
  return norms;
}

MassiveStats ComputeMassive(const std::vector<std::vector<double>>& token_norms) {
  MassiveStats out;
  if (token_norms.empty()) return out;
  out.max_norm = token_norms[0];
  for (const auto& state : token_norms) {
    for (size_t i = 0; i < out.max_norm.size() && i < state.size(); ++i) {
      out.max_norm[i] = std::max(out.max_norm[i], state[i]);
    }
  }
  const auto& m = out.max_norm;
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i] > m[static_cast<size_t>(out.argmax)]) out.argmax = static_cast<int64_t>(i);
  }
  if (m.size() > 1) {
    const double median = LowerMedian(std::vector<double>(m.begin() + 1, m.end()));
    out.ratio = median > 0.0 ? m[0] / median : 0.0;
  }
  return out;
}

void ReceivedAccumulator::Begin(int64_t num_tokens) {
  column_sums_.assign(static_cast<size_t>(num_tokens), 0.0);
}

void ReceivedAccumulator::AddBlock(const model::AttentionBlock& block) {
  const int64_t t = static_cast<int64_t>(column_sums_.size());
  const int64_t rows = block.query_end - block.query_begin;
  double* sums = column_sums_.data();
  for (int64_t h = 0; h < block.num_heads; ++h) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = block.probs + (h * rows + r) * t;
      const int64_t visible = std::min(block.query_begin + r + 1, t);
      for (int64_t j = 0; j < visible; ++j) sums[j] += row[j];
    }
  }
}

std::vector<double> ReceivedAccumulator::Finish(int64_t num_layer_heads) const {
  const size_t t = column_sums_.size();
  std::vector<double> received(t, 0.0);
  if (num_layer_heads <= 0) return received;
  for (size_t j = 0; j < t; ++j) {
    received[j] = column_sums_[j] / static_cast<double>(num_layer_heads) /
                  static_cast<double>(t - j);
  }
  return received;
}

std::vector<double> LogMadZ(const std::vector<double>& received,
                            const std::vector<int64_t>& structural) {
  const auto t = static_cast<int64_t>(received.size());
  std::vector<double> z(received.size(), 0.0);
  std::vector<double> x(received.size());
  for (size_t j = 0; j < received.size(); ++j) x[j] = std::log(std::max(received[j], kLogFloor));
  const std::vector<bool> candidate = CandidateMask(t, structural);
  std::vector<double> population;
  for (size_t j = 0; j < x.size(); ++j) {
    if (candidate[j]) population.push_back(x[j]);
  }
  if (population.empty()) return z;
  const double median = LowerMedian(population);
  for (double& v : population) v = std::fabs(v - median);
  const double scale = LowerMedian(population) * kMadScale;
  // Written as !(scale >= kMinMad) so that a NaN scale also gives zeros.
  if (!(scale >= kMinMad)) return z;
  for (size_t j = 0; j < x.size(); ++j) z[j] = (x[j] - median) / scale;
  return z;
}

HealthResult ContextHealth(const std::vector<double>& z, const std::vector<int64_t>& structural,
                           double threshold) {
  HealthResult out;
  const std::vector<bool> candidate = CandidateMask(static_cast<int64_t>(z.size()), structural);
  double z_sum = 0.0;
  for (size_t j = 0; j < z.size(); ++j) {
    if (!candidate[j]) continue;
    ++out.num_candidates;
    if (z[j] > threshold) {
      out.sinks.push_back(static_cast<int64_t>(j));
      z_sum += z[j];
    }
  }
  if (out.sinks.empty()) return out;
  const double count = static_cast<double>(out.sinks.size());
  const double density = count / static_cast<double>(out.num_candidates);
  const double severity = std::min(z_sum / count, kMaxSeverity);
  out.health = std::clamp(10.0 - density * 10.0 - severity, 0.0, 10.0);
  return out;
}

void SizeNextTokenOutputs(int64_t num_tokens, const std::vector<int64_t>& ids,
                          NextTokenOutputs out) {
  const auto t = static_cast<size_t>(num_tokens);
  if (out.nats != nullptr) out.nats->assign(t, 0.0);
  if (out.normalized != nullptr) out.normalized->assign(t, 0.0);
  if (out.surprisal != nullptr) {
    out.surprisal->assign(ids.size() == t && t > 0 ? t - 1 : 0, 0.0);
  }
  if (out.top != nullptr) out.top->assign(t, {});
}

void NextTokenRows(const float* logits, int64_t row_begin, int64_t rows, int64_t num_tokens,
                   int64_t vocab, const std::vector<int64_t>& ids, int64_t k,
                   NextTokenOutputs out) {
  const double log_vocab = vocab > 1 ? std::log(static_cast<double>(vocab)) : 0.0;
  const bool with_ids = static_cast<int64_t>(ids.size()) == num_tokens;
  const int64_t keep = out.top != nullptr ? std::max<int64_t>(0, std::min(k, vocab)) : 0;
  // Rows are independent (each writes only its own entries), so they run on
  // the model's threads.
  core::ParallelFor(rows, 1, [&](int64_t first, int64_t end) {
    std::vector<int64_t> best(static_cast<size_t>(keep));
    for (int64_t i = row_begin + first; i < row_begin + end; ++i) {
      const float* row = logits + (i - row_begin) * vocab;
      const vmath::LogitRowStats row_stats = vmath::LogitRow(row, vocab);
      const auto r = static_cast<size_t>(i);
      // Rounded to float as the reference (float32 torch) does.
      if (out.nats != nullptr) (*out.nats)[r] = static_cast<float>(row_stats.entropy);
      if (out.normalized != nullptr && log_vocab > 0.0) {
        (*out.normalized)[r] = static_cast<float>(row_stats.entropy / log_vocab);
      }
      if (out.surprisal != nullptr && with_ids && i + 1 < num_tokens) {
        const int64_t next = ids[r + 1];
        (*out.surprisal)[r] = next >= 0 && next < vocab
                                  ? row_stats.log_z - static_cast<double>(row[next])
                                  : std::numeric_limits<double>::quiet_NaN();
      }
      if (keep == 0) continue;
      const int64_t found = vmath::TopK(row, vocab, keep, best.data());
      auto& predictions = (*out.top)[r];
      for (int64_t p = 0; p < found; ++p) {
        const int64_t id = best[static_cast<size_t>(p)];
        predictions.push_back({id, std::exp(static_cast<double>(row[id]) - row_stats.log_z), ""});
      }
    }
  });
}

void NextTokenStats(const float* logits, int64_t num_tokens, int64_t vocab,
                    const std::vector<int64_t>& ids, int64_t k, NextTokenOutputs out) {
  SizeNextTokenOutputs(num_tokens, ids, out);
  NextTokenRows(logits, 0, num_tokens, num_tokens, vocab, ids, k, out);
}

void NextTokenEntropy(const float* logits, int64_t num_tokens, int64_t vocab,
                      std::vector<double>* nats, std::vector<double>* normalized) {
  NextTokenOutputs out;
  out.nats = nats;
  out.normalized = normalized;
  NextTokenStats(logits, num_tokens, vocab, {}, 0, out);
}

void NextTokenPredictions(const float* logits, int64_t num_tokens, int64_t vocab,
                          const std::vector<int64_t>& ids, int64_t k,
                          std::vector<double>* surprisal,
                          std::vector<std::vector<Prediction>>* top) {
  NextTokenOutputs out;
  out.surprisal = surprisal;
  out.top = top;
  NextTokenStats(logits, num_tokens, vocab, ids, k, out);
}

}  // namespace attnscope::analysis
