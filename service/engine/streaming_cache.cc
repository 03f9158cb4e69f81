#include "service/engine/streaming_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace attnscope::engine {

// Keeps, for each new query row of a pass, the attention it gave every key
// averaged over layers and heads: (T, S) in doubles.
class StreamingCache::RowMeans : public model::ForwardObserver {
 public:
  RowMeans(int64_t layers, int64_t heads) : layers_(layers), heads_(heads) {}
  model::ObserverNeeds Needs() const override {
    model::ObserverNeeds needs;
    needs.attention = true;
    return needs;
  }
  void OnBegin(int sequence, int64_t num_tokens) override {
    if (sequence != 0) return;
    rows_ = num_tokens;
    keys_ = 0;
    sums_.clear();
  }
  void OnAttention(const model::AttentionBlock& b) override {
    if (b.sequence != 0) return;
    if (sums_.empty()) {
      keys_ = b.num_keys;
      sums_.assign(rows_ * keys_, 0.0);
    }
    const int64_t rows = b.query_end - b.query_begin;
    const double scale = 1.0 / static_cast<double>(layers_ * heads_);
    for (int64_t h = 0; h < b.num_heads; ++h) {
      for (int64_t r = 0; r < rows; ++r) {
        const float* p = b.probs + (h * rows + r) * b.num_keys;
        double* out = sums_.data() + (b.query_begin + r) * keys_;
        for (int64_t j = 0; j < std::min(keys_, b.num_keys); ++j) out[j] += p[j] * scale;
      }
    }
  }
  int64_t rows() const { return rows_; }
  int64_t keys() const { return keys_; }
  const double* row(int64_t r) const { return sums_.data() + r * keys_; }

 private:
  int64_t layers_, heads_;
  int64_t rows_ = 0, keys_ = 0;
  std::vector<double> sums_;
};

std::string CachePositionsName(model::CachePositions positions) {
  return positions == model::CachePositions::kCache ? "cache" : "original";
}

absl::StatusOr<model::CachePositions> ParseCachePositions(absl::string_view text) {
  if (text == "cache") return model::CachePositions::kCache;
  if (text == "original") return model::CachePositions::kOriginal;
  return absl::InvalidArgumentError(
      absl::StrCat("positions=\"", text, "\": must be cache or original"));
}

model::CachePositions DefaultCachePositions(const model::ModelConfig& config) {
  return config.decoder.rope.kind == model::RopeKind::kNone ? model::CachePositions::kOriginal
                                                            : model::CachePositions::kCache;
}

absl::Status CheckCachePositions(const model::ModelConfig& config,
                                 model::CachePositions positions) {
  if (positions == model::CachePositions::kCache &&
      config.decoder.rope.kind == model::RopeKind::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "positions=cache: ", config.model_type,
        " has learned absolute positions, which cannot be shifted to cache indices; use "
        "positions=original (the text is then limited to the model's ",
        config.max_positions, " positions)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StreamingCache>> StreamingCache::Create(
    const model::LanguageModel& model, const EvictionPolicy& policy,
    model::CachePositions positions) {
  absl::Status ok = CheckCachePositions(model.config(), positions);
  if (!ok.ok()) return ok;
  std::unique_ptr<model::KvCache> cache = model.NewCache(positions);
  if (cache == nullptr) {
    return absl::UnimplementedError(absl::StrCat("this model cannot make a KV cache with ",
                                                 CachePositionsName(positions), " positions"));
  }
  return std::unique_ptr<StreamingCache>(new StreamingCache(model, policy, std::move(cache)));
}

StreamingCache::StreamingCache(const model::LanguageModel& model, const EvictionPolicy& policy,
                               std::unique_ptr<model::KvCache> cache)
    : policy_(policy), cache_(std::move(cache)), tracker_(policy) {
  if (policy.needs_attention()) {
    rows_ = std::make_unique<RowMeans>(model.config().num_layers, model.config().num_heads);
  }
}

StreamingCache::~StreamingCache() = default;

model::ForwardObserver* StreamingCache::observer() const { return rows_.get(); }

absl::StatusOr<std::vector<int64_t>> StreamingCache::AfterPass() {
  const std::vector<int64_t> positions = cache_->positions();
  const int64_t n = static_cast<int64_t>(positions.size());
  max_tokens_ = std::max(max_tokens_, n);
  max_bytes_ = std::max(max_bytes_, cache_->bytes());
  if (rows_ != nullptr && rows_->rows() > 0) {
    // Row r of the pass saw the keys before it and itself: the first
    // n - rows + r + 1 cached tokens.
    for (int64_t r = 0; r < rows_->rows(); ++r) {
      const int64_t seen = std::min(n - rows_->rows() + r + 1, rows_->keys());
      std::vector<int64_t> keys(positions.begin(), positions.begin() + seen);
      tracker_.Observe(keys, std::vector<double>(rows_->row(r), rows_->row(r) + seen));
    }
  }
  const std::vector<int64_t> kept = tracker_.SelectKept(positions);
  if (static_cast<int64_t>(kept.size()) == n) return std::vector<int64_t>{};
  std::vector<int64_t> evicted;
  size_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (k < kept.size() && kept[k] == i) {
      ++k;
    } else {
      evicted.push_back(positions[i]);
    }
  }
  absl::Status s = cache_->Keep(kept);
  if (!s.ok()) return s;
  tracker_.Forget(evicted);
  return evicted;
}

}  // namespace attnscope::engine
