// What the forward pass publishes, layer by layer, to whoever is listening.
//
// The runtime never keeps all L x H x T x T attention weights: it hands each
// layer's (or each query block's) probabilities to the observers and drops
// them. Every statistic is an observer that keeps only what it needs. This
// header is free of libtorch so that observers compile quickly.
#pragma once

#include <cstdint>

namespace attnscope::model {

// What an observer asks the runtime to compute and publish.
struct ObserverNeeds {
  bool attention = false;      // OnAttention for every layer
  bool value_norms = false;    // AttentionBlock::value_norms filled in
  bool hidden_states = false;  // OnHiddenState for s = 0..L
  bool logits = false;         // OnLogits
  // With `logits`: the observer takes the logits in blocks of rows through
  // OnLogitsBlock instead of all at once through OnLogits. When every
  // observer of the logits does, the runtime never holds all T x V of them.
  bool logits_in_blocks = false;
  // With `attention`: the observer also takes each head of a block on its
  // own, as soon as the runtime has computed it and while it is still in the
  // computing core's cache (OnAttentionStart, OnAttentionHead, then
  // OnAttention with heads_published set).
  bool attention_by_head = false;
  // With `attention`: fill AttentionBlock::row_entropy where the runtime's
  // softmax can give it (its CPU kernel), so that the observer need not take
  // a log of every probability again.
  bool row_entropy = false;
  // OnSublayerWrites for every layer (direct logit attribution). A model
  // whose residual stream cannot be split into its writes (a post-norm
  // stack, OPT's project_out) refuses the pass with Unimplemented.
  bool sublayer_writes = false;
};

// Attention probabilities of one layer for query rows [query_begin, query_end)
// of one sequence of the batch.
struct AttentionBlock {
  int layer = 0;
  int sequence = 0;  // index of the sequence in the batch
  int64_t num_heads = 0;
  int64_t num_keys = 0;  // T: keys 0..T-1 (past + current tokens)
  int64_t query_begin = 0;
  int64_t query_end = 0;
  // probs is (num_heads, query_end - query_begin, num_keys), row-major,
  // float32. probs[h][r][j] = A[layer, h, query_begin + r, j]; zero where
  // j > query_begin + r (causal mask). Rows sum to 1.
  const float* probs = nullptr;
  // value_norms is (num_heads, num_keys): ||v[layer, h, j]||_2, or nullptr
  // when no observer asked for it. With grouped-query attention, head h
  // reports the norms of the value head it reads. With a sliding window W,
  // probs are also zero where j <= query - W.
  const float* value_norms = nullptr;
  // row_entropy is (num_heads, query_end - query_begin), float64: each row's
  // entropy -sum_j probs log probs (nats), as the kernel's softmax computed
  // it (log Z - sum_j e_j (s_j - m) / Z: the same number up to about 1e-7
  // relative), or nullptr: when no observer asked (Needs().row_entropy) or
  // the block did not come from that kernel.
  const double* row_entropy = nullptr;
  // Set in the OnAttention that ends a block whose heads an observer with
  // Needs().attention_by_head has already taken through OnAttentionHead.
  bool heads_published = false;
};

// What one layer adds to the residual stream of one sequence: x_{l+1} =
// x_l + attention + mlp, whichever order the family computes them in. All
// (num_tokens, width) float32 row-major, width = D, except head_mix.
struct SublayerWrites {
  int layer = 0;
  int sequence = 0;
  int64_t num_tokens = 0;
  int64_t width = 0;      // D
  int64_t num_heads = 0;  // H
  int64_t head_dim = 0;   // d
  // (T, H * d): each head's attention-weighted values, head after head,
  // before the output projection (an ablated head's are zero).
  const float* head_mix = nullptr;
  // The output projection of head_mix, its bias included, before any
  // post-attention norm.
  const float* attention_raw = nullptr;
  // What the attention adds: attention_raw through Gemma-2's
  // post-attention norm, or attention_raw itself.
  const float* attention = nullptr;
  // What the MLP adds (after Gemma-2's post-feed-forward norm).
  const float* mlp = nullptr;
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;

  virtual ObserverNeeds Needs() const = 0;

  // Called once per sequence before anything else, with the sequence length T
  // and the model's shape.
  virtual void OnBegin(int sequence, int64_t num_tokens) {}

  // Hidden state `state` (0..L, Hugging Face's output_hidden_states
  // convention: 0 = embeddings, L = after the final norm) of one sequence:
  // x is (T, width) row-major float32, width = D except for state L of a
  // model whose output projection narrows it (OPT's project_out: E < D).
  virtual void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                             int64_t width) {}

  // Attention probabilities of one layer, one block of query rows. Blocks of
  // a layer arrive in order and cover every query row exactly once.
  virtual void OnAttention(const AttentionBlock& block) {}

  // For observers whose Needs() sets attention_by_head, each block comes in
  // three steps:
  //   1. OnAttentionStart(block) on the runtime's thread, before any of the
  //      block's probabilities exist (block.probs points to where they will
  //      be; the shape and value_norms are final);
  //   2. OnAttentionHead(block, h) once for every head h, as soon as head
  //      h's probabilities are in place, on the runtime's compute threads:
  //      calls for different heads of the block may run at the same time;
  //   3. OnAttention(block) with block.heads_published set, on the runtime's
  //      thread, after every head's call has returned.
  // Other callers (e.g. tensors replayed from a file) may go straight to
  // OnAttention with heads_published unset: the observer then takes every
  // head there.
  virtual void OnAttentionStart(const AttentionBlock& block) {}
  virtual void OnAttentionHead(const AttentionBlock& block, int64_t head) {}

  // For observers whose Needs() sets sublayer_writes: layer `writes.layer`'s
  // writes, once the layer is done (before its hidden state l + 1).
  virtual void OnSublayerWrites(const SublayerWrites& writes) {}

  // Logits (T, V) row-major float32 of one sequence; row i predicts token i+1.
  virtual void OnLogits(int sequence, const float* logits, int64_t num_tokens,
                        int64_t vocab) {}

  // For observers whose Needs() sets logits_in_blocks: logits of rows
  // [row_begin, row_begin + rows) of one sequence of `num_tokens`, (rows, V)
  // row-major. Blocks arrive in order and cover every row exactly once.
  virtual void OnLogitsBlock(int sequence, int64_t row_begin, const float* logits, int64_t rows,
                             int64_t num_tokens, int64_t vocab) {}
};

}  // namespace attnscope::model
