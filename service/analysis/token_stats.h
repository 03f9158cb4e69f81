// Per-token statistics of service/analysis/definitions.md: hidden-state norms, massive
// activations, attention received, log-MAD z-scores, sinks, context health
// and next-token entropy.
#pragma once

#include <cstdint>
#include <vector>

#include "service/analysis/prompt_stats.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// Lower median (element (n-1) div 2 of the sorted values, as torch.median);
// NaN sorts last. 0 for an empty input.
double LowerMedian(std::vector<double> values);

// ||x[i,:]||_2 for each of the `num_tokens` rows of x (num_tokens, width),
// accumulated in double.
std::vector<double> RowNorms(const float* x, int64_t num_tokens, int64_t width);

struct MassiveStats {
  std::vector<double> max_norm;  // [T]: max over states of the token norm
  double ratio = 1.0;            // max_norm[0] / lower_median(max_norm[1:])
  int64_t argmax = 0;            // first position of the largest max_norm
};

// From token_norms [L+1][T] (every row of length T). ratio is 1 when T = 1
// and 0 when the median of the rest is not positive (ratio undefined).
MassiveStats ComputeMassive(const std::vector<std::vector<double>>& token_norms);

// Column sums of all attention rows of a sequence, for R[j].
class ReceivedAccumulator {
 public:
  // Forgets everything; the next blocks belong to a sequence of `num_tokens`.
  void Begin(int64_t num_tokens);
  // Adds every row of every head of a block already validated by the caller
  // (num_keys == T, 0 <= query_begin < query_end <= T, probs non-null, zero
  // above the diagonal: row i is read up to key i).
  void AddBlock(const model::AttentionBlock& block);
  // R[j] = (sum_i M[i,j]) / (T - j) with M the mean over the
  // `num_layer_heads` (= L*H) attention maps added.
  std::vector<double> Finish(int64_t num_layer_heads) const;
  // The T column sums, for a caller that adds rows itself in a fused pass
  // (HeadStatsAccumulator::AddBlock).
  double* column_sums() { return column_sums_.data(); }

 private:
  std::vector<double> column_sums_;
};

// log-MAD z-scores: x_j = log(max(R[j], 1e-8)); m and s = 1.4826 * MAD over
// the candidates (positions of [0, T) not in `structural`; entries outside
// [0, T) are ignored); z_j = (x_j - m) / s for every j. All zeros when there
// is no candidate or s < 1e-8.
std::vector<double> LogMadZ(const std::vector<double>& received,
                            const std::vector<int64_t>& structural);

struct HealthResult {
  double health = 10.0;         // 0..10
  std::vector<int64_t> sinks;   // candidates with z > threshold, ascending
  int64_t num_candidates = 0;   // positions of [0, T) not structural
};

// Context health: 10 when there is no candidate or no sink, otherwise
// clamp(10 - 10 * sinks/candidates - min(mean z of the sinks, 5), 0, 10).
HealthResult ContextHealth(const std::vector<double>& z, const std::vector<int64_t>& structural,
                           double threshold);

// Where NextTokenStats writes; a null pointer skips that output.
struct NextTokenOutputs {
  std::vector<double>* nats = nullptr;        // [T] next-token entropy
  std::vector<double>* normalized = nullptr;  // [T] divided by log V (0 when V = 1)
  std::vector<double>* surprisal = nullptr;   // [T-1] as NextTokenPredictions
  std::vector<std::vector<Prediction>>* top = nullptr;  // [T] as NextTokenPredictions
};

// NextTokenEntropy and NextTokenPredictions in one pass over each row of
// logits (num_tokens, vocab): one vectorised max/exp pass and one top-k scan
// per row.
void NextTokenStats(const float* logits, int64_t num_tokens, int64_t vocab,
                    const std::vector<int64_t>& ids, int64_t k, NextTokenOutputs out);

// NextTokenStats in pieces, for logits that arrive in blocks of rows: first
// SizeNextTokenOutputs for a sequence of `num_tokens`, then NextTokenRows for
// each block, logits (rows, vocab) holding rows [row_begin, row_begin + rows).
void SizeNextTokenOutputs(int64_t num_tokens, const std::vector<int64_t>& ids,
                          NextTokenOutputs out);
void NextTokenRows(const float* logits, int64_t row_begin, int64_t rows, int64_t num_tokens,
                   int64_t vocab, const std::vector<int64_t>& ids, int64_t k,
                   NextTokenOutputs out);

// Next-token entropy of each row of logits (num_tokens, vocab): exponentials
// in float (vmath), sums in double, log-softmax form; then rounded to float as
// the reference does.
// `nats` and `normalized` (divided by log V; 0 when V = 1) get num_tokens
// entries.
void NextTokenEntropy(const float* logits, int64_t num_tokens, int64_t vocab,
                      std::vector<double>* nats, std::vector<double>* normalized);

// From the logits (num_tokens, vocab), log-softmax with sums in double:
// `surprisal` gets num_tokens - 1 entries -ln p_i(ids[i+1]) (NaN for an id
// outside [0, vocab); nothing when ids.size() != num_tokens), `top` gets
// num_tokens lists of the min(k, vocab) most likely ids with their
// probabilities, most likely first, ties by lower id (token text left empty).
void NextTokenPredictions(const float* logits, int64_t num_tokens, int64_t vocab,
                          const std::vector<int64_t>& ids, int64_t k,
                          std::vector<double>* surprisal,
                          std::vector<std::vector<Prediction>>* top);

}  // namespace attnscope::analysis
