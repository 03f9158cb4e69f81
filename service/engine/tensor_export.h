// Writes what a FullRecorder kept to a safetensors file laid out like the
// fixtures' reference.safetensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "service/model/model_config.h"
#include "service/model/recorder.h"

namespace attnscope::engine {

// Tensors: input_ids I64 (T), attentions F32 (L,H,T,T), hidden_states F32
// (L+1,T,D), logits F32 (T,V); when the last hidden state is narrower than D
// (OPT's project_out) it is zero-padded in hidden_states and exact in
// hidden_states_final F32 (T,E). Internal error naming the path if it cannot
// be written.
absl::Status ExportTensors(const std::string& path, const std::vector<int64_t>& ids,
                           const model::ModelConfig& config, const model::FullRecorder& tensors);

}  // namespace attnscope::engine
