#include "service/engine/tensor_export.h"

#include "service/core/safetensors.h"

namespace attnscope::engine {

absl::Status ExportTensors(const std::string& path, const std::vector<int64_t>& ids,
                           const model::ModelConfig& config, const model::FullRecorder& tensors) {
  const int64_t t = ids.size(), l = config.num_layers, h = config.num_heads;
  std::vector<TensorToWrite> out;
  out.push_back(MakeI64Tensor("input_ids", {t}, ids));
  out.push_back(MakeF32Tensor("attentions", {l, h, t, t}, tensors.attentions()));
  out.push_back(MakeF32Tensor("hidden_states", {l + 1, t, tensors.width()}, tensors.hidden_states()));
  out.push_back(MakeF32Tensor("logits", {t, tensors.vocab()}, tensors.logits()));
  if (!tensors.final_hidden_state().empty()) {
    out.push_back(MakeF32Tensor("hidden_states_final", {t, tensors.final_width()},
                                tensors.final_hidden_state()));
  }
  return WriteSafetensors(path, out, {{"format", "pt"}, {"producer", "attnscope"}});
}

}  // namespace attnscope::engine
