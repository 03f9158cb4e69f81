// The logit lens, direct logit attribution and attention rollout of one
// prompt: one forward pass with LogitLensObserver, LogitAttributionObserver
// and/or AttentionRolloutObserver attached (`attnscope lens`, `attnscope
// dla`; service/analysis/definitions.md "Logit lens", "Direct logit
// attribution" and "Attention rollout").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/analysis/attention_rollout.h"
#include "service/analysis/logit_attribution.h"
#include "service/analysis/logit_lens.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"

namespace attnscope::engine {

struct LensSettings {
  bool lens = true;  // the logit lens (lens_options; input_ids come from the prompt)
  analysis::LensOptions lens_options;
  // Direct logit attribution (attribution_options; input_ids come from the
  // prompt); the targets' and the positions' token names are filled in.
  bool attribution = false;
  analysis::AttributionOptions attribution_options;
  bool rollout = false;  // attention rollout (rollout_options)
  analysis::RolloutOptions rollout_options;
  // Query rows per attention block (model::ForwardOptions); 0: automatic.
  int64_t query_block_size = 0;
  // The matrix products' precision, the read-out's included; unset: float32.
  std::optional<model::Precision> precision;
  // Checked before each layer; true aborts with CancelledError.
  std::function<bool()> should_stop;
  // The logit lens of state s (0..L), its tokens named, as soon as it is
  // read out (on the runtime's thread, in state order); the run's lens
  // holds the same cells at the end.
  std::function<void(int state, const std::vector<analysis::LensCell>& cells)> on_lens_state;
};

struct LensRun {
  std::optional<analysis::LogitLens> lens;  // when settings.lens
  // When settings.attribution (no positions otherwise). Not an optional:
  // GCC 12 under -fsanitize=thread warns maybe-uninitialized on one.
  analysis::LogitAttribution attribution;
  std::vector<std::string> target_tokens;  // attribution: each position's target, readable
  std::optional<analysis::Rollout> rollout;  // when settings.rollout
  double forward_seconds = 0;
};

// Runs the pass. Errors: those of LanguageModel::Forward, of the observers
// (a position or query outside the prompt: InvalidArgument), and
// InvalidArgument before the pass for a rollout of a prompt longer than
// rollout_options.max_tokens, naming the memory it would take.
absl::StatusOr<LensRun> RunLens(const ModelBundle& bundle, const Prompt& prompt,
                                const LensSettings& settings);

}  // namespace attnscope::engine
