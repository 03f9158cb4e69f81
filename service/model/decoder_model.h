// Internal to the model library: the one decoder runtime every family runs on.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "service/core/safetensors.h"
#include "service/model/language_model.h"

namespace attnscope::model {

// Builds the model `config.decoder` describes from `checkpoint`, trying the
// spec's name prefixes (the first under which the embedding exists is used
// for every tensor but the head), with its weights on `options.device`.
// Errors name the tensor and the file; FailedPrecondition for a device this
// build or machine does not have. F32 tensors stay in the checkpoint's
// mapping (on the CPU), which the model keeps alive.
absl::StatusOr<std::unique_ptr<LanguageModel>> LoadDecoder(
    const ModelConfig& config, std::shared_ptr<const SafetensorsCheckpoint> checkpoint,
    const LoadProgressCallback& progress, const ModelLoadOptions& options);

// The most rows of logits per block when observers take blocks (the pass
// makes its blocks even under it): as many as fit in 128 MiB, at least 128
// and at most 256 (220 for a 151,936-token vocabulary, 131 for 256,000, 256
// for GPT-2's). Each block reads the whole (V, E) head once, from memory
// where the head is larger than the caches, so more rows amortise that
// read; the block is the pass's largest buffer, so its bytes are bounded
// (the measurements: docs/performance-history.md, "Measurements behind
// choices in the code").
int64_t LogitRowsPerBlock(int64_t vocab);

}  // namespace attnscope::model
