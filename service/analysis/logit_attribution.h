// Direct logit attribution (service/analysis/definitions.md, "Direct logit
// attribution"): at chosen positions, how much each part of the model writes
// the logit of a target token directly: the embedding, every head of every
// layer, each layer's attention bias and MLP, read out through the final
// norm with its scale frozen at the final residual stream. The parts sum to
// the target's logit (before Gemma-2's soft-capping) less `offset`.
//
// Memory: the chosen rows of each layer's head values and writes are kept
// until the pass ends (the read-out direction needs the final residual):
// about 4 (4 L + 3) P D bytes for P positions (H d = D), never a (T, D)
// tensor per layer.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// LanguageModel::HeadWrites and ReadoutDirections bound to a model (and a
// precision), and LanguageModel::HiddenStateLogits for the last state.
struct AttributionModel {
  std::function<absl::Status(int layer, const float* head_mix, const float* attention_raw,
                             int64_t rows, float* out)>
      head_writes;
  std::function<absl::Status(const float* residual, const int64_t* targets, int64_t rows,
                             float* direction, double* offset)>
      readout_directions;
  std::function<absl::Status(const float* x, int64_t rows, float* logits)> last_state_logits;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t vocab = 0;
};

struct AttributionOptions {
  // Positions, each in [0, T); empty: the last.
  std::vector<int64_t> positions;
  // One target id per position, or one for every position; empty: each
  // position's next prompt token, and the model's top prediction at the
  // last position.
  std::vector<int64_t> targets;
  std::vector<int64_t> input_ids;  // the prompt ([T]), for the default targets
  // At most this many positions (the memory above).
  int64_t max_positions = 64;
};

enum class TargetSource { kGiven, kNextToken, kTopPrediction };

// One position's attribution; contributions are logit units (nats of the
// target's unnormalised log-probability).
struct PositionAttribution {
  int64_t position = 0;
  int64_t target = 0;
  TargetSource source = TargetSource::kGiven;
  double embedding = 0.0;                   // X[0]'s row
  std::vector<std::vector<double>> heads;   // [layer][head]
  std::vector<double> attention_bias;       // [layer]: the attention's write less its heads
  std::vector<double> mlp;                  // [layer]
  double offset = 0.0;  // the final norm's bias read out by the head
  // The sum of every contribution plus offset: the target's logit before
  // soft-capping as the parts give it.
  double total = 0.0;
  // The model's own logit for the target (after soft-capping) and its
  // probability, from the pass's last hidden state.
  double logit = 0.0;
  double probability = 0.0;
};

struct LogitAttribution {
  int64_t num_tokens = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  std::vector<PositionAttribution> positions;
};

const char* TargetSourceName(TargetSource source);

class LogitAttributionObserver : public model::ForwardObserver {
 public:
  LogitAttributionObserver(AttributionOptions options, AttributionModel model);

  model::ObserverNeeds Needs() const override;
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;
  void OnSublayerWrites(const model::SublayerWrites& writes) override;

  // The first error so far (a position or target out of range, a failed
  // model call).
  const absl::Status& status() const { return status_; }
  // The first error, or FailedPrecondition when the pass did not end.
  absl::StatusOr<LogitAttribution> Finish();

 private:
  // Rows `positions_` of (T, width) x, appended to `out`.
  void Gather(const float* x, int64_t width, std::vector<float>& out) const;
  void Attribute(const float* last_state, int64_t width);
  void Fail(absl::Status status);

  AttributionOptions options_;
  AttributionModel model_;
  int64_t num_tokens_ = 0;
  int64_t width_ = 0;
  std::vector<int64_t> positions_;  // ascending
  std::vector<int64_t> targets_;    // each position's given target, or -1
  // P rows each: the embedding (D), then per layer the head values
  // (H d), the raw attention output, the attention's and the MLP's writes.
  std::vector<float> embedding_;
  std::vector<std::vector<float>> head_mix_, attention_raw_, attention_, mlp_;
  int64_t mix_width_ = 0;  // H d
  std::vector<double> residual_;  // (P, D): the sum of every write so far
  int layers_seen_ = 0;
  bool done_ = false;
  LogitAttribution result_;
  absl::Status status_;
};

}  // namespace attnscope::analysis
