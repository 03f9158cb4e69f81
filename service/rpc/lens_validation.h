// Checks and translates the fields of Lens and Patch requests. Every error
// is InvalidArgument with a message that names the field, the value and the
// limit. Split in two for the admission: what can be checked before a
// request takes a slot (LensSettingsOf, PatchSettingsOf), and what needs
// the tokenized prompt (ResolveLensPrompt).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/engine/lens_run.h"
#include "service/engine/model_bundle.h"
#include "service/engine/patching_run.h"
#include "service/model/compute_options.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {

// The largest top_k a Lens request may ask for.
inline constexpr int kMaxLensTopK = 1000;

// What a Lens request asks for, checked against the model: at least one of
// logit_lens, attribution and rollout; top_k in 1..kMaxLensTopK and only
// with the lens; the syntax of each positions field (rollout_queries never
// "all") and only for a part that was asked for; target_ids inside the
// vocabulary, not together with target_text; query_block_size >= 0; the
// precision (`fallback` when empty). Positions and a text target wait for
// the prompt (ResolveLensPrompt).
absl::StatusOr<engine::LensSettings> LensSettingsOf(const attnscope::v1::LensRequest& request,
                                                    const engine::ModelBundle& bundle,
                                                    model::Precision fallback);

// The positions of `settings` for a prompt of `tokens` tokens (each inside
// the prompt, sorted, once; the lens's and rollout's "all" as the empty
// list), at most AttributionOptions::max_positions attribution positions
// with one target or one per position, and target_text as exactly one
// token.
absl::Status ResolveLensPrompt(const attnscope::v1::LensRequest& request,
                               const engine::ModelBundle& bundle, int64_t tokens,
                               engine::LensSettings& settings);

// A Patch request's clean (`clean`) or corrupted prompt.
PromptInput PatchPrompt(const attnscope::v1::PatchRequest& request, bool clean);

// What a Patch request asks for: a PatchKind, both prompts set, each target
// as an id inside the vocabulary or as text of exactly one token (not
// both), query_block_size >= 0, the precision (`fallback` when empty). The
// prompts' equal length is the run's check (engine::RunPatching).
absl::StatusOr<engine::PatchSettings> PatchSettingsOf(const attnscope::v1::PatchRequest& request,
                                                      const engine::ModelBundle& bundle,
                                                      model::Precision fallback);

}  // namespace attnscope::rpc
