// Checks and translates the fields of ScanHeads and Ablate requests. Every
// error is InvalidArgument with a message that names the field, the value
// and the limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/engine/head_scan.h"
#include "service/engine/model_bundle.h"

namespace attnscope::rpc {

// The probe of a request against the model `model_name`: a random probe
// (engine::MakeRandomProbe), sequences as given (each 2n+1 ids within the
// vocabulary, at most engine::kMaxProbeSequences) or a text repeated
// (engine::MakeRepeatedProbe on its tokens without special tokens; the model
// needs a tokenizer). Then T = 2n+1 at most max_prompt_tokens (0: no server
// limit). Messages start with "probe.random", "probe.sequences" or
// "probe.text"; "probe:" when no source is set.
absl::StatusOr<engine::Probe> ResolveProbe(const attnscope::v1::InductionProbe& probe,
                                           const engine::ModelBundle& bundle,
                                           const std::string& model_name,
                                           int64_t max_prompt_tokens);

// The heads and mode of an Ablate request: at least one head, each within
// the model and listed once; mode one of AblationMode.
struct AblationPlan {
  std::vector<model::HeadRef> heads;
  model::AblationMode mode = model::AblationMode::kZero;
};
absl::StatusOr<AblationPlan> PlanAblation(const attnscope::v1::AblateRequest& request,
                                          const model::ModelConfig& config);

}  // namespace attnscope::rpc
