#include "service/rpc/layer_streamer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "service/core/dtype.h"
#include "service/rpc/proto_convert.h"

namespace attnscope::rpc {
LayerStreamer::LayerStreamer(int64_t num_layers, int64_t num_heads, StreamOptions options,
                             Emit emit)
    : num_layers_(num_layers),
      num_heads_(num_heads),
      options_(std::move(options)),
      emit_(std::move(emit)) {}

void LayerStreamer::AttachTo(engine::AnalysisSettings& settings) {
  settings.extra_observers.push_back(this);
  settings.layer_listener = this;
}

model::ObserverNeeds LayerStreamer::Needs() const {
  model::ObserverNeeds needs;
  // The statistics come from the analyzer; raw rows only for streamed heads.
  needs.attention = options_.tensors.attention.size() > 0;
  needs.hidden_states = true;
  needs.logits = options_.tensors.logits;
  return needs;
}

void LayerStreamer::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != 0) return;
  num_tokens_ = num_tokens;
  tensors_.assign(static_cast<size_t>(num_heads_), {});
  layers_emitted_ = 0;
}

bool LayerStreamer::Wanted(int layer, int64_t head) const {
  return options_.tensors.attention.Has(layer, head);
}

void LayerStreamer::OnAttention(const model::AttentionBlock& b) {
  if (b.sequence != 0 || failed_) return;
  // Inconsistent blocks are the PromptAnalyzer's to report; just skip them.
  if (b.layer < 0 || b.layer >= num_layers_ || b.num_heads != num_heads_ ||
      b.num_keys != num_tokens_ || b.query_begin < 0 || b.query_end <= b.query_begin ||
      b.query_end > num_tokens_ || b.probs == nullptr) {
    return;
  }
  for (int64_t h = 0; h < num_heads_; ++h) {
    if (!Wanted(b.layer, h)) continue;
    std::vector<char>& tensor = tensors_[static_cast<size_t>(h)];
    const size_t element = options_.tensors.attention_float16 ? 2 : 4;
    tensor.resize(static_cast<size_t>(num_tokens_ * num_tokens_) * element, 0);
    CopyRows(b, h, tensor.data());
  }
}

void LayerStreamer::CopyRows(const model::AttentionBlock& b, int64_t head, char* tensor) const {
  const int64_t t = num_tokens_, rows = b.query_end - b.query_begin;
  const float* src = b.probs + head * rows * t;  // (rows, T) of this head
  if (!options_.tensors.attention_float16) {
    std::memcpy(tensor + b.query_begin * t * 4, src, static_cast<size_t>(rows * t) * 4);
    return;
  }
  auto* dst = reinterpret_cast<uint16_t*>(tensor) + b.query_begin * t;
  for (int64_t i = 0; i < rows * t; ++i) dst[i] = FloatToHalf(src[i]);
}

void LayerStreamer::OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                                  int64_t width) {
  // Counted even after a failed send (layers_emitted); Send drops the rest.
  if (sequence != 0 || state < 0 || state > num_layers_) return;
  if (num_tokens != num_tokens_ || x == nullptr || width < 1) return;
  if (options_.tensors.hidden_states) {
    EmitChunks("hidden_state", state, 0, {num_tokens, width}, v1::TENSOR_DTYPE_FLOAT32,
               reinterpret_cast<const char*>(x), num_tokens * width * 4);
  }
  if (state == 0) return;  // the embeddings: no layer is done yet
  EmitTensors(state - 1);
  ++layers_emitted_;
}

void LayerStreamer::OnLayerDone(int layer, const analysis::HeadStats& heads,
                                const std::vector<double>& norms) {
  if (failed_ || layer < 0 || layer >= num_layers_) return;
  EmitLayer(layer, heads, options_.hidden_state_norms ? &norms : nullptr);
}

void LayerStreamer::EmitLayer(int layer, const analysis::HeadStats& heads,
                              const std::vector<double>* norms) {
  v1::AnalyzeEvent event;
  *event.mutable_layer() = LayerStatsToProto(layer, heads, norms);
  Send(event);
}

void LayerStreamer::EmitTensors(int layer) {
  const int64_t t = num_tokens_;
  const v1::TensorDtype dtype =
      options_.tensors.attention_float16 ? v1::TENSOR_DTYPE_FLOAT16 : v1::TENSOR_DTYPE_FLOAT32;
  for (int64_t h = 0; h < num_heads_; ++h) {
    std::vector<char>& tensor = tensors_[static_cast<size_t>(h)];
    if (!Wanted(layer, h) || tensor.empty()) continue;
    EmitChunks("attention", layer, h, {t, t}, dtype, tensor.data(),
               static_cast<int64_t>(tensor.size()));
    std::vector<char>().swap(tensor);  // free the layer's copy at once
  }
}

void LayerStreamer::OnLogits(int sequence, const float* logits, int64_t num_tokens,
                             int64_t vocab) {
  if (sequence != 0 || failed_ || !options_.tensors.logits || logits == nullptr) return;
  EmitChunks("logits", 0, 0, {num_tokens, vocab}, v1::TENSOR_DTYPE_FLOAT32,
             reinterpret_cast<const char*>(logits), num_tokens * vocab * 4);
}

void LayerStreamer::EmitChunks(const std::string& name, int layer, int64_t head,
                               const std::vector<int64_t>& shape, v1::TensorDtype dtype,
                               const char* data, int64_t bytes) {
  const int64_t chunk = std::max<int64_t>(options_.chunk_bytes, 1);
  for (int64_t offset = 0; offset < bytes && !failed_; offset += chunk) {
    v1::AnalyzeEvent event;
    v1::TensorChunk* c = event.mutable_attention();
    c->set_name(name);
    c->set_layer(layer);
    c->set_head(static_cast<int32_t>(head));
    for (int64_t d : shape) c->add_shape(d);
    c->set_dtype(dtype);
    c->set_offset(offset);
    c->set_total_bytes(bytes);
    c->set_data(data + offset, static_cast<size_t>(std::min(chunk, bytes - offset)));
    Send(event);
  }
}

void LayerStreamer::Send(const v1::AnalyzeEvent& event) {
  if (!failed_ && !emit_(event)) failed_ = true;
}

}  // namespace attnscope::rpc
