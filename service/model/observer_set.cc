#include "service/model/observer_set.h"

#include <ATen/Parallel.h>

namespace attnscope::model {

ObserverSet::ObserverSet(const std::vector<ForwardObserver*>& observers) {
  for (ForwardObserver* o : observers) {
    if (o == nullptr) continue;
    observers_.push_back(o);
    const ObserverNeeds n = o->Needs();
    needs_.attention |= n.attention;
    if (n.attention && n.attention_by_head) by_head_.push_back(o);
    needs_.row_entropy |= n.attention && n.row_entropy;
    needs_.value_norms |= n.value_norms;
    needs_.hidden_states |= n.hidden_states;
    needs_.logits |= n.logits;
    needs_.sublayer_writes |= n.sublayer_writes;
    if (n.logits && !n.logits_in_blocks) logits_in_blocks_ = false;
  }
}

void ObserverSet::Begin(int64_t batch, int64_t num_tokens) {
  for (int64_t b = 0; b < batch; ++b) {
    for (ForwardObserver* o : observers_) o->OnBegin(static_cast<int>(b), num_tokens);
  }
}

void ObserverSet::PublishHidden(int state, const at::Tensor& x) {
  if (!needs_.hidden_states) return;
  const at::Tensor c = x.to(at::kCPU).contiguous();  // (B, T, D), from the model's device
  for (int64_t b = 0; b < c.size(0); ++b) {
    const at::Tensor row = c[b];
    for (ForwardObserver* o : observers_) {
      if (!o->Needs().hidden_states) continue;
      o->OnHiddenState(static_cast<int>(b), state, row.data_ptr<float>(), c.size(1), c.size(2));
    }
  }
}

void ObserverSet::PublishSublayerWrites(int layer, int64_t heads, const at::Tensor& head_mix,
                                        const at::Tensor& attention_raw,
                                        const at::Tensor& attention, const at::Tensor& mlp) {
  if (!needs_.sublayer_writes) return;
  const at::Tensor z = head_mix.to(at::kCPU).to(at::kFloat).contiguous();
  const at::Tensor raw = attention_raw.to(at::kCPU).to(at::kFloat).contiguous();
  const at::Tensor attn = attention.is_same(attention_raw)
                              ? raw
                              : attention.to(at::kCPU).to(at::kFloat).contiguous();
  const at::Tensor m = mlp.to(at::kCPU).to(at::kFloat).contiguous();
  for (int64_t b = 0; b < z.size(0); ++b) {
    SublayerWrites w;
    w.layer = layer;
    w.sequence = static_cast<int>(b);
    w.num_tokens = raw.size(1);
    w.width = raw.size(2);
    w.num_heads = heads;
    w.head_dim = z.size(2) / heads;
    w.head_mix = z[b].data_ptr<float>();
    w.attention_raw = raw[b].data_ptr<float>();
    w.attention = attn[b].data_ptr<float>();
    w.mlp = m[b].data_ptr<float>();
    for (ForwardObserver* o : observers_) {
      if (o->Needs().sublayer_writes) o->OnSublayerWrites(w);
    }
  }
}

namespace {

// Sequence b's block of a (B, H, rows, S) float32 probs buffer, its
// (B, H, S) value norms and (B, H, rows) row entropies (or nullptr), all
// contiguous.
AttentionBlock MakeBlock(int layer, int64_t query_begin, int64_t b, int64_t heads, int64_t rows,
                         int64_t keys, const float* probs, const float* value_norms,
                         const double* row_entropy) {
  AttentionBlock block;
  block.layer = layer;
  block.sequence = static_cast<int>(b);
  block.num_heads = heads;
  block.num_keys = keys;
  block.query_begin = query_begin;
  block.query_end = query_begin + rows;
  block.probs = probs + b * heads * rows * keys;
  if (value_norms != nullptr) block.value_norms = value_norms + b * heads * keys;
  if (row_entropy != nullptr) block.row_entropy = row_entropy + b * heads * rows;
  return block;
}

const float* DataOrNull(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

}  // namespace

void ObserverSet::StartBlocks(int layer, int64_t query_begin, int64_t batch, int64_t heads,
                              int64_t rows, int64_t keys, const float* probs,
                              const at::Tensor& value_norms, const double* row_entropy) {
  block_value_norms_ = value_norms;
  blocks_.clear();
  for (int64_t b = 0; b < batch; ++b) {
    blocks_.push_back(
        MakeBlock(layer, query_begin, b, heads, rows, keys, probs, DataOrNull(value_norms),
                  row_entropy));
  }
  for (const AttentionBlock& block : blocks_) {
    for (ForwardObserver* o : by_head_) o->OnAttentionStart(block);
  }
}

void ObserverSet::StartAttention(int layer, int64_t query_begin, int64_t batch, int64_t heads,
                                 int64_t rows, int64_t keys, const float* probs,
                                 const at::Tensor& value_norms, const double* row_entropy) {
  if (by_head_.empty()) return;
  StartBlocks(layer, query_begin, batch, heads, rows, keys, probs, value_norms, row_entropy);
  started_ = true;
}

void ObserverSet::PublishAttentionHead(int64_t sequence, int64_t head) const {
  if (!started_) return;
  const AttentionBlock& block = blocks_[static_cast<size_t>(sequence)];
  for (ForwardObserver* o : by_head_) o->OnAttentionHead(block, head);
}

void ObserverSet::PublishAttention(int layer, int64_t query_begin, const at::Tensor& probs,
                                   const at::Tensor& value_norms, const double* row_entropy) {
  if (!needs_.attention) return;
  // One copy per block from the model's device (none on the CPU).
  const at::Tensor p = probs.to(at::kCPU).contiguous();  // (B, H, rows, S)
  const at::Tensor vn =
      value_norms.defined() ? value_norms.to(at::kCPU).contiguous() : value_norms;
  const int64_t batch = p.size(0), heads = p.size(1);
  if (!by_head_.empty() && !started_) {
    // A kernel that did not publish head by head: hand the heads over here.
    StartBlocks(layer, query_begin, batch, heads, p.size(2), p.size(3), p.data_ptr<float>(), vn,
                row_entropy);
    started_ = true;
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) PublishAttentionHead(bh / heads, bh % heads);
    });
  }
  for (int64_t b = 0; b < batch; ++b) {
    const AttentionBlock block = MakeBlock(layer, query_begin, b, heads, p.size(2), p.size(3),
                                           p.data_ptr<float>(), DataOrNull(vn), row_entropy);
    for (ForwardObserver* o : observers_) {
      const ObserverNeeds n = o->Needs();
      if (!n.attention) continue;
      AttentionBlock mine = block;
      mine.heads_published = started_ && n.attention_by_head;
      o->OnAttention(mine);
    }
  }
  started_ = false;
  blocks_.clear();
  block_value_norms_ = at::Tensor();
}

void ObserverSet::PublishLogits(const at::Tensor& logits) {
  if (!needs_.logits) return;
  const at::Tensor c = logits.to(at::kCPU).contiguous();  // (B, T, V)
  for (int64_t b = 0; b < c.size(0); ++b) {
    const at::Tensor row = c[b];
    for (ForwardObserver* o : observers_) {
      const ObserverNeeds n = o->Needs();
      if (!n.logits) continue;
      const auto sequence = static_cast<int>(b);
      if (n.logits_in_blocks) {
        o->OnLogitsBlock(sequence, 0, row.data_ptr<float>(), c.size(1), c.size(1), c.size(2));
      } else {
        o->OnLogits(sequence, row.data_ptr<float>(), c.size(1), c.size(2));
      }
    }
  }
}

void ObserverSet::PublishLogitsBlock(int64_t row_begin, const at::Tensor& logits,
                                     int64_t num_tokens) {
  const at::Tensor c = logits.to(at::kCPU).contiguous();  // (B, rows, V), from the device
  for (int64_t b = 0; b < c.size(0); ++b) {
    const at::Tensor rows = c[b];
    for (ForwardObserver* o : observers_) {
      if (!o->Needs().logits) continue;
      o->OnLogitsBlock(static_cast<int>(b), row_begin, rows.data_ptr<float>(), c.size(1),
                       num_tokens, c.size(2));
    }
  }
}

}  // namespace attnscope::model
