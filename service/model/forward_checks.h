// Internal to the model library: validation of forward-pass inputs shared by
// every architecture.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "absl/status/status.h"
#include "service/model/language_model.h"

namespace attnscope::model {

// InvalidArgument (naming the value and the limit) for an empty batch or
// sequence, sequences of different lengths, an id outside [0, vocab),
// past + T > max_positions, a cache with more than one sequence, or an
// ablated head outside the model.
absl::Status CheckForwardInput(const ModelConfig& config,
                               const std::vector<std::vector<int64_t>>& batch,
                               const ForwardOptions& options, int64_t past);

// InvalidArgument unless options.hidden_keys is empty or has one entry per
// (new token, key) pair: `new_tokens` x `keys` (the cached keys and the new).
absl::Status CheckHiddenKeys(const ForwardOptions& options, int64_t new_tokens, int64_t keys);

// The batch as a (B, T) int64 tensor.
at::Tensor IdsTensor(const std::vector<std::vector<int64_t>>& batch);

}  // namespace attnscope::model
