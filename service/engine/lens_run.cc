#include "service/engine/lens_run.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

// The token's bytes with byte fragments as <0xNN>, or "#id" without a
// tokenizer (as analyze's top predictions).
std::string TokenName(const ModelBundle& bundle, int64_t id) {
  absl::StatusOr<std::string> bytes = bundle.tokenizer != nullptr
                                          ? bundle.tokenizer->TokenBytes(id)
                                          : absl::StatusOr<std::string>(absl::StrCat("#", id));
  return bytes.ok() ? analysis::ReadableBytes(*bytes) : absl::StrCat("#", id);
}

void NameTokens(const ModelBundle& bundle, std::vector<analysis::LensCell>& cells) {
  for (analysis::LensCell& cell : cells) {
    for (analysis::Prediction& p : cell.top) p.token = TokenName(bundle, p.id);
  }
}

// The model's calls the attribution makes, in the pass's precision.
analysis::AttributionModel AttributionModelOf(const model::LanguageModel& lm,
                                              model::Precision precision) {
  analysis::AttributionModel a;
  a.head_writes = [&lm, precision](int layer, const float* mix, const float* raw, int64_t rows,
                                   float* out) {
    return lm.HeadWrites(layer, mix, raw, rows, precision, out);
  };
  a.readout_directions = [&lm](const float* residual, const int64_t* targets, int64_t rows,
                               float* direction, double* offset) {
    return lm.ReadoutDirections(residual, targets, rows, direction, offset);
  };
  const int last = static_cast<int>(lm.config().num_layers);
  a.last_state_logits = [&lm, precision, last](const float* x, int64_t rows, float* logits) {
    return lm.HiddenStateLogits(last, x, rows, precision, logits);
  };
  a.num_layers = lm.config().num_layers;
  a.num_heads = lm.config().num_heads;
  a.vocab = lm.config().vocab_size;
  return a;
}

absl::Status CheckRolloutLength(const LensSettings& settings, int64_t tokens) {
  const int64_t limit = settings.rollout_options.max_tokens;
  if (!settings.rollout || tokens <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "attention rollout keeps two T x T float32 matrices: the prompt's ", tokens,
      " tokens need ", analysis::RolloutBytes(tokens) >> 20, " MiB; the limit is ", limit,
      " tokens (", analysis::RolloutBytes(limit) >> 20, " MiB); shorten the prompt"));
}

}  // namespace

absl::StatusOr<LensRun> RunLens(const ModelBundle& bundle, const Prompt& prompt,
                                const LensSettings& settings) {
  ATTNSCOPE_RETURN_IF_ERROR(CheckRolloutLength(settings, static_cast<int64_t>(prompt.ids.size())));
  const model::ModelConfig& config = bundle.config();
  const model::Precision precision = settings.precision.value_or(model::Precision::kFloat32);
  const model::LanguageModel& lm = *bundle.model;
  analysis::LensOptions lens_options = settings.lens_options;
  lens_options.input_ids = prompt.ids;
  analysis::LogitLensObserver lens(
      lens_options, config.num_layers + 1, config.vocab_size,
      [&lm, precision](int state, const float* x, int64_t rows, float* logits) {
        return lm.HiddenStateLogits(state, x, rows, precision, logits);
      });
  lens.SetStateListener([&](int state, std::vector<analysis::LensCell>& cells) {
    NameTokens(bundle, cells);
    if (settings.on_lens_state) settings.on_lens_state(state, cells);
  });
  analysis::AttributionOptions attribution_options = settings.attribution_options;
  attribution_options.input_ids = prompt.ids;
  analysis::LogitAttributionObserver attribution(attribution_options,
                                                 AttributionModelOf(lm, precision));
  analysis::AttentionRolloutObserver rollout(settings.rollout_options, config.num_layers);
  std::vector<model::ForwardObserver*> observers;
  if (settings.lens) observers.push_back(&lens);
  if (settings.attribution) observers.push_back(&attribution);
  if (settings.rollout) observers.push_back(&rollout);

  model::ForwardOptions forward;
  forward.query_block_size = settings.query_block_size;
  forward.precision = precision;
  // An observer that failed (a position outside the prompt) stops the pass.
  forward.should_stop = [&] {
    return (settings.should_stop && settings.should_stop()) || !lens.status().ok() ||
           !attribution.status().ok() || !rollout.status().ok();
  };
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = lm.Forward({prompt.ids}, forward, observers);
  LensRun run;
  if (settings.lens) {
    ATTNSCOPE_RETURN_IF_ERROR(lens.status());
  }
  if (settings.attribution) {
    ATTNSCOPE_RETURN_IF_ERROR(attribution.status());
  }
  if (settings.rollout) {
    ATTNSCOPE_RETURN_IF_ERROR(rollout.status());
  }
  ATTNSCOPE_RETURN_IF_ERROR(status);
  run.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (settings.lens) {
    ATTNSCOPE_ASSIGN_OR_RETURN(run.lens, lens.Finish());
  }
  if (settings.attribution) {
    ATTNSCOPE_ASSIGN_OR_RETURN(run.attribution, attribution.Finish());
    for (const analysis::PositionAttribution& a : run.attribution.positions) {
      run.target_tokens.push_back(TokenName(bundle, a.target));
    }
  }
  if (settings.rollout) {
    ATTNSCOPE_ASSIGN_OR_RETURN(run.rollout, rollout.Finish());
  }
  return run;
}

}  // namespace attnscope::engine
