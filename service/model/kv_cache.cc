#include "service/model/kv_cache.h"

#include "absl/strings/str_cat.h"

namespace attnscope::model {

int64_t DecoderCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (!keys_[l].defined()) continue;
    // Only the committed tokens count (a failed step's leftovers are rolled back).
    const int64_t per_token = keys_[l].numel() / std::max<int64_t>(1, keys_[l].size(2));
    total += 2 * per_token * length_ * static_cast<int64_t>(keys_[l].element_size());
  }
  return total;
}

absl::Status DecoderCache::Keep(const std::vector<int64_t>& indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= length_ || (i > 0 && indices[i] <= indices[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cache index ", indices[i], " at ", i, ": indices to keep must be strictly ascending in [0, ",
          length_, ")"));
    }
  }
  if (static_cast<int64_t>(indices.size()) == length_) return absl::OkStatus();
  Rollback();
  const at::Tensor index = at::tensor(at::ArrayRef<int64_t>(indices), at::kLong)
                               .to(keys_.empty() || !keys_[0].defined() ? at::Device(at::kCPU)
                                                                        : keys_[0].device());
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (!keys_[l].defined()) continue;
    keys_[l] = keys_[l].index_select(2, index).contiguous();
    values_[l] = values_[l].index_select(2, index).contiguous();
  }
  std::vector<int64_t> kept;
  kept.reserve(indices.size());
  for (int64_t i : indices) kept.push_back(positions_[i]);
  positions_ = std::move(kept);
  length_ = static_cast<int64_t>(indices.size());
  evicted_ = true;
  return absl::OkStatus();
}

at::Tensor DecoderCache::KeyPositions(int64_t new_tokens) const {
  if (rotates_by_index() || !evicted_) return at::Tensor();
  std::vector<int64_t> all = positions_;
  for (int64_t i = 0; i < new_tokens; ++i) all.push_back(next_position_ + i);
  return at::tensor(at::ArrayRef<int64_t>(all), at::kLong);
}

void DecoderCache::Rollback() {
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (keys_[l].defined() && keys_[l].size(2) > length_) {
      keys_[l] = keys_[l].narrow(2, 0, length_).contiguous();
      values_[l] = values_[l].narrow(2, 0, length_).contiguous();
    }
  }
}

std::pair<at::Tensor, at::Tensor> DecoderCache::Append(int layer, const at::Tensor& k,
                                                       const at::Tensor& v) {
  at::Tensor all_k = k, all_v = v;
  if (length_ > 0 && keys_[layer].defined()) {
    all_k = at::cat({keys_[layer], k}, 2);
    all_v = at::cat({values_[layer], v}, 2);
  }
  keys_[layer] = all_k.contiguous();
  values_[layer] = all_v.contiguous();
  return {keys_[layer], values_[layer]};
}

void DecoderCache::Commit(int64_t new_tokens) {
  for (int64_t i = 0; i < new_tokens; ++i) positions_.push_back(next_position_ + i);
  length_ += new_tokens;
  next_position_ += new_tokens;
}

}  // namespace attnscope::model
