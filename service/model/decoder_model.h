// Internal to the model library: the one decoder runtime every family runs on.
#pragma once

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

}  // namespace attnscope::model
