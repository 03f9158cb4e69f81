#include "service/analysis/logit_attribution.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace attnscope::analysis {
namespace {

double Dot(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

// The id with the largest logit (ties: the lower id) and log-sum-exp.
std::pair<int64_t, double> TopAndLogSumExp(const float* z, int64_t vocab) {
  int64_t top = 0;
  for (int64_t v = 1; v < vocab; ++v) {
    if (z[v] > z[top]) top = v;
  }
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(z[v]) - z[top]);
  return {top, static_cast<double>(z[top]) + std::log(sum)};
}

}  // namespace

const char* TargetSourceName(TargetSource source) {
  switch (source) {
    case TargetSource::kGiven:
      return "given";
    case TargetSource::kNextToken:
      return "next_token";
    case TargetSource::kTopPrediction:
      return "top_prediction";
  }
  return "given";
}

LogitAttributionObserver::LogitAttributionObserver(AttributionOptions options,
                                                   AttributionModel model)
    : options_(std::move(options)), model_(std::move(model)) {}

model::ObserverNeeds LogitAttributionObserver::Needs() const {
  model::ObserverNeeds needs;
  needs.hidden_states = true;
  needs.sublayer_writes = true;
  return needs;
}

void LogitAttributionObserver::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

void LogitAttributionObserver::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != 0 || !status_.ok()) return;
  num_tokens_ = num_tokens;
  positions_ = options_.positions.empty() ? std::vector<int64_t>{num_tokens - 1}
                                          : options_.positions;
  for (int64_t p : positions_) {
    if (p < 0 || p >= num_tokens) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("position ", p, " is outside the prompt's ", num_tokens, " tokens")));
    }
  }
  const size_t given = options_.targets.size();
  if (given > 1 && given != positions_.size()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        given, " targets for ", positions_.size(),
        " positions: give one target, or one per position")));
  }
  for (int64_t t : options_.targets) {
    if (t < 0 || t >= model_.vocab) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("target id ", t, " is outside the vocabulary [0, ", model_.vocab, ")")));
    }
  }
  // Ascending positions, each once, each with its own target.
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t k = 0; k < positions_.size(); ++k) {
    pairs.emplace_back(positions_[k], given == 0 ? -1 : options_.targets[given == 1 ? 0 : k]);
  }
  std::sort(pairs.begin(), pairs.end());
  for (size_t k = 1; k < pairs.size(); ++k) {
    if (pairs[k].first == pairs[k - 1].first) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("position ", pairs[k].first, " is given twice")));
    }
  }
  positions_.clear();
  targets_.clear();
  for (const auto& [p, t] : pairs) {
    positions_.push_back(p);
    targets_.push_back(t);
  }
  const auto count = static_cast<int64_t>(positions_.size());
  if (count > options_.max_positions) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        count, " positions: direct logit attribution keeps every layer's writes at each "
        "position until the pass ends; ask for at most ", options_.max_positions)));
  }
  const auto layers = static_cast<size_t>(model_.num_layers);
  head_mix_.assign(layers, {});
  attention_raw_.assign(layers, {});
  attention_.assign(layers, {});
  mlp_.assign(layers, {});
  embedding_.clear();
  residual_.clear();
  layers_seen_ = 0;
  done_ = false;
}

void LogitAttributionObserver::Gather(const float* x, int64_t width,
                                      std::vector<float>& out) const {
  for (int64_t p : positions_) out.insert(out.end(), x + p * width, x + (p + 1) * width);
}

void LogitAttributionObserver::OnHiddenState(int sequence, int state, const float* x,
                                             int64_t num_tokens, int64_t width) {
  if (sequence != 0 || !status_.ok() || num_tokens != num_tokens_) return;
  if (state == 0) {
    width_ = width;
    Gather(x, width, embedding_);
    residual_.assign(embedding_.begin(), embedding_.end());
    return;
  }
  if (state != model_.num_layers) return;
  if (layers_seen_ != model_.num_layers) {
    return Fail(absl::InternalError(absl::StrCat("the pass published ", layers_seen_, " of ",
                                                 model_.num_layers, " layers' writes")));
  }
  Attribute(x, width);
}

void LogitAttributionObserver::OnSublayerWrites(const model::SublayerWrites& w) {
  if (w.sequence != 0 || !status_.ok()) return;
  if (w.layer != layers_seen_ || w.num_tokens != num_tokens_ || w.width != width_ ||
      w.num_heads != model_.num_heads) {
    return Fail(absl::InternalError(absl::StrCat(
        "layer ", w.layer, "'s writes (", w.num_tokens, " x ", w.width, ", ", w.num_heads,
        " heads) after ", layers_seen_, " layers of ", num_tokens_, " x ", width_)));
  }
  const auto l = static_cast<size_t>(w.layer);
  mix_width_ = w.num_heads * w.head_dim;
  Gather(w.head_mix, mix_width_, head_mix_[l]);
  Gather(w.attention_raw, width_, attention_raw_[l]);
  Gather(w.attention, width_, attention_[l]);
  Gather(w.mlp, width_, mlp_[l]);
  for (size_t i = 0; i < residual_.size(); ++i) {
    residual_[i] += static_cast<double>(attention_[l][i]) + static_cast<double>(mlp_[l][i]);
  }
  ++layers_seen_;
}

void LogitAttributionObserver::Attribute(const float* last_state, int64_t width) {
  const auto count = static_cast<int64_t>(positions_.size());
  const int64_t vocab = model_.vocab, d = width_, heads = model_.num_heads;
  std::vector<float> rows;
  Gather(last_state, width, rows);
  std::vector<float> logits(static_cast<size_t>(count * vocab));
  if (absl::Status s = model_.last_state_logits(rows.data(), count, logits.data()); !s.ok()) {
    return Fail(std::move(s));
  }
  result_ = LogitAttribution();
  result_.num_tokens = num_tokens_;
  result_.num_layers = model_.num_layers;
  result_.num_heads = heads;
  std::vector<int64_t> targets(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    PositionAttribution a;
    a.position = positions_[static_cast<size_t>(k)];
    const float* z = logits.data() + k * vocab;
    const auto [top, log_sum] = TopAndLogSumExp(z, vocab);
    const bool has_next = a.position + 1 < static_cast<int64_t>(options_.input_ids.size());
    if (targets_[static_cast<size_t>(k)] >= 0) {
      a.target = targets_[static_cast<size_t>(k)];
      a.source = TargetSource::kGiven;
    } else if (has_next) {
      a.target = options_.input_ids[static_cast<size_t>(a.position + 1)];
      a.source = TargetSource::kNextToken;
    } else {
      a.target = top;
      a.source = TargetSource::kTopPrediction;
    }
    if (a.target < 0 || a.target >= vocab) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "the next token at position ", a.position, " is id ", a.target,
          ", outside the vocabulary [0, ", vocab, ")")));
    }
    a.logit = z[a.target];
    a.probability = std::exp(static_cast<double>(z[a.target]) - log_sum);
    targets[static_cast<size_t>(k)] = a.target;
    result_.positions.push_back(std::move(a));
  }
  std::vector<float> residual(residual_.begin(), residual_.end());
  std::vector<float> direction(static_cast<size_t>(count * d));
  std::vector<double> offset(static_cast<size_t>(count));
  if (absl::Status s = model_.readout_directions(residual.data(), targets.data(), count,
                                                 direction.data(), offset.data());
      !s.ok()) {
    return Fail(std::move(s));
  }
  std::vector<float> writes(static_cast<size_t>(count * heads * d));
  for (int64_t k = 0; k < count; ++k) {
    PositionAttribution& a = result_.positions[static_cast<size_t>(k)];
    const float* u = direction.data() + k * d;
    a.embedding = Dot(embedding_.data() + k * d, u, d);
    a.offset = offset[static_cast<size_t>(k)];
    a.heads.assign(static_cast<size_t>(model_.num_layers), std::vector<double>());
    a.attention_bias.assign(static_cast<size_t>(model_.num_layers), 0.0);
    a.mlp.assign(static_cast<size_t>(model_.num_layers), 0.0);
  }
  for (int64_t layer = 0; layer < model_.num_layers; ++layer) {
    const auto l = static_cast<size_t>(layer);
    if (absl::Status s = model_.head_writes(static_cast<int>(layer), head_mix_[l].data(),
                                            attention_raw_[l].data(), count, writes.data());
        !s.ok()) {
      return Fail(std::move(s));
    }
    for (int64_t k = 0; k < count; ++k) {
      PositionAttribution& a = result_.positions[static_cast<size_t>(k)];
      const float* u = direction.data() + k * d;
      std::vector<double>& per_head = a.heads[l];
      double sum = 0.0;
      for (int64_t h = 0; h < heads; ++h) {
        per_head.push_back(Dot(writes.data() + (k * heads + h) * d, u, d));
        sum += per_head.back();
      }
      a.attention_bias[l] = Dot(attention_[l].data() + k * d, u, d) - sum;
      a.mlp[l] = Dot(mlp_[l].data() + k * d, u, d);
    }
    std::vector<float>().swap(head_mix_[l]);
    std::vector<float>().swap(attention_raw_[l]);
  }
  for (PositionAttribution& a : result_.positions) {
    a.total = a.embedding + a.offset;
    for (size_t l = 0; l < a.heads.size(); ++l) {
      for (double c : a.heads[l]) a.total += c;
      a.total += a.attention_bias[l] + a.mlp[l];
    }
  }
  attention_.clear();
  mlp_.clear();
  done_ = true;
}

absl::StatusOr<LogitAttribution> LogitAttributionObserver::Finish() {
  if (!status_.ok()) return status_;
  if (!done_) return absl::FailedPreconditionError("the forward pass did not reach its last state");
  return std::move(result_);
}

}  // namespace attnscope::analysis
