// Internal to the model library: hands tensors computed by the runtime to the
// observers that asked for them, as contiguous float32 buffers.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "service/model/forward_observer.h"

namespace attnscope::model {

class ObserverSet {
 public:
  explicit ObserverSet(const std::vector<ForwardObserver*>& observers);

  // The union of what the observers need.
  const ObserverNeeds& needs() const { return needs_; }

  // OnBegin for every sequence of a batch of `batch` sequences of T tokens.
  void Begin(int64_t batch, int64_t num_tokens);
  // x is (B, T, D): hidden state `state` of every sequence.
  void PublishHidden(int state, const at::Tensor& x);
  // Layer `layer`'s writes to the residual stream of every sequence:
  // head_mix (B, T, H * d), attention_raw, attention and mlp (B, T, D)
  // (attention may be attention_raw itself).
  void PublishSublayerWrites(int layer, int64_t heads, const at::Tensor& head_mix,
                             const at::Tensor& attention_raw, const at::Tensor& attention,
                             const at::Tensor& mlp);
  // probs is (B, H, rows, S) for query rows starting at `query_begin`;
  // value_norms is (B, H, S) or undefined.
  // row_entropy: (B, H, rows) float64 entropies of the probs' rows, or
  // nullptr (AttentionBlock::row_entropy).
  void PublishAttention(int layer, int64_t query_begin, const at::Tensor& probs,
                        const at::Tensor& value_norms, const double* row_entropy = nullptr);
  // True when some observer takes attention head by head
  // (Needs().attention_by_head).
  bool attention_by_head() const { return !by_head_.empty(); }
  // A kernel that computes a block head by head on the CPU into `probs`
  // ((B, H, rows, S) float32, row-major; not yet filled in) calls this
  // first, then PublishAttentionHead for each (sequence, head) once its rows
  // are in place (from any thread), then PublishAttention with the same
  // block. value_norms: (B, H, S) float32 on the CPU, contiguous, or
  // undefined; row_entropy: where the kernel writes each row's entropy
  // ((B, H, rows) float64, filled in with the probs), or nullptr. Without
  // StartAttention, PublishAttention hands the heads to those observers
  // itself.
  void StartAttention(int layer, int64_t query_begin, int64_t batch, int64_t heads, int64_t rows,
                      int64_t keys, const float* probs, const at::Tensor& value_norms,
                      const double* row_entropy = nullptr);
  void PublishAttentionHead(int64_t sequence, int64_t head) const;
  // logits is (B, T, V): OnLogits, or one OnLogitsBlock of all T rows.
  void PublishLogits(const at::Tensor& logits);
  // True when every observer of the logits takes them in row blocks.
  bool logits_in_blocks() const { return logits_in_blocks_; }
  // logits is (B, rows, V) for rows [row_begin, row_begin + rows) of T; only
  // when logits_in_blocks().
  void PublishLogitsBlock(int64_t row_begin, const at::Tensor& logits, int64_t num_tokens);

 private:
  void StartBlocks(int layer, int64_t query_begin, int64_t batch, int64_t heads, int64_t rows,
                   int64_t keys, const float* probs, const at::Tensor& value_norms,
                   const double* row_entropy);

  std::vector<ForwardObserver*> observers_;
  std::vector<ForwardObserver*> by_head_;  // those with Needs().attention_by_head
  // The block between StartAttention and PublishAttention: one per sequence.
  std::vector<AttentionBlock> blocks_;
  at::Tensor block_value_norms_;  // keeps blocks_' value norms alive
  bool started_ = false;
  ObserverNeeds needs_;
  bool logits_in_blocks_ = true;
};

}  // namespace attnscope::model
