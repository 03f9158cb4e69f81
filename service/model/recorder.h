// An observer that keeps everything: attentions (L,H,T,T), hidden states
// (L+1,T,D) and logits (T,V) of sequence 0, in the layout of the fixtures'
// reference.safetensors. For exports and tests; memory grows as L*H*T^2.
// When the last hidden state is narrower than the width (OPT's project_out),
// hidden_states() holds it zero-padded and final_hidden_state() exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "service/model/forward_observer.h"

namespace attnscope::model {

class FullRecorder : public ForwardObserver {
 public:
  // L layers, H heads: needed to size the attention buffer.
  FullRecorder(int64_t num_layers, int64_t num_heads, ObserverNeeds needs);

  ObserverNeeds Needs() const override { return needs_; }
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;
  void OnAttention(const AttentionBlock& block) override;
  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override;

  int64_t num_tokens() const { return tokens_; }
  int64_t width() const { return width_; }
  int64_t vocab() const { return vocab_; }
  const std::vector<float>& attentions() const { return attentions_; }  // (L, H, T, T)
  const std::vector<float>& hidden_states() const { return hidden_; }   // (L+1, T, D)
  const std::vector<float>& logits() const { return logits_; }          // (T, V)
  // (T, final_width()): empty unless the last state was narrower than width().
  const std::vector<float>& final_hidden_state() const { return final_; }
  int64_t final_width() const { return final_width_; }

 private:
  int64_t layers_, heads_;
  ObserverNeeds needs_;
  int64_t tokens_ = 0, width_ = 0, vocab_ = 0, final_width_ = 0;
  std::vector<float> attentions_, hidden_, logits_, final_;
};

}  // namespace attnscope::model
