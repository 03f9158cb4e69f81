// Internal to the model library: eager causal self-attention that keeps the
// probabilities long enough to publish them, one block of query rows at a
// time.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <vector>

#include "service/model/language_model.h"
#include "service/model/observer_set.h"

namespace attnscope::model {

// Scratch memory for the attention probabilities: grown to the largest block
// a pass needed and reused by every layer of it and by later passes, so that
// the hot path does not fault in fresh pages on every layer.
class AttentionWorkspace {
 public:
  // At least `numel` floats, contents undefined; valid until the next call.
  float* Floats(int64_t numel);
  // At least `numel` doubles (the rows' entropies), apart from Floats'.
  double* Doubles(int64_t numel);

 private:
  // A buffer that only grows.
  template <typename T>
  struct Buffer {
    T* Get(int64_t numel);
    std::unique_ptr<T[]> data;
    int64_t size = 0;
  };
  Buffer<float> floats_;
  Buffer<double> doubles_;
};

// Workspaces of finished passes, handed to the next ones (one per pass in
// flight, so concurrent forward passes never share one).
class WorkspacePool {
 public:
  std::unique_ptr<AttentionWorkspace> Take();
  void Give(std::unique_ptr<AttentionWorkspace> workspace);

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<AttentionWorkspace>> free_;
};

struct AttentionStep {
  int layer = 0;
  // Scores are (q . k) * score_scale, soft-capped to +-softcap when
  // softcap > 0 (tanh(s / c) * c), then masked.
  double score_scale = 1.0;
  double softcap = 0.0;
  // W > 0: query at position p sees keys p-W+1 .. p only; 0: all keys <= p.
  int64_t window = 0;
  // Tokens before the first query (KV-cache length): query r sits at
  // position past + r and sees keys 0..past + r.
  int64_t past = 0;
  int64_t query_block_size = 0;  // 0: all queries at once
  // Positions of the S keys for the mask ((S) long; undefined: 0 .. S-1),
  // for a cache that evicted tokens but keeps their text positions.
  at::Tensor key_positions;
  // (T, S) bool: true also hides key j from query row r; undefined: none.
  at::Tensor hidden_keys;
  AttentionWorkspace* workspace = nullptr;  // nullptr: a workspace of this call only
};

// q is (B, H, T, d); k and v are (B, KV, S, d) with S = past + T and H a
// multiple of KV (query head h reads KV head h / (H / KV)). Returns the head
// outputs (B, H, T, d) (a view of a (B, T, H, d) tensor, so that the output
// projection reads it without a copy). Publishes probabilities (and value
// norms if asked) to `observers`. float32 throughout; on the CPU each
// (sequence, head) runs attention_kernel.h's kernel, elsewhere ATen ops.
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionStep& step, ObserverSet& observers);

// Applies ablations of `layer` to head outputs o (B, H, T, d) in place.
void AblateHeads(int layer, const ForwardOptions& options, at::Tensor& o);

}  // namespace attnscope::model
