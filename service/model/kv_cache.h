// Internal to the model library: the decoder's KV cache, with eviction and
// the two ways cached tokens can be positioned (language_model.h's
// CachePositions).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "service/model/language_model.h"

namespace attnscope::model {

class DecoderCache : public KvCache {
 public:
  DecoderCache(int64_t layers, CachePositions positions)
      : keys_(layers), values_(layers), mode_(positions) {}

  int64_t length() const override { return length_; }
  int64_t next_position() const override { return next_position_; }
  std::vector<int64_t> positions() const override { return positions_; }
  int64_t bytes() const override;
  absl::Status Keep(const std::vector<int64_t>& indices) override;

  // True when keys are stored before rotation and rotated by cache index at
  // every step (CachePositions::kCache).
  bool rotates_by_index() const { return mode_ == CachePositions::kCache; }
  // The position the first new token of the next pass takes: its cache index
  // (kCache) or its text position (kOriginal).
  int64_t first_new_position() const {
    return rotates_by_index() ? length_ : next_position_;
  }
  // Positions of all keys a pass of `new_tokens` tokens attends to, as a
  // (length + new_tokens) long tensor for the mask; undefined when they are
  // simply 0 .. S-1 (no eviction, or kCache).
  at::Tensor KeyPositions(int64_t new_tokens) const;

  // Drops keys/values a failed (e.g. cancelled) step appended to some layers.
  void Rollback();
  // Appends the new tokens' k and v (1, KV, T, d) of `layer` and returns the
  // keys and values of the whole cache, new tokens last: (1, KV, S, d).
  std::pair<at::Tensor, at::Tensor> Append(int layer, const at::Tensor& k, const at::Tensor& v);
  // Called after a successful pass over `new_tokens` tokens.
  void Commit(int64_t new_tokens);

 private:
  std::vector<at::Tensor> keys_, values_;  // per layer (1, KV, S, d)
  std::vector<int64_t> positions_;        // text position of each cached token
  CachePositions mode_;
  int64_t length_ = 0;
  int64_t next_position_ = 0;
  bool evicted_ = false;  // some token was dropped: positions_ != 0 .. length-1
};

}  // namespace attnscope::model
