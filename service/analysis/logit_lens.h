// The logit lens (service/analysis/definitions.md, "Logit lens"): every hidden
// state X[s], s = 0..L, read out through the model's final norm and head, at
// chosen positions. Per (state, position): the top-k tokens with their
// probabilities, the probability and rank of the prompt's actual next token,
// and the entropy. Streamed per state in bounded memory: the rows of the
// chosen positions go through the read-out `chunk_rows` at a time, and only
// the top-k and the scalars are kept, never a (T, V) matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/analysis/prompt_stats.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// Logits (rows, V) of `rows` rows x (rows, width) of hidden state `state`
// (LanguageModel::HiddenStateLogits bound to a model and a precision).
using LensReadOut = std::function<absl::Status(int state, const float* x, int64_t rows,
                                               float* logits)>;

struct LensOptions {
  // Positions read out, ascending, each in [0, T); empty: every position.
  std::vector<int64_t> positions;
  // The prompt's token ids ([T]), for the next token's probability and rank;
  // empty: not reported (NaN and -1).
  std::vector<int64_t> input_ids;
  int64_t top_k = 5;  // tokens kept per (state, position), 0..V
  // Rows read out at once: the extra memory is 4 * chunk_rows * (V + D)
  // bytes. The results do not depend on it.
  int64_t chunk_rows = 256;
};

// One (state, position) of the lens.
struct LensCell {
  std::vector<Prediction> top;  // most likely first; ties: lower id first
  // p(x_{i+1}) and its rank (0 = the most likely token; ties: lower id
  // first); NaN and -1 at the last position or without input ids.
  double next_p = 0.0;
  int64_t next_rank = -1;
  double entropy = 0.0;  // nats
};

struct LogitLens {
  int64_t num_tokens = 0;          // T
  int64_t vocab = 0;               // V
  std::vector<int64_t> positions;  // the positions read out
  // cells[s][k]: state s (0..L), positions[k].
  std::vector<std::vector<LensCell>> cells;
};

// The numbers of one row of logits z[0..vocab): top_k, entropy and, for
// 0 <= next < vocab, the probability and rank of `next`. log-softmax with
// sums in double.
LensCell LensRow(const float* z, int64_t vocab, int64_t top_k, int64_t next);

class LogitLensObserver : public model::ForwardObserver {
 public:
  // Observes sequence 0 of the batch of a model with `num_states` = L + 1
  // hidden states and `vocab` = V; `read_out` is called on the runtime's
  // thread while the pass runs.
  LogitLensObserver(LensOptions options, int64_t num_states, int64_t vocab, LensReadOut read_out);

  model::ObserverNeeds Needs() const override;
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;

  // Called on the runtime's thread as soon as state s's cells are read out
  // (in lens positions' order); the listener may change them (name their
  // tokens) before Finish hands them over.
  using StateListener = std::function<void(int state, std::vector<LensCell>& cells)>;
  void SetStateListener(StateListener listener) { listener_ = std::move(listener); }

  // The first error so far (a position out of range, a failed read-out).
  const absl::Status& status() const { return status_; }
  // The lens of every state; the first error, or FailedPrecondition when a
  // state never arrived.
  absl::StatusOr<LogitLens> Finish();

 private:
  void ReadState(int state, const float* x, int64_t width);

  LensOptions options_;
  int64_t num_states_;
  int64_t vocab_;
  LensReadOut read_out_;
  StateListener listener_;
  LogitLens lens_;
  std::vector<bool> seen_;
  absl::Status status_;
};

}  // namespace attnscope::analysis
