// Attention rollout (Abnar & Zuidema 2020; service/analysis/definitions.md,
// "Attention rollout"): per layer l, R_l = Rhat_l ... Rhat_1 with
// Rhat = normalise_rows((mean over heads of A + I) / 2), and rows q of R_l
// for the chosen queries. Row q of R_l needs every row of R_{l-1}, so the
// observer keeps the running product: two T x T float32 matrices (8 T^2
// bytes; 512 MiB at T = 8192), O(T^3 / 6) multiply-adds per layer. Prompts
// longer than `max_tokens` are refused with that figure.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// Longest prompt rollout takes unless told otherwise: 8 * 8192^2 bytes =
// 512 MiB for the running product.
constexpr int64_t kRolloutMaxTokens = 8192;

struct RolloutOptions {
  // Query positions reported, ascending, each in [0, T); empty: the last.
  std::vector<int64_t> queries;
  int64_t max_tokens = kRolloutMaxTokens;
};

struct Rollout {
  int64_t num_tokens = 0;        // T
  std::vector<int64_t> queries;  // the queries reported
  // rows[l][k]: row queries[k] of R_{l+1} (after layers 0..l), T entries,
  // zero right of the query; sums to 1.
  std::vector<std::vector<std::vector<double>>> rows;
};

// The bytes the running product takes for a prompt of T tokens.
int64_t RolloutBytes(int64_t num_tokens);

class AttentionRolloutObserver : public model::ForwardObserver {
 public:
  // Observes sequence 0 of the batch, for a model of `num_layers` layers.
  AttentionRolloutObserver(RolloutOptions options, int64_t num_layers);

  model::ObserverNeeds Needs() const override;
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnAttention(const model::AttentionBlock& block) override;

  // The first error so far (a prompt too long, a query out of range).
  const absl::Status& status() const { return status_; }
  // Every layer's rows; the first error, or FailedPrecondition when a layer
  // did not arrive whole.
  absl::StatusOr<Rollout> Finish();

 private:
  void AddBlock(const model::AttentionBlock& block);
  void EndLayer(int layer);

  RolloutOptions options_;
  int64_t num_layers_;
  int64_t num_tokens_ = 0;
  // (T, T) row-major: R_{l-1}, and R_l as the blocks of layer l arrive.
  std::vector<float> product_, next_;
  std::vector<double> mean_row_;  // one row of Rhat_l
  int64_t rows_done_ = 0;         // query rows of the current layer so far
  int layer_ = 0;                 // the layer whose blocks arrive
  Rollout rollout_;
  absl::Status status_;
};

}  // namespace attnscope::analysis
