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
  // probs is (B, H, rows, S) for query rows starting at `query_begin`;
  // value_norms is (B, H, S) or undefined.
  void PublishAttention(int layer, int64_t query_begin, const at::Tensor& probs,
                        const at::Tensor& value_norms);
  // logits is (B, T, V): OnLogits, or one OnLogitsBlock of all T rows.
  void PublishLogits(const at::Tensor& logits);
  // True when every observer of the logits takes them in row blocks.
  bool logits_in_blocks() const { return logits_in_blocks_; }
  // logits is (B, rows, V) for rows [row_begin, row_begin + rows) of T; only
  // when logits_in_blocks().
  void PublishLogitsBlock(int64_t row_begin, const at::Tensor& logits, int64_t num_tokens);

 private:
  std::vector<ForwardObserver*> observers_;
  ObserverNeeds needs_;
  bool logits_in_blocks_ = true;
};

}  // namespace attnscope::model
