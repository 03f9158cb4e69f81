// PromptAnalyzer: a ForwardObserver that computes every statistic of
// service/analysis/definitions.md for one sequence while the forward pass runs, in memory
// O(L*H + (L+1)*T) (never the L x H x T x T attention weights).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/analysis/head_stats.h"
#include "service/analysis/prompt_stats.h"
#include "service/analysis/token_stats.h"
#include "service/model/forward_observer.h"

namespace attnscope::analysis {

// Told by a PromptAnalyzer as soon as it has taken in a layer, so that a
// caller streaming per-layer results reuses the analyzer's sums instead of
// computing them a second time.
class LayerListener {
 public:
  virtual ~LayerListener() = default;
  // Hidden state layer + 1 (after layer `layer`) has arrived. `heads` holds
  // the per-head numbers of layers 0..layer, the very values the final
  // PromptStats will hold; `norms` the token norms of state layer + 1 ([T]).
  virtual void OnLayerDone(int layer, const HeadStats& heads,
                           const std::vector<double>& norms) = 0;
};

// What a caller chooses of the statistics: carried unchanged from the
// command line or a request (engine::AnalysisSettings) to the analyzer
// (AnalysisOptions), both of which are these settings and more.
struct AnalyzerSettings {
  // Sink threshold on the z-score.
  double threshold = 6.0;
  // Sink-epsilon's cut on the first-token importance (PromptStats::sink_eps).
  double sink_epsilon = 0.3;
  // The most likely next tokens reported per position (0: none).
  int64_t top_k = 5;
  // Told after each layer (not owned; may be null).
  LayerListener* layer_listener = nullptr;
};

// The settings and what the engine works out for one prompt.
struct AnalysisOptions : AnalyzerSettings {
  // Structural positions (see structural.h); entries outside [0, T) are
  // ignored. Taken as given: position 0 is only structural if listed.
  std::vector<int64_t> structural = {0};
  // Ask the runtime for value norms and report the value-weighted share.
  bool want_value_norms = false;
  // > 0: also report the induction score for a probe of T = 2n+1 tokens
  // (Finish fails if T differs).
  int64_t induction_n = 0;
  // The sequence's token ids ([T]); when given, the surprisal of each actual
  // next token is reported. Empty: not reported.
  std::vector<int64_t> input_ids;
  // Take each head of an attention block as the runtime computes it, on the
  // thread that computed it (Needs().attention_by_head), while it is still
  // in that core's cache. false: whole blocks after the kernel (the same
  // numbers, bit for bit; for comparisons).
  bool heads_as_computed = true;
};

class PromptAnalyzer : public model::ForwardObserver {
 public:
  // Observes the sequence with index `sequence` of the batch; events of other
  // sequences are ignored.
  explicit PromptAnalyzer(AnalysisOptions options, int sequence = 0);

  model::ObserverNeeds Needs() const override;
  // Starts (or restarts) the analysis of a sequence of `num_tokens` tokens
  // (1..2^24; Finish reports anything else).
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;
  void OnAttention(const model::AttentionBlock& block) override;
  // Takes each head as the runtime computes it (Needs().attention_by_head):
  // OnAttentionStart validates the block, OnAttentionHead (on any thread,
  // several at once) adds one head's rows, OnAttention ends the block.
  void OnAttentionStart(const model::AttentionBlock& block) override;
  void OnAttentionHead(const model::AttentionBlock& block, int64_t head) override;
  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override;
  // Takes the logits in blocks of rows (Needs().logits_in_blocks).
  void OnLogitsBlock(int sequence, int64_t row_begin, const float* logits, int64_t rows,
                     int64_t num_tokens, int64_t vocab) override;

  // The statistics once the forward pass is over. InvalidArgument if the
  // events were inconsistent: no OnBegin, a block or state whose shape does
  // not match T, layers or heads that disagree, attention rows of a layer not
  // covered exactly once in order, hidden states other than 0..L, missing
  // logits, missing value norms when requested, or T != 2n+1 with an
  // induction probe. The message names the event and the values.
  absl::StatusOr<PromptStats> Finish() const;

 private:
  absl::Status CheckBlock(const model::AttentionBlock& block) const;
  absl::Status CheckComplete() const;
  void Fail(absl::Status status);
  void AddLogitRows(const float* logits, int64_t row_begin, int64_t rows, int64_t vocab);

  AnalysisOptions options_;
  int sequence_ = 0;
  bool begun_ = false;
  bool open_block_ = false;  // between a valid OnAttentionStart and its OnAttention
  int64_t num_tokens_ = 0;
  int64_t num_heads_ = 0;
  int64_t vocab_ = 0;
  absl::Status error_;
  std::vector<int64_t> rows_done_;                // per layer: next expected query row
  std::vector<std::vector<double>> token_norms_;  // per state: [T]
  bool have_logits_ = false;  // every row of logits seen
  int64_t logit_rows_ = 0;     // rows of logits seen so far
  HeadStatsAccumulator heads_;
  ReceivedAccumulator received_;
  std::vector<double> entropy_nats_;
  std::vector<double> entropy_normalized_;
  std::vector<double> surprisal_;
  std::vector<std::vector<Prediction>> top_;
};

// Full forward-pass tensors of one sequence, row-major float32.
struct ForwardTensors {
  int64_t num_layers = 0;  // L
  int64_t num_heads = 0;   // H
  int64_t num_tokens = 0;  // T
  int64_t width = 0;       // D
  int64_t vocab = 0;       // V
  absl::Span<const float> attentions;     // (L, H, T, T)
  absl::Span<const float> hidden_states;  // (L+1, T, D)
  absl::Span<const float> logits;         // (T, V)
  absl::Span<const float> value_norms;    // (L, H, T); empty when absent
};

// Feeds the tensors through a PromptAnalyzer in the order the runtime uses
// (OnBegin, hidden state 0, then per layer its attention blocks and the next
// hidden state, then the logits) and returns its result. query_block_size > 0
// splits every layer's attention into blocks of that many query rows (the
// last may be shorter); 0 sends one block per layer. InvalidArgument when a
// dimension is < 1 or a span's size does not match the shape, or when value
// norms are requested but absent.
absl::StatusOr<PromptStats> AnalyzeTensors(const ForwardTensors& tensors,
                                           const AnalysisOptions& options,
                                           int64_t query_block_size = 0);

}  // namespace attnscope::analysis
