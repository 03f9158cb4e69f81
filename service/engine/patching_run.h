// Activation patching (service/analysis/definitions.md, "Activation
// patching"): a clean and a corrupted prompt of equal token length; one
// pass of each, then one pass of the corrupted prompt per patched activation
// with the clean run's value put in its place: every head's output (its
// weighted values at every position) per layer x head, or the residual
// stream entering each layer at each position. Reported per patch: the
// metric (the logit difference between two targets at the last position)
// and its normalised recovery.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"

namespace attnscope::engine {

enum class PatchTarget { kHeads, kResidual };

struct PatchSettings {
  PatchTarget what = PatchTarget::kHeads;
  // The metric's two tokens: logit(a) - logit(b) at the last position; -1:
  // a = the clean run's top prediction, b = the corrupted run's.
  int64_t token_a = -1;
  int64_t token_b = -1;
  int64_t query_block_size = 0;
  std::optional<model::Precision> precision;  // unset: float32
  // Each patched pass at layer l starts from the corrupted run's residual
  // stream entering layer l instead of running layers 0..l-1 again (they
  // are unchanged); off, or when the L x T x D residual streams would take
  // more than kMaxPrefixStateBytes, every pass runs from the embeddings.
  bool reuse_prefix = true;
  // Checked before each layer of each pass; true aborts with CancelledError.
  std::function<bool()> should_stop;
  // After the clean and the corrupted pass: the run so far (targets,
  // their names and both metrics; empty grids).
  std::function<void(const struct PatchRun&)> on_baseline;
  // After each patched pass, with its cell of the grids.
  std::function<void(const struct PatchStep&)> progress;
};

struct PatchStep {
  int64_t layer = 0;
  int64_t column = 0;  // the head (kHeads) or the position (kResidual)
  double metric = 0;
  double recovery = 0;
  int64_t done = 0;   // patched passes so far, this one included
  int64_t total = 0;  // layers x columns
};

struct PatchRun {
  PatchTarget what = PatchTarget::kHeads;
  int64_t num_tokens = 0;
  int64_t token_a = 0, token_b = 0;
  std::string text_a, text_b;  // readable tokens
  double clean_metric = 0;
  double corrupted_metric = 0;
  // [layer][head] (kHeads) or [layer][position] (kResidual): the metric with
  // that activation patched, and (patched - corrupted) / (clean - corrupted).
  std::vector<std::vector<double>> metric;
  std::vector<std::vector<double>> recovery;
  int64_t passes = 0;
  double seconds = 0;
};

inline constexpr int64_t kMaxPrefixStateBytes = int64_t{1} << 30;

// InvalidArgument for prompts of different lengths, a target outside the
// vocabulary, or a metric equal on both prompts (nothing to recover);
// Unimplemented for a model whose attention output cannot be recorded (a
// post-norm stack); the errors of LanguageModel::Forward.
absl::StatusOr<PatchRun> RunPatching(const ModelBundle& bundle, const Prompt& clean,
                                     const Prompt& corrupted, const PatchSettings& settings);

}  // namespace attnscope::engine
