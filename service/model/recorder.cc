#include "service/model/recorder.h"

#include <algorithm>

namespace attnscope::model {

FullRecorder::FullRecorder(int64_t num_layers, int64_t num_heads, ObserverNeeds needs)
    : layers_(num_layers), heads_(num_heads), needs_(needs) {
  needs_.value_norms = false;
}

void FullRecorder::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != 0) return;
  tokens_ = num_tokens;
  if (needs_.attention) attentions_.assign(layers_ * heads_ * num_tokens * num_tokens, 0.0f);
  hidden_.clear();
  final_.clear();
  width_ = final_width_ = 0;
}

void FullRecorder::OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                                 int64_t width) {
  if (sequence != 0) return;
  if (width_ == 0) width_ = width;
  hidden_.resize((layers_ + 1) * num_tokens * width_, 0.0f);
  if (width < width_) {  // OPT's project_out: zero-padded here, exact in final_
    final_width_ = width;
    final_.assign(x, x + num_tokens * width);
    for (int64_t t = 0; t < num_tokens; ++t) {
      std::copy(x + t * width, x + (t + 1) * width,
                hidden_.begin() + (state * num_tokens + t) * width_);
    }
    return;
  }
  std::copy(x, x + num_tokens * width, hidden_.begin() + state * num_tokens * width);
}

void FullRecorder::OnAttention(const AttentionBlock& b) {
  if (b.sequence != 0 || b.num_keys != tokens_) return;  // a cached step: not recorded
  const int64_t rows = b.query_end - b.query_begin, t = tokens_;
  for (int64_t h = 0; h < b.num_heads; ++h) {
    const float* src = b.probs + h * rows * t;
    float* dst = attentions_.data() + ((b.layer * heads_ + h) * t + b.query_begin) * t;
    std::copy(src, src + rows * t, dst);
  }
}

void FullRecorder::OnLogits(int sequence, const float* logits, int64_t num_tokens,
                            int64_t vocab) {
  if (sequence != 0) return;
  vocab_ = vocab;
  logits_.assign(logits, logits + num_tokens * vocab);
}

}  // namespace attnscope::model
