#include "service/engine/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/engine/sampling.h"
#include "service/engine/streaming_cache.h"

namespace attnscope::engine {
namespace {

constexpr double kMaxTemperature = 100.0;
constexpr int kMaxAlternatives = 20;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Keeps what decoding needs from one forward pass over the new tokens: the
// last logits row, optionally the entropy of every row (the prefill), and
// optionally A[l, h, last, 0] for every layer and head.
class StepObserver : public model::ForwardObserver {
 public:
  StepObserver(int64_t layers, int64_t heads, bool sinks)
      : layers_(layers), heads_(heads), want_sinks_(sinks) {}

  void set_row_entropies(bool on) { want_row_entropies_ = on; }

  model::ObserverNeeds Needs() const override {
    model::ObserverNeeds needs;
    needs.attention = want_sinks_;
    needs.logits = true;
    return needs;
  }

  void OnBegin(int sequence, int64_t num_tokens) override {
    if (sequence != 0) return;
    tokens_ = num_tokens;
    sinks_.assign(want_sinks_ ? layers_ * heads_ : 0, 0.0);
  }

  // With a cache, query rows count from the first new token, so the last new
  // token is row tokens_ - 1 whatever the past length.
  void OnAttention(const model::AttentionBlock& b) override {
    const int64_t last = tokens_ - 1;
    if (!want_sinks_ || b.sequence != 0 || b.layer < 0 || b.layer >= layers_) return;
    if (last < b.query_begin || last >= b.query_end || b.num_keys < 1) return;
    const int64_t rows = b.query_end - b.query_begin, r = last - b.query_begin;
    for (int64_t h = 0; h < std::min(b.num_heads, heads_); ++h) {
      sinks_[b.layer * heads_ + h] = b.probs[(h * rows + r) * b.num_keys];
    }
  }

  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override {
    if (sequence != 0 || num_tokens < 1) return;
    vocab_ = vocab;
    last_logits_.assign(logits + (num_tokens - 1) * vocab, logits + num_tokens * vocab);
    row_entropies_.clear();
    if (!want_row_entropies_) return;
    for (int64_t t = 0; t < num_tokens; ++t) {
      row_entropies_.push_back(EntropyNats(logits + t * vocab, vocab));
    }
  }

  int64_t vocab() const { return vocab_; }
  const std::vector<float>& last_logits() const { return last_logits_; }
  const std::vector<double>& row_entropies() const { return row_entropies_; }
  const std::vector<double>& sinks() const { return sinks_; }

 private:
  int64_t layers_, heads_;
  bool want_sinks_;
  bool want_row_entropies_ = false;
  int64_t tokens_ = 0, vocab_ = 0;
  std::vector<float> last_logits_;
  std::vector<double> row_entropies_, sinks_;
};

// A token as it reads: its bytes, a byte fragment of a character as <0xNN>,
// or "#<id>" when the model has no tokenizer (or the tokenizer does not know
// the id).
std::string TokenText(const ModelBundle& bundle, int64_t id) {
  if (bundle.tokenizer != nullptr) {
    absl::StatusOr<std::string> bytes = bundle.tokenizer->TokenBytes(id);
    if (bytes.ok()) return analysis::ReadableBytes(*bytes);
  }
  return absl::StrCat("#", id);
}

std::string GeneratedText(const ModelBundle& bundle, const std::vector<GeneratedToken>& tokens) {
  std::vector<int64_t> ids;
  for (const GeneratedToken& t : tokens) ids.push_back(t.id);
  if (bundle.tokenizer != nullptr) {
    absl::StatusOr<std::string> text = bundle.tokenizer->Decode(ids);
    if (text.ok()) return SanitizeUtf8(*text);
  }
  std::string text;
  for (const GeneratedToken& t : tokens) text += t.text;
  return text;
}

// Probability, entropy and alternatives of `id` under softmax(logits).
GeneratedToken DescribeToken(const ModelBundle& bundle, const std::vector<float>& logits,
                             int64_t id, int num_alternatives) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const RowDistribution d = Distribution(logits.data(), vocab);
  GeneratedToken token;
  token.id = id;
  token.text = TokenText(bundle, id);
  token.probability = std::exp(d.log_probs[id]);
  token.entropy_nats = d.entropy_nats;
  token.entropy_normalized = NormalizedEntropy(d.entropy_nats, vocab);
  for (int64_t alt : TopIds(d.log_probs, num_alternatives)) {
    token.alternatives.push_back({alt, TokenText(bundle, alt), std::exp(d.log_probs[alt])});
  }
  return token;
}

class Generator {
 public:
  Generator(const ModelBundle& bundle, const GenerationSettings& settings,
            const std::function<void(const GeneratedToken&)>& on_token,
            std::unique_ptr<StreamingCache> stream)
      : bundle_(bundle),
        settings_(settings),
        on_token_(on_token),
        stream_(std::move(stream)),
        observer_(bundle.config().num_layers, bundle.config().num_heads,
                  settings.layer_sink_scores),
        rng_(settings.sampling.seed) {
    forward_.cache = stream_->cache();
    forward_.should_stop = settings.should_stop;
    observers_ = {&observer_};
    if (stream_->observer() != nullptr) observers_.push_back(stream_->observer());
    forward_.precision = settings.precision.value_or(model::Precision::kFloat32);
  }

  absl::Status Prefill(const Prompt& prompt, GenerationResult& result);
  absl::Status Decode(int64_t prompt_length, GenerationResult& result);

 private:
  bool Cancelled() const { return settings_.should_stop && settings_.should_stop(); }
  void Emit(const GeneratedToken& token) const {
    if (on_token_) on_token_(token);
  }
  absl::Status Feed(int64_t id) {
    ATTNSCOPE_RETURN_IF_ERROR(bundle_.model->Forward({{id}}, forward_, observers_));
    return Evict();
  }
  // The policy's eviction after a pass; what it dropped waits for the next
  // token's report.
  absl::Status Evict() {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> evicted, stream_->AfterPass());
    evicted_.insert(evicted_.end(), evicted.begin(), evicted.end());
    return absl::OkStatus();
  }
  void ReportCache(GeneratedToken& token) {
    token.cache_tokens = stream_->cache()->length();
    token.evicted_positions = std::move(evicted_);
    evicted_.clear();
  }

  const ModelBundle& bundle_;
  const GenerationSettings& settings_;
  const std::function<void(const GeneratedToken&)>& on_token_;
  std::unique_ptr<StreamingCache> stream_;
  model::ForwardOptions forward_;
  StepObserver observer_;
  std::vector<model::ForwardObserver*> observers_;
  std::vector<int64_t> evicted_;
  std::mt19937_64 rng_;
};

absl::Status Generator::Prefill(const Prompt& prompt, GenerationResult& result) {
  const Clock::time_point start = Clock::now();
  observer_.set_row_entropies(true);
  ATTNSCOPE_RETURN_IF_ERROR(bundle_.model->Forward({prompt.ids}, forward_, observers_));
  ATTNSCOPE_RETURN_IF_ERROR(Evict());
  observer_.set_row_entropies(false);
  if (observer_.last_logits().empty()) {
    return absl::InternalError("the prefill forward pass published no logits");
  }
  result.prompt_entropy_nats = observer_.row_entropies();
  for (double h : result.prompt_entropy_nats) {
    result.prompt_entropy_normalized.push_back(NormalizedEntropy(h, observer_.vocab()));
  }
  result.prefill_seconds = SecondsSince(start);
  return absl::OkStatus();
}

// One token per step: choose it from the last logits, then feed it to the
// model (for the next logits, and for its own attention row when sink scores
// are asked). The last token is fed only when its sink scores are wanted.
absl::Status Generator::Decode(int64_t prompt_length, GenerationResult& result) {
  const Clock::time_point start = Clock::now();
  const int64_t eos = bundle_.config().eos_token_id;
  // Sink scores and cache reports come from feeding the token, so such a
  // token is announced after its feed.
  const bool sinks = settings_.layer_sink_scores;
  const bool feed_first = sinks || settings_.cache_policy.bounded();
  for (int index = 0;; ++index) {
    if (Cancelled()) {
      return absl::CancelledError(
          absl::StrCat("generation stopped before new token ", index, " of at most ",
                       settings_.max_new_tokens));
    }
    const std::vector<float>& logits = observer_.last_logits();
    const int64_t id = ChooseToken(logits.data(), static_cast<int64_t>(logits.size()),
                                   settings_.sampling, rng_);
    GeneratedToken token = DescribeToken(bundle_, logits, id, settings_.num_alternatives);
    token.index = index;
    token.position = prompt_length + index;
    const std::string stop = StopReasonAfter(id, index, eos, settings_);
    if (!feed_first) {
      ReportCache(token);
      if (stop.empty()) token.cache_tokens += 1;  // once fed (full keeps everything)
      Emit(token);
    }
    if (stop.empty() || sinks) ATTNSCOPE_RETURN_IF_ERROR(Feed(id));
    if (feed_first) {
      if (sinks) token.sink_scores = observer_.sinks();
      ReportCache(token);
      Emit(token);
    }
    result.tokens.push_back(std::move(token));
    if (!stop.empty()) {
      result.stop_reason = stop;
      break;
    }
  }
  result.decode_seconds = SecondsSince(start);
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGenerationSettings(const ModelBundle& bundle, const Prompt& prompt,
                                        const GenerationSettings& settings) {
  if (bundle.model == nullptr) return absl::FailedPreconditionError("no model is loaded");
  if (prompt.ids.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (settings.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens=", settings.max_new_tokens, ": must be at least 1"));
  }
  const int64_t prompt_length = static_cast<int64_t>(prompt.ids.size());
  const int64_t positions = bundle.config().max_positions;
  const model::CachePositions cache_positions =
      settings.cache_positions.value_or(DefaultCachePositions(bundle.config()));
  ATTNSCOPE_RETURN_IF_ERROR(CheckCachePositions(bundle.config(), cache_positions));
  const EvictionPolicy& policy = settings.cache_policy;
  const bool shifted = policy.bounded() && cache_positions == model::CachePositions::kCache;
  if (policy.bounded() && policy.capacity() + 1 > positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache_policy=", PolicyName(policy), ": attends to ", policy.capacity() + 1,
        " cached tokens but the model accepts ", positions, " positions"));
  }
  if (shifted && prompt_length > positions) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt_length,
                                                   " tokens and the model accepts ", positions,
                                                   " positions; shorten the prompt"));
  }
  if (!shifted && prompt_length + settings.max_new_tokens > positions) {
    const int64_t fit = std::max<int64_t>(0, positions - prompt_length);
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens=", settings.max_new_tokens, ": the prompt has ", prompt_length,
        " tokens and the model accepts ", positions, " positions, so at most ", fit,
        " new tokens fit"));
  }
  const SamplingSettings& s = settings.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0 || s.temperature > kMaxTemperature) {
    return absl::InvalidArgumentError(absl::StrCat("temperature=", s.temperature,
                                                   ": must be a finite number in [0, ",
                                                   kMaxTemperature, "] (0: greedy)"));
  }
  if (s.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k=", s.top_k, ": must be at least 0 (0: no cut)"));
  }
  if (!(s.top_p >= 0 && s.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p=", s.top_p, ": must be in [0, 1] (0 or 1: no cut)"));
  }
  if (settings.num_alternatives < 0 || settings.num_alternatives > kMaxAlternatives) {
    return absl::InvalidArgumentError(absl::StrCat("num_alternatives=", settings.num_alternatives,
                                                   ": must be in [0, ", kMaxAlternatives, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerationResult> Generate(
    const ModelBundle& bundle, const Prompt& prompt, const GenerationSettings& settings,
    const std::function<void(const GeneratedToken&)>& on_token) {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateGenerationSettings(bundle, prompt, settings));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      std::unique_ptr<StreamingCache> stream,
      StreamingCache::Create(*bundle.model, settings.cache_policy,
                             settings.cache_positions.value_or(
                                 DefaultCachePositions(bundle.config()))));
  Generator generator(bundle, settings, on_token, std::move(stream));
  GenerationResult result;
  ATTNSCOPE_RETURN_IF_ERROR(generator.Prefill(prompt, result));
  ATTNSCOPE_RETURN_IF_ERROR(generator.Decode(static_cast<int64_t>(prompt.ids.size()), result));
  result.text = GeneratedText(bundle, result.tokens);
  return result;
}

}  // namespace attnscope::engine
