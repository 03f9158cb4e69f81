// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel computes it.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "service/core/safetensors.h"
#include "service/model/language_model.h"

namespace attnscope::model {

// Builds a GPT-2 from a checkpoint in either layout found in the wild (names
// with or without the "transformer." prefix; the causal-mask buffers
// h.N.attn.bias / masked_bias ignored; lm_head tied to wte when absent).
absl::StatusOr<std::unique_ptr<LanguageModel>> LoadGpt2(const ModelConfig& config,
                                                        const SafetensorsCheckpoint& checkpoint);

}  // namespace attnscope::model
