// A ForwardObserver that turns the forward pass into Analyze events while it
// runs: as soon as layer l is done (its hidden state l+1 is published, right
// after its last query block) it emits that layer's LayerStats, then the
// requested raw attention tensors of the layer as TensorChunks. The per-head
// numbers and the norms are the PromptAnalyzer's own (a LayerListener): they
// are computed once and equal the final PromptStats exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attnscope/v1/attnscope.pb.h"
#include "service/analysis/head_stats.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/engine/analysis_run.h"
#include "service/engine/tensor_pieces.h"
#include "service/model/forward_observer.h"

namespace attnscope::rpc {

// What an Analyze stream carries besides the per-layer statistics: the
// engine's tensor request (raw attention of layers x heads, as float16 or
// float32; every hidden state and the logits, float32) and how it is sent.
struct StreamOptions {
  engine::TensorRequest tensors;
  bool hidden_state_norms = true;
  int64_t chunk_bytes = 1 << 20;  // at most this much data per TensorChunk
};

class LayerStreamer : public model::ForwardObserver, public analysis::LayerListener {
 public:
  // Returns false when the event could not be sent (the client is gone).
  using Emit = std::function<bool(const attnscope::v1::AnalyzeEvent&)>;

  LayerStreamer(int64_t num_layers, int64_t num_heads, StreamOptions options, Emit emit);

  // Makes the streamer an extra observer of `settings`' analysis and its
  // layer listener (both are needed).
  void AttachTo(engine::AnalysisSettings& settings);

  model::ObserverNeeds Needs() const override;
  void OnBegin(int sequence, int64_t num_tokens) override;
  // Emits the layer's attention chunks (after its LayerStats).
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;
  // Copies the rows of the heads whose raw attention was requested.
  void OnAttention(const model::AttentionBlock& block) override;
  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override;
  // Emits the layer's LayerStats from the analyzer's numbers.
  void OnLayerDone(int layer, const analysis::HeadStats& heads,
                   const std::vector<double>& norms) override;

  // True once an Emit failed; the caller's should_stop should then fire.
  bool failed() const { return failed_; }
  // Layers emitted so far.
  int layers_emitted() const { return layers_emitted_; }

 private:
  bool Wanted(int layer, int64_t head) const;
  void CopyRows(const model::AttentionBlock& block, int64_t head, char* tensor) const;
  void EmitLayer(int layer, const analysis::HeadStats& heads, const std::vector<double>* norms);
  void EmitTensors(int layer);
  // `bytes` bytes at `data` as TensorChunks of at most chunk_bytes each.
  void EmitChunks(const std::string& name, int layer, int64_t head,
                  const std::vector<int64_t>& shape, attnscope::v1::TensorDtype dtype,
                  const char* data, int64_t bytes);
  void Send(const attnscope::v1::AnalyzeEvent& event);

  const int64_t num_layers_;
  const int64_t num_heads_;
  const StreamOptions options_;
  const Emit emit_;
  int64_t num_tokens_ = 0;
  std::vector<std::vector<char>> tensors_;  // [head]: (T, T) of the current layer
  bool failed_ = false;
  int layers_emitted_ = 0;
};

}  // namespace attnscope::rpc
