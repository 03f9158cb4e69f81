// Per-(layer, head) attention statistics, accumulated block by block so that
// the L x H x T x T attention tensor is never stored.
#pragma once

#include <cstdint>
#include <vector>

#include "service/analysis/prompt_stats.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// The per-head numbers of service/analysis/definitions.md.
struct HeadStats {
  HeadGrid sink_score;
  HeadGrid first_token_mass;
  HeadGrid first_token_importance;  // (1/T) sum_{i=0..T-1} A[l,h,i,0] (Gu et al.)
  HeadGrid attention_entropy;
  HeadGrid prev_token_score;  // 0 when T = 1 (no previous token)
  HeadGrid value_weighted_raw;         // empty unless value norms were seen
  HeadGrid value_weighted_normalized;  // empty unless value norms were seen
  HeadGrid induction_score;            // empty unless induction_n > 0
};

// Accumulates the per-head sums of one sequence. Memory: a handful of doubles
// per (layer, head), and with column sums H x T doubles of scratch.
class HeadStatsAccumulator {
 public:
  // induction_n > 0 also accumulates the induction score for a probe of
  // T = 2 * induction_n + 1 tokens (the caller checks T).
  explicit HeadStatsAccumulator(int64_t induction_n = 0) : induction_n_(induction_n) {}

  // Forgets everything; the next blocks belong to a sequence of `num_tokens`.
  void Begin(int64_t num_tokens);

  // Adds one block of query rows. The caller has validated it: layer >= 0,
  // num_keys == T, 0 <= query_begin < query_end <= T, num_heads >= 1 and the
  // same for every block, probs non-null, zero above the diagonal (only keys
  // j <= i of row i are read). value_norms (H, T) is used when
  // `use_value_norms` is true and must then be non-null. With `column_sums`
  // (T doubles) every row is also added into it, in the same pass over the
  // block (ReceivedAccumulator's sums, read once for all statistics). The
  // heads run in parallel on core::ParallelFor's threads.
  void AddBlock(const model::AttentionBlock& block, bool use_value_norms,
                double* column_sums = nullptr);

  // AddBlock in three steps, for a runtime that hands over heads as it
  // computes them: StartBlock (sizes the sums; with_columns: the block's
  // rows will also go into column sums), AddHead for every head (calls for
  // different heads may run at the same time; block.probs must hold head
  // h's rows by then), EndBlock (adds the heads' columns into
  // `column_sums`, in head order). The same sums as AddBlock, bit for bit.
  void StartBlock(const model::AttentionBlock& block, bool with_columns);
  void AddHead(const model::AttentionBlock& block, int64_t head, bool use_value_norms);
  void EndBlock(const model::AttentionBlock& block, double* column_sums);

  // The statistics of layers 0..num_layers-1 with `num_heads` heads each,
  // assuming every row of every layer was added exactly once.
  HeadStats Finish(int64_t num_layers, int64_t num_heads, bool with_value_norms) const;

 private:
  // Running sums of one layer, one entry per head.
  struct LayerSums {
    std::vector<double> sink, first_mass, first_all, entropy, prev, vw_raw, vw_norm, induction;
  };
  // One head's sums over the rows of one block.
  struct HeadSums {
    bool has_sink = false;
    double sink = 0, first_mass = 0, first_all = 0, entropy = 0, prev = 0, vw_raw = 0,
           vw_norm = 0, induction = 0;
  };
  // entropy: the row's entropy if the runtime gave it (nullptr: computed here).
  void AddRow(const float* row, const float* value_norms, const double* entropy, int64_t i,
              HeadSums* sums, double* column_sums) const;

  int64_t induction_n_ = 0;
  int64_t num_tokens_ = 0;
  std::vector<LayerSums> layers_;
  bool with_columns_ = false;  // this block's rows also go into head_columns_
  std::vector<double> head_columns_;  // (H, T): each head's received columns of one block
};

// Fraction of the heads with l >= floor(L/2) whose sink score is > cut; 0 for
// an empty grid.
double BackHalfSinkShare(const HeadGrid& sink_score, double cut = 0.5);

// Sink-epsilon of one prompt: the share of the (layer, head) pairs whose
// first-token importance is strictly above `epsilon` (Gu et al.; 0.3 by
// default); 0 for an empty grid.
double SinkEpsilonShare(const HeadGrid& first_token_importance, double epsilon);

// -sum_j p_j log p_j over p[0..n), summed in double, with 0 log 0 = 0
// (negative entries are treated like 0); log by vmath's polynomial.
double RowEntropy(const float* p, int64_t n);

}  // namespace attnscope::analysis
