#include "service/analysis/head_stats.h"

#include <algorithm>

#include "service/core/parallel.h"
#include "service/core/vector_math.h"

namespace attnscope::analysis {

double RowEntropy(const float* p, int64_t n) {
  return vmath::AttentionRow(p, nullptr, n, nullptr).entropy;
}

double SinkEpsilonShare(const HeadGrid& first_token_importance, double epsilon) {
  int64_t heads = 0;
  int64_t above = 0;
  for (const auto& layer : first_token_importance) {
    for (double alpha : layer) {
      ++heads;
      if (alpha > epsilon) ++above;
    }
  }
  return heads == 0 ? 0.0 : static_cast<double>(above) / static_cast<double>(heads);
}

double BackHalfSinkShare(const HeadGrid& sink_score, double cut) {
  const size_t num_layers = sink_score.size();
  int64_t heads = 0;
  int64_t above = 0;
  for (size_t l = num_layers / 2; l < num_layers; ++l) {
    for (double s : sink_score[l]) {
      ++heads;
      if (s > cut) ++above;
    }
  }
  return heads == 0 ? 0.0 : static_cast<double>(above) / static_cast<double>(heads);
}

void HeadStatsAccumulator::Begin(int64_t num_tokens) {
  num_tokens_ = num_tokens;
  layers_.clear();
}

void HeadStatsAccumulator::AddRow(const float* row, const float* value_norms,
                                  const double* entropy, int64_t i, HeadSums* sums,
                                  double* column_sums) const {
  const int64_t t = num_tokens_;
  if (i == t - 1) {
    sums->has_sink = true;
    sums->sink = row[0];
  }
  // The query-averaged numbers skip row 0 (it can only see itself), except
  // for T = 1 where row 0 is all there is.
  const bool averaged_row = i >= 1 || t == 1;
  if (averaged_row) sums->first_mass += row[0];
  sums->first_all += row[0];
  // One pass over the keys the row can see (the rest are exactly 0) for the
  // entropy (unless the runtime's softmax gave it), the value-weighted total
  // and the received columns.
  const vmath::AttentionRowSums row_sums =
      vmath::AttentionRow(row, averaged_row ? value_norms : nullptr, std::min(i + 1, t),
                          column_sums, /*with_entropy=*/entropy == nullptr);
  sums->entropy += entropy != nullptr ? *entropy : row_sums.entropy;
  if (i >= 1) sums->prev += row[i - 1];
  if (value_norms != nullptr && averaged_row) {
    const double first = static_cast<double>(row[0]) * value_norms[0];
    sums->vw_raw += first;
    sums->vw_norm += row_sums.weighted > 0.0 ? first / row_sums.weighted : 0.0;
  }
  const int64_t n = induction_n_;
  if (n > 0 && i >= n + 1 && i <= 2 * n && i - n + 1 < t) sums->induction += row[i - n + 1];
}

void HeadStatsAccumulator::StartBlock(const model::AttentionBlock& block, bool with_columns) {
  const auto layer = static_cast<size_t>(block.layer);
  const auto heads = static_cast<size_t>(block.num_heads);
  if (layers_.size() <= layer) layers_.resize(layer + 1);
  LayerSums& sums = layers_[layer];
  for (auto* v : {&sums.sink, &sums.first_mass, &sums.first_all, &sums.entropy, &sums.prev,
                  &sums.vw_raw, &sums.vw_norm, &sums.induction}) {
    if (v->size() < heads) v->resize(heads, 0.0);
  }
  with_columns_ = with_columns;
  if (with_columns && head_columns_.size() < heads * static_cast<size_t>(num_tokens_)) {
    head_columns_.resize(heads * static_cast<size_t>(num_tokens_));
  }
}

void HeadStatsAccumulator::AddHead(const model::AttentionBlock& block, int64_t h,
                                   bool use_value_norms) {
  const int64_t t = num_tokens_;
  const int64_t rows = block.query_end - block.query_begin;
  // Rows of this block see keys [0, query_end) at most.
  const int64_t seen = std::min(block.query_end, t);
  const float* norms = use_value_norms ? block.value_norms + h * t : nullptr;
  double* columns = nullptr;
  if (with_columns_) {
    columns = head_columns_.data() + h * t;
    std::fill(columns, columns + seen, 0.0);
  }
  // The head's sums of this block in locals, added once at the end: the
  // heads' running sums are neighbours in memory, shared by the threads.
  HeadSums head;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = block.probs + (h * rows + r) * t;
    const double* entropy =
        block.row_entropy != nullptr ? block.row_entropy + h * rows + r : nullptr;
    AddRow(row, norms, entropy, block.query_begin + r, &head, columns);
  }
  LayerSums& sums = layers_[static_cast<size_t>(block.layer)];
  const auto k = static_cast<size_t>(h);
  if (head.has_sink) sums.sink[k] = head.sink;
  sums.first_mass[k] += head.first_mass;
  sums.first_all[k] += head.first_all;
  sums.entropy[k] += head.entropy;
  sums.prev[k] += head.prev;
  sums.vw_raw[k] += head.vw_raw;
  sums.vw_norm[k] += head.vw_norm;
  sums.induction[k] += head.induction;
}

void HeadStatsAccumulator::EndBlock(const model::AttentionBlock& block, double* column_sums) {
  if (!with_columns_ || column_sums == nullptr) return;
  // Each head added its rows into its own T doubles; the heads go into
  // `column_sums` in order here, so the sums do not depend on how the heads
  // were split among threads.
  const int64_t t = num_tokens_;
  const int64_t seen = std::min(block.query_end, t);
  for (int64_t h = 0; h < block.num_heads; ++h) {
    const double* columns = head_columns_.data() + h * t;
    for (int64_t j = 0; j < seen; ++j) column_sums[j] += columns[j];
  }
}

void HeadStatsAccumulator::AddBlock(const model::AttentionBlock& block, bool use_value_norms,
                                    double* column_sums) {
  StartBlock(block, column_sums != nullptr);
  // Heads are independent (each writes only its own entries of the sums and
  // its own columns), so they run on the model's threads.
  core::ParallelFor(block.num_heads, 1, [&](int64_t head_begin, int64_t head_end) {
    for (int64_t h = head_begin; h < head_end; ++h) AddHead(block, h, use_value_norms);
  });
  EndBlock(block, column_sums);
}

HeadStats HeadStatsAccumulator::Finish(int64_t num_layers, int64_t num_heads,
                                       bool with_value_norms) const {
  const int64_t t = num_tokens_;
  const double averaged_rows = t > 1 ? static_cast<double>(t - 1) : 1.0;
  const double prev_rows = t > 1 ? static_cast<double>(t - 1) : 0.0;
  HeadStats out;
  const HeadGrid empty(static_cast<size_t>(num_layers),
                       std::vector<double>(static_cast<size_t>(num_heads), 0.0));
  out.sink_score = out.first_token_mass = out.first_token_importance = out.attention_entropy =
      out.prev_token_score = empty;
  if (with_value_norms) out.value_weighted_raw = out.value_weighted_normalized = empty;
  if (induction_n_ > 0) out.induction_score = empty;
  for (size_t l = 0; l < static_cast<size_t>(num_layers) && l < layers_.size(); ++l) {
    const LayerSums& s = layers_[l];
    for (size_t h = 0; h < static_cast<size_t>(num_heads) && h < s.sink.size(); ++h) {
      out.sink_score[l][h] = s.sink[h];
      out.first_token_mass[l][h] = s.first_mass[h] / averaged_rows;
      out.first_token_importance[l][h] = t > 0 ? s.first_all[h] / static_cast<double>(t) : 0.0;
      out.attention_entropy[l][h] = t > 0 ? s.entropy[h] / static_cast<double>(t) : 0.0;
      out.prev_token_score[l][h] = prev_rows > 0 ? s.prev[h] / prev_rows : 0.0;
      if (with_value_norms) {
        out.value_weighted_raw[l][h] = s.vw_raw[h] / averaged_rows;
        out.value_weighted_normalized[l][h] = s.vw_norm[h] / averaged_rows;
      }
      if (induction_n_ > 0) {
        out.induction_score[l][h] = s.induction[h] / static_cast<double>(induction_n_);
      }
    }
  }
  return out;
}

}  // namespace attnscope::analysis
