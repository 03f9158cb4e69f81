#include "service/model/observer_set.h"

namespace attnscope::model {

ObserverSet::ObserverSet(const std::vector<ForwardObserver*>& observers) {
  for (ForwardObserver* o : observers) {
    if (o == nullptr) continue;
    observers_.push_back(o);
    const ObserverNeeds n = o->Needs();
    needs_.attention |= n.attention;
    needs_.value_norms |= n.value_norms;
    needs_.hidden_states |= n.hidden_states;
    needs_.logits |= n.logits;
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

void ObserverSet::PublishAttention(int layer, int64_t query_begin, const at::Tensor& probs,
                                   const at::Tensor& value_norms) {
  if (!needs_.attention) return;
  // One copy per block from the model's device (none on the CPU).
  const at::Tensor p = probs.to(at::kCPU).contiguous();  // (B, H, rows, S)
  const at::Tensor vn =
      value_norms.defined() ? value_norms.to(at::kCPU).contiguous() : value_norms;
  for (int64_t b = 0; b < p.size(0); ++b) {
    const at::Tensor pb = p[b];
    AttentionBlock block;
    block.layer = layer;
    block.sequence = static_cast<int>(b);
    block.num_heads = p.size(1);
    block.num_keys = p.size(3);
    block.query_begin = query_begin;
    block.query_end = query_begin + p.size(2);
    block.probs = pb.data_ptr<float>();
    at::Tensor vb;
    if (vn.defined()) {
      vb = vn[b];
      block.value_norms = vb.data_ptr<float>();
    }
    for (ForwardObserver* o : observers_) {
      if (o->Needs().attention) o->OnAttention(block);
    }
  }
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
