#include "service/analysis/prompt_analyzer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace attnscope::analysis {
namespace {

// Bounds the per-layer bookkeeping a bogus layer or state index could allocate.
constexpr int64_t kMaxLayers = 1 << 16;
// Bounds the T-length buffers a bogus token count could allocate.
constexpr int64_t kMaxTokens = int64_t{1} << 24;

std::vector<int64_t> SortedInRange(std::vector<int64_t> positions, int64_t num_tokens) {
  positions.erase(std::remove_if(positions.begin(), positions.end(),
                                 [&](int64_t p) { return p < 0 || p >= num_tokens; }),
                  positions.end());
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  return positions;
}

}  // namespace

PromptAnalyzer::PromptAnalyzer(AnalysisOptions options, int sequence)
    : options_(std::move(options)), sequence_(sequence), heads_(options_.induction_n) {}

model::ObserverNeeds PromptAnalyzer::Needs() const {
  model::ObserverNeeds needs;
  needs.attention = true;
  needs.value_norms = options_.want_value_norms;
  needs.hidden_states = true;
  needs.logits = true;
  needs.logits_in_blocks = true;
  needs.attention_by_head = options_.heads_as_computed;
  needs.row_entropy = true;
  return needs;
}

void PromptAnalyzer::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

void PromptAnalyzer::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != sequence_) return;
  begun_ = true;
  open_block_ = false;
  error_ = absl::OkStatus();
  num_tokens_ = num_tokens;
  num_heads_ = 0;
  vocab_ = 0;
  rows_done_.clear();
  token_norms_.clear();
  have_logits_ = false;
  logit_rows_ = 0;
  entropy_nats_.clear();
  entropy_normalized_.clear();
  surprisal_.clear();
  top_.clear();
  if (num_tokens < 1 || num_tokens > kMaxTokens) {
    Fail(absl::InvalidArgumentError(absl::StrCat("OnBegin: num_tokens is ", num_tokens,
                                                 "; need at least 1 and at most ", kMaxTokens)));
    num_tokens_ = 0;
  }
  heads_.Begin(num_tokens_);
  received_.Begin(num_tokens_);
}

void PromptAnalyzer::OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                                   int64_t width) {
  if (sequence != sequence_ || !error_.ok()) return;
  const std::string where = absl::StrCat("OnHiddenState(state ", state, "): ");
  if (!begun_) return Fail(absl::InvalidArgumentError(where + "called before OnBegin"));
  if (num_tokens != num_tokens_ || width < 1 || x == nullptr) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(where, "shape (", num_tokens, ", ", width,
                                                        ") does not match T = ", num_tokens_,
                                                        " with width >= 1, or no data")));
  }
  if (state < 0 || state > kMaxLayers) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(where, "state index outside [0, ", kMaxLayers, "]")));
  }
  const auto s = static_cast<size_t>(state);
  if (token_norms_.size() <= s) token_norms_.resize(s + 1);
  if (!token_norms_[s].empty()) {
    return Fail(absl::InvalidArgumentError(where + "state published twice"));
  }
  token_norms_[s] = RowNorms(x, num_tokens, width);
  if (options_.layer_listener != nullptr && state >= 1) {
    // Finish only divides running sums: cheap next to the layer itself.
    options_.layer_listener->OnLayerDone(
        state - 1, heads_.Finish(state, num_heads_, options_.want_value_norms), token_norms_[s]);
  }
}

absl::Status PromptAnalyzer::CheckBlock(const model::AttentionBlock& b) const {
  const std::string where = absl::StrCat("OnAttention(layer ", b.layer, ", rows [",
                                         b.query_begin, ", ", b.query_end, ")): ");
  if (!begun_) return absl::InvalidArgumentError(where + "called before OnBegin");
  if (b.layer < 0 || b.layer >= kMaxLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "layer outside [0, ", kMaxLayers, ")"));
  }
  if (b.num_heads < 1 || (num_heads_ > 0 && b.num_heads != num_heads_)) {
    return absl::InvalidArgumentError(absl::StrCat(where, "num_heads ", b.num_heads,
                                                   " differs from earlier blocks (",
                                                   num_heads_, ") or is < 1"));
  }
  if (b.num_keys != num_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "num_keys ", b.num_keys, " != T = ", num_tokens_));
  }
  if (b.query_begin < 0 || b.query_end <= b.query_begin || b.query_end > num_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "query rows not a non-empty range within [0, ", num_tokens_, ")"));
  }
  if (b.probs == nullptr) return absl::InvalidArgumentError(where + "probs is null");
  if (options_.want_value_norms && b.value_norms == nullptr) {
    return absl::InvalidArgumentError(where + "value norms were requested but not provided");
  }
  const auto layer = static_cast<size_t>(b.layer);
  const int64_t expected = layer < rows_done_.size() ? rows_done_[layer] : 0;
  if (b.query_begin != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "expected the block to start at row ", expected));
  }
  return absl::OkStatus();
}

void PromptAnalyzer::OnAttentionStart(const model::AttentionBlock& block) {
  if (block.sequence != sequence_ || !error_.ok()) return;
  if (absl::Status status = CheckBlock(block); !status.ok()) return Fail(std::move(status));
  heads_.StartBlock(block, received_.column_sums() != nullptr);
  open_block_ = true;
}

void PromptAnalyzer::OnAttentionHead(const model::AttentionBlock& block, int64_t head) {
  // Only reads what OnAttentionStart set: safe on several threads at once.
  if (block.sequence != sequence_ || !open_block_ || head < 0 || head >= block.num_heads) return;
  heads_.AddHead(block, head, options_.want_value_norms);
}

void PromptAnalyzer::OnAttention(const model::AttentionBlock& block) {
  if (block.sequence != sequence_ || !error_.ok()) return;
  if (block.heads_published && !open_block_) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "OnAttention(layer ", block.layer, ", rows [", block.query_begin, ", ", block.query_end,
        ")): heads published without OnAttentionStart")));
  }
  if (!block.heads_published) {
    if (absl::Status status = CheckBlock(block); !status.ok()) return Fail(std::move(status));
  }
  open_block_ = false;
  num_heads_ = block.num_heads;
  const auto layer = static_cast<size_t>(block.layer);
  if (rows_done_.size() <= layer) rows_done_.resize(layer + 1, 0);
  rows_done_[layer] = block.query_end;
  if (block.heads_published) {
    heads_.EndBlock(block, received_.column_sums());
  } else {
    heads_.AddBlock(block, options_.want_value_norms, received_.column_sums());
  }
}

void PromptAnalyzer::OnLogits(int sequence, const float* logits, int64_t num_tokens,
                              int64_t vocab) {
  if (sequence != sequence_ || !error_.ok()) return;
  if (!begun_) return Fail(absl::InvalidArgumentError("OnLogits: called before OnBegin"));
  if (logit_rows_ > 0) return Fail(absl::InvalidArgumentError("OnLogits: logits published twice"));
  if (num_tokens != num_tokens_ || vocab < 1 || logits == nullptr) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("OnLogits: shape (", num_tokens, ", ", vocab, ") does not match T = ",
                     num_tokens_, " with V >= 1, or no data")));
  }
  AddLogitRows(logits, 0, num_tokens, vocab);
}

void PromptAnalyzer::OnLogitsBlock(int sequence, int64_t row_begin, const float* logits,
                                   int64_t rows, int64_t num_tokens, int64_t vocab) {
  if (sequence != sequence_ || !error_.ok()) return;
  const std::string where =
      absl::StrCat("OnLogitsBlock(rows [", row_begin, ", ", row_begin + rows, ")): ");
  if (!begun_) return Fail(absl::InvalidArgumentError(where + "called before OnBegin"));
  if (num_tokens != num_tokens_ || vocab < 1 || logits == nullptr || rows < 1 ||
      (row_begin > 0 && vocab != vocab_)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        where, "shape (", rows, " of ", num_tokens, ", ", vocab, ") does not match T = ",
        num_tokens_, " with V >= 1 and the V of earlier blocks, or no data")));
  }
  if (row_begin != logit_rows_ || row_begin + rows > num_tokens_) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        where, "expected a block starting at row ", logit_rows_, " within T = ", num_tokens_)));
  }
  AddLogitRows(logits, row_begin, rows, vocab);
}

void PromptAnalyzer::AddLogitRows(const float* logits, int64_t row_begin, int64_t rows,
                                  int64_t vocab) {
  NextTokenOutputs out;
  out.nats = &entropy_nats_;
  out.normalized = &entropy_normalized_;
  out.surprisal = &surprisal_;
  out.top = &top_;
  if (row_begin == 0) {
    vocab_ = vocab;
    SizeNextTokenOutputs(num_tokens_, options_.input_ids, out);
  }
  NextTokenRows(logits, row_begin, rows, num_tokens_, vocab, options_.input_ids, options_.top_k,
                out);
  logit_rows_ = row_begin + rows;
  have_logits_ = logit_rows_ == num_tokens_;
}

absl::Status PromptAnalyzer::CheckComplete() const {
  ATTNSCOPE_RETURN_IF_ERROR(error_);
  if (!begun_) return absl::InvalidArgumentError("Finish: no OnBegin for this sequence");
  const auto num_layers = static_cast<int64_t>(rows_done_.size());
  if (num_layers < 1) return absl::InvalidArgumentError("Finish: no attention was published");
  for (int64_t l = 0; l < num_layers; ++l) {
    if (rows_done_[static_cast<size_t>(l)] != num_tokens_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Finish: layer ", l, " has attention rows [0, ",
                       rows_done_[static_cast<size_t>(l)], ") of T = ", num_tokens_));
    }
  }
  bool states_ok = static_cast<int64_t>(token_norms_.size()) == num_layers + 1;
  for (const auto& norms : token_norms_) states_ok = states_ok && !norms.empty();
  if (!states_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("Finish: expected hidden states 0..", num_layers, " (L = ", num_layers,
                     " layers), got ", token_norms_.size(), " state slots, some missing"));
  }
  if (logit_rows_ == 0) return absl::InvalidArgumentError("Finish: no logits were published");
  if (!have_logits_) {
    return absl::InvalidArgumentError(absl::StrCat("Finish: logits of rows [0, ", logit_rows_,
                                                   ") of T = ", num_tokens_, " were published"));
  }
  const int64_t n = options_.induction_n;
  if (n > 0 && num_tokens_ != 2 * n + 1) {
    return absl::InvalidArgumentError(absl::StrCat("Finish: induction probe with n = ", n,
                                                   " needs T = ", 2 * n + 1, " tokens, got ",
                                                   num_tokens_));
  }
  return absl::OkStatus();
}

absl::StatusOr<PromptStats> PromptAnalyzer::Finish() const {
  ATTNSCOPE_RETURN_IF_ERROR(CheckComplete());
  PromptStats out;
  out.num_layers = static_cast<int64_t>(rows_done_.size());
  out.num_heads = num_heads_;
  out.num_tokens = num_tokens_;
  out.vocab = vocab_;
  HeadStats heads = heads_.Finish(out.num_layers, out.num_heads, options_.want_value_norms);
  out.sink_score = std::move(heads.sink_score);
  out.first_token_mass = std::move(heads.first_token_mass);
  out.first_token_importance = std::move(heads.first_token_importance);
  out.sink_epsilon = options_.sink_epsilon;
  out.sink_eps = SinkEpsilonShare(out.first_token_importance, out.sink_epsilon);
  out.attention_entropy = std::move(heads.attention_entropy);
  out.prev_token_score = std::move(heads.prev_token_score);
  out.value_weighted_raw = std::move(heads.value_weighted_raw);
  out.value_weighted_normalized = std::move(heads.value_weighted_normalized);
  out.induction_score = std::move(heads.induction_score);
  out.back_half_sink_share = BackHalfSinkShare(out.sink_score);

  out.token_norms = token_norms_;
  MassiveStats massive = ComputeMassive(token_norms_);
  out.max_norm = std::move(massive.max_norm);
  out.massive_ratio = massive.ratio;
  out.massive_argmax = massive.argmax;

  out.received = received_.Finish(out.num_layers * out.num_heads);
  out.structural = SortedInRange(options_.structural, num_tokens_);
  out.z = LogMadZ(out.received, out.structural);
  out.threshold = options_.threshold;
  HealthResult health = ContextHealth(out.z, out.structural, options_.threshold);
  out.health = health.health;
  out.sinks = std::move(health.sinks);
  out.num_candidates = health.num_candidates;
  out.next_token_entropy_nats = entropy_nats_;
  out.next_token_entropy_normalized = entropy_normalized_;
  for (int64_t p : out.structural) {
    if (out.z[static_cast<size_t>(p)] > out.threshold) out.expected_sinks.push_back(p);
  }
  out.next_token_surprisal_nats = surprisal_;
  out.top_predictions = top_;
  return out;
}

}  // namespace attnscope::analysis
