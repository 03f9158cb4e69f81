#include "service/analysis/attention_rollout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/parallel.h"

namespace attnscope::analysis {
namespace {

// Row i of Rhat = normalise((mean_h A[h,i,:] + e_i) / 2), over keys 0..i, into
// out[0..i]; `probs` is the block's (H, rows, T) at row r.
void RolloutRow(const model::AttentionBlock& block, int64_t r, float* out) {
  const int64_t i = block.query_begin + r, keys = block.num_keys;
  const int64_t rows = block.query_end - block.query_begin;
  std::vector<double> mean(static_cast<size_t>(i + 1), 0.0);
  for (int64_t h = 0; h < block.num_heads; ++h) {
    const float* p = block.probs + (h * rows + r) * keys;
    for (int64_t j = 0; j <= i; ++j) mean[static_cast<size_t>(j)] += p[j];
  }
  const double heads = static_cast<double>(block.num_heads);
  double sum = 0.0;
  for (int64_t j = 0; j <= i; ++j) {
    double& m = mean[static_cast<size_t>(j)];
    m = 0.5 * (m / heads) + (j == i ? 0.5 : 0.0);
    sum += m;
  }
  for (int64_t j = 0; j <= i; ++j) out[j] = static_cast<float>(mean[static_cast<size_t>(j)] / sum);
}

}  // namespace

int64_t RolloutBytes(int64_t num_tokens) {
  return 2 * num_tokens * num_tokens * static_cast<int64_t>(sizeof(float));
}

AttentionRolloutObserver::AttentionRolloutObserver(RolloutOptions options, int64_t num_layers)
    : options_(std::move(options)), num_layers_(num_layers) {}

model::ObserverNeeds AttentionRolloutObserver::Needs() const {
  model::ObserverNeeds needs;
  needs.attention = true;
  return needs;
}

void AttentionRolloutObserver::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != 0) return;
  status_ = absl::OkStatus();
  rollout_ = Rollout();
  product_.clear();
  next_.clear();
  num_tokens_ = num_tokens;
  layer_ = 0;
  rows_done_ = 0;
  if (num_tokens > options_.max_tokens) {
    status_ = absl::InvalidArgumentError(absl::StrCat(
        "attention rollout keeps two T x T float32 matrices: T = ", num_tokens, " needs ",
        RolloutBytes(num_tokens) >> 20, " MiB; the limit is ", options_.max_tokens,
        " tokens (", RolloutBytes(options_.max_tokens) >> 20, " MiB); shorten the prompt"));
    return;
  }
  std::vector<int64_t> queries = options_.queries;
  if (queries.empty()) queries = {num_tokens - 1};
  for (size_t k = 0; k < queries.size(); ++k) {
    if (queries[k] < 0 || queries[k] >= num_tokens ||
        (k > 0 && queries[k] <= queries[k - 1])) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "rollout query ", queries[k], ": queries must be ascending, without repeats, in 0..",
          num_tokens - 1));
      return;
    }
  }
  rollout_.num_tokens = num_tokens;
  rollout_.queries = std::move(queries);
  const auto cells = static_cast<size_t>(num_tokens * num_tokens);
  product_.assign(cells, 0.0f);
  next_.assign(cells, 0.0f);
}

void AttentionRolloutObserver::OnAttention(const model::AttentionBlock& block) {
  if (block.sequence != 0 || !status_.ok()) return;
  if (block.layer != layer_ || block.query_begin != rows_done_ || block.num_keys != num_tokens_ ||
      block.query_end > num_tokens_ || block.probs == nullptr) {
    status_ = absl::InternalError(absl::StrCat(
        "attention rollout: a block of layer ", block.layer, ", rows ", block.query_begin, "..",
        block.query_end, " over ", block.num_keys, " keys does not follow layer ", layer_,
        " row ", rows_done_, " of a prompt of ", num_tokens_, " tokens"));
    return;
  }
  AddBlock(block);
  rows_done_ = block.query_end;
  if (rows_done_ == num_tokens_) EndLayer(block.layer);
}

// Rows i of R_l = sum_{j <= i} Rhat_l[i,j] R_{l-1}[j, 0..j]: the block's
// rows of Rhat first, then one pass over the rows j of R_{l-1}, each added to
// every row of the block while it is in cache.
void AttentionRolloutObserver::AddBlock(const model::AttentionBlock& block) {
  const int64_t t = num_tokens_, begin = block.query_begin;
  const int64_t rows = block.query_end - begin;
  std::vector<float> rhat(static_cast<size_t>(rows * t), 0.0f);  // (rows, T)
  core::ParallelFor(rows, 1, [&](int64_t first, int64_t end) {
    for (int64_t r = first; r < end; ++r) RolloutRow(block, r, rhat.data() + r * t);
  });
  float* next = next_.data() + begin * t;
  if (layer_ == 0) {  // R_1 = Rhat_1
    std::copy(rhat.begin(), rhat.end(), next);
    return;
  }
  const float* product = product_.data();
  core::ParallelFor(rows, 8, [&](int64_t first, int64_t end) {
    for (int64_t j = 0; j < begin + end; ++j) {
      const float* from = product + j * t;
      for (int64_t r = std::max(first, j - begin); r < end; ++r) {
        const float w = rhat[static_cast<size_t>(r * t + j)];
        if (w == 0.0f) continue;
        float* to = next + r * t;
        for (int64_t c = 0; c <= j; ++c) to[c] += w * from[c];
      }
    }
  });
}

void AttentionRolloutObserver::EndLayer(int layer) {
  std::swap(product_, next_);
  std::fill(next_.begin(), next_.end(), 0.0f);
  std::vector<std::vector<double>> rows;
  for (int64_t q : rollout_.queries) {
    const float* row = product_.data() + q * num_tokens_;
    rows.emplace_back(row, row + num_tokens_);
  }
  rollout_.rows.push_back(std::move(rows));
  layer_ = layer + 1;
  rows_done_ = 0;
}

absl::StatusOr<Rollout> AttentionRolloutObserver::Finish() {
  if (!status_.ok()) return status_;
  if (static_cast<int64_t>(rollout_.rows.size()) != num_layers_ || rows_done_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention rollout: ", rollout_.rows.size(), " of ", num_layers_, " layers arrived whole"));
  }
  return std::move(rollout_);
}

}  // namespace attnscope::analysis
