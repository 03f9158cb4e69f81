#include "service/engine/patching_run.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

// Keeps what a pass gives that patching needs: the last position's final
// hidden state (its logits are read out from it: one row through the head,
// not T), and when asked every layer's head values or the residual stream
// entering every layer.
class PassRecorder : public model::ForwardObserver {
 public:
  PassRecorder(int64_t num_layers, bool head_values, bool residual)
      : head_values_(head_values), residual_(residual) {
    mix_.resize(static_cast<size_t>(num_layers));
    states_.resize(static_cast<size_t>(num_layers));
  }

  model::ObserverNeeds Needs() const override {
    model::ObserverNeeds needs;
    needs.sublayer_writes = head_values_;
    needs.hidden_states = true;
    return needs;
  }
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override {
    if (sequence != 0 || state < 0) return;
    if (state == static_cast<int>(states_.size())) {
      last_state_.assign(x + (num_tokens - 1) * width, x + num_tokens * width);
      return;
    }
    if (residual_ && state < static_cast<int>(states_.size())) {
      states_[static_cast<size_t>(state)].assign(x, x + num_tokens * width);
    }
  }
  void OnSublayerWrites(const model::SublayerWrites& w) override {
    if (w.sequence != 0 || w.layer < 0 || w.layer >= static_cast<int>(mix_.size())) return;
    head_dim_ = w.head_dim;
    mix_[static_cast<size_t>(w.layer)].assign(
        w.head_mix, w.head_mix + w.num_tokens * w.num_heads * w.head_dim);
  }

  // The last position's logits, read out from its final hidden state.
  absl::StatusOr<std::vector<float>> LastLogits(const model::LanguageModel& lm,
                                                model::Precision precision) const {
    const model::ModelConfig& config = lm.config();
    std::vector<float> z(static_cast<size_t>(config.vocab_size));
    ATTNSCOPE_RETURN_IF_ERROR(
        lm.HiddenStateLogits(config.num_layers, last_state_.data(), 1, precision, z.data()));
    return z;
  }
  // Head h's weighted values of `layer`, (T, d).
  std::vector<float> HeadValues(int layer, int64_t head, int64_t heads) const {
    const std::vector<float>& mix = mix_[static_cast<size_t>(layer)];
    const int64_t tokens = static_cast<int64_t>(mix.size()) / (heads * head_dim_);
    std::vector<float> out;
    out.reserve(static_cast<size_t>(tokens * head_dim_));
    for (int64_t t = 0; t < tokens; ++t) {
      const float* row = mix.data() + (t * heads + head) * head_dim_;
      out.insert(out.end(), row, row + head_dim_);
    }
    return out;
  }
  // The residual stream entering `layer`, (T, D).
  const std::vector<float>& State(int layer) const { return states_[static_cast<size_t>(layer)]; }
  // The residual stream entering `layer` at `position`, (D).
  std::vector<float> ResidualRow(int layer, int64_t position, int64_t width) const {
    const float* row = states_[static_cast<size_t>(layer)].data() + position * width;
    return std::vector<float>(row, row + width);
  }

 private:
  bool head_values_, residual_;
  int64_t head_dim_ = 0;
  std::vector<std::vector<float>> mix_, states_;
  std::vector<float> last_state_;
};

int64_t TopId(const std::vector<float>& z) {
  int64_t top = 0;
  for (size_t v = 1; v < z.size(); ++v) {
    if (z[v] > z[static_cast<size_t>(top)]) top = static_cast<int64_t>(v);
  }
  return top;
}

std::string Readable(const ModelBundle& bundle, int64_t id) {
  if (bundle.tokenizer == nullptr) return absl::StrCat("#", id);
  absl::StatusOr<std::string> bytes = bundle.tokenizer->TokenBytes(id);
  return bytes.ok() ? analysis::ReadableBytes(*bytes) : absl::StrCat("#", id);
}

}  // namespace

absl::StatusOr<PatchRun> RunPatching(const ModelBundle& bundle, const Prompt& clean,
                                     const Prompt& corrupted, const PatchSettings& settings) {
  const model::ModelConfig& config = bundle.config();
  const model::LanguageModel& lm = *bundle.model;
  const auto tokens = static_cast<int64_t>(clean.ids.size());
  if (tokens != static_cast<int64_t>(corrupted.ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the clean prompt has ", tokens, " tokens and the corrupted one ", corrupted.ids.size(),
        "; activation patching needs prompts of the same token length"));
  }
  for (int64_t id : {settings.token_a, settings.token_b}) {
    if (id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target id ", id, " is outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  const bool heads = settings.what == PatchTarget::kHeads;
  const auto start = std::chrono::steady_clock::now();
  model::ForwardOptions forward;
  forward.query_block_size = settings.query_block_size;
  forward.precision = settings.precision.value_or(model::Precision::kFloat32);
  forward.should_stop = settings.should_stop;

  PassRecorder clean_run(config.num_layers, heads, !heads);
  ATTNSCOPE_RETURN_IF_ERROR(lm.Forward({clean.ids}, forward, {&clean_run}));
  const bool reuse_prefix =
      settings.reuse_prefix && config.num_layers * tokens * config.hidden_size *
                                       static_cast<int64_t>(sizeof(float)) <=
                                   kMaxPrefixStateBytes;
  PassRecorder corrupted_run(config.num_layers, false, reuse_prefix);
  ATTNSCOPE_RETURN_IF_ERROR(lm.Forward({corrupted.ids}, forward, {&corrupted_run}));

  ATTNSCOPE_ASSIGN_OR_RETURN(const std::vector<float> clean_logits,
                             clean_run.LastLogits(lm, forward.precision));
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::vector<float> corrupted_logits,
                             corrupted_run.LastLogits(lm, forward.precision));
  PatchRun run;
  run.what = settings.what;
  run.num_tokens = tokens;
  run.token_a = settings.token_a >= 0 ? settings.token_a : TopId(clean_logits);
  run.token_b = settings.token_b >= 0 ? settings.token_b : TopId(corrupted_logits);
  run.text_a = Readable(bundle, run.token_a);
  run.text_b = Readable(bundle, run.token_b);
  auto metric = [&run](const std::vector<float>& z) {
    return static_cast<double>(z[static_cast<size_t>(run.token_a)]) -
           static_cast<double>(z[static_cast<size_t>(run.token_b)]);
  };
  run.clean_metric = metric(clean_logits);
  run.corrupted_metric = metric(corrupted_logits);
  const double span = run.clean_metric - run.corrupted_metric;
  if (!(std::fabs(span) > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logit(", run.text_a, ") - logit(", run.text_b, ") is ", run.clean_metric,
        " on the clean prompt and ", run.corrupted_metric,
        " on the corrupted one: nothing to recover; choose targets the prompts disagree on"));
  }
  if (settings.on_baseline) settings.on_baseline(run);
  const int64_t rows = config.num_layers, columns = heads ? config.num_heads : tokens;
  const int64_t total = rows * columns;
  run.metric.assign(static_cast<size_t>(rows), std::vector<double>(static_cast<size_t>(columns)));
  run.recovery = run.metric;
  for (int64_t l = 0; l < rows; ++l) {
    for (int64_t c = 0; c < columns; ++c) {
      model::ActivationPatch patch;
      patch.layer = static_cast<int>(l);
      if (heads) {
        patch.kind = model::ActivationPatch::Kind::kHeadOutput;
        patch.head = c;
        patch.values = clean_run.HeadValues(patch.layer, c, config.num_heads);
      } else {
        patch.kind = model::ActivationPatch::Kind::kResidual;
        patch.position = c;
        patch.values = clean_run.ResidualRow(patch.layer, c, config.hidden_size);
      }
      forward.patches = {std::move(patch)};
      if (reuse_prefix) {
        const std::vector<float>& state = corrupted_run.State(static_cast<int>(l));
        forward.resume = {static_cast<int>(l), state.data(), static_cast<int64_t>(state.size())};
      }
      PassRecorder patched(config.num_layers, false, false);
      ATTNSCOPE_RETURN_IF_ERROR(lm.Forward({corrupted.ids}, forward, {&patched}));
      ATTNSCOPE_ASSIGN_OR_RETURN(const std::vector<float> logits,
                                 patched.LastLogits(lm, forward.precision));
      PatchStep step;
      step.layer = l;
      step.column = c;
      step.metric = metric(logits);
      step.recovery = (step.metric - run.corrupted_metric) / span;
      step.done = ++run.passes;
      step.total = total;
      run.metric[static_cast<size_t>(l)][static_cast<size_t>(c)] = step.metric;
      run.recovery[static_cast<size_t>(l)][static_cast<size_t>(c)] = step.recovery;
      if (settings.progress) settings.progress(step);
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace attnscope::engine
