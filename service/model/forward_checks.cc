#include "service/model/forward_checks.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace attnscope::model {
namespace {

absl::Status CheckIds(const ModelConfig& config, const std::vector<int64_t>& ids, size_t seq) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i, (seq > 0 ? " of sequence " : ""),
                       (seq > 0 ? absl::StrCat(seq) : ""), " is outside the vocabulary [0, ",
                       config.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAblations(const ModelConfig& config, const ForwardOptions& options) {
  for (const HeadRef& h : options.ablate) {
    if (h.layer < 0 || h.layer >= config.num_layers || h.head < 0 || h.head >= config.num_heads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head ", h.layer, ".", h.head, " does not exist: the model has layers 0..",
          config.num_layers - 1, " and heads 0..", config.num_heads - 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckForwardInput(const ModelConfig& config,
                               const std::vector<std::vector<int64_t>>& batch,
                               const ForwardOptions& options, int64_t past) {
  if (batch.empty() || batch[0].empty()) {
    return absl::InvalidArgumentError("the prompt is empty: give at least one token");
  }
  if (options.cache != nullptr && batch.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "incremental decoding takes one sequence, got a batch of ", batch.size()));
  }
  const size_t tokens = batch[0].size();
  for (size_t s = 0; s < batch.size(); ++s) {
    if (batch[s].size() != tokens) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has ", batch[s].size(),
                                                     " tokens but sequence 0 has ", tokens,
                                                     "; a batch needs equal lengths"));
    }
    absl::Status ids = CheckIds(config, batch[s], s);
    if (!ids.ok()) return ids;
  }
  if (past + static_cast<int64_t>(tokens) > config.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt has ", past + static_cast<int64_t>(tokens),
        " tokens but the model accepts at most ", config.max_positions,
        " (max_positions); shorten the prompt"));
  }
  if (options.query_block_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("query block size must be >= 0, got ",
                                                   options.query_block_size));
  }
  return CheckAblations(config, options);
}

at::Tensor IdsTensor(const std::vector<std::vector<int64_t>>& batch) {
  const int64_t rows = batch.size(), cols = batch[0].size();
  at::Tensor ids = at::empty({rows, cols}, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(ids.data_ptr<int64_t>() + r * cols, batch[r].data(), cols * sizeof(int64_t));
  }
  return ids;
}

}  // namespace attnscope::model
