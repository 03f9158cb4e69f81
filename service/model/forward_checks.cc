#include "service/model/forward_checks.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

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

absl::Status CheckPatches(const ModelConfig& config, const ForwardOptions& options,
                          size_t batch, int64_t tokens) {
  if (options.patches.empty()) return absl::OkStatus();
  if (batch != 1 || options.cache != nullptr) {
    return absl::InvalidArgumentError(
        "activation patching takes one sequence in one pass, without a cache");
  }
  const int64_t dim = config.decoder.attention.head_dim;
  for (const ActivationPatch& p : options.patches) {
    if (p.layer < 0 || p.layer >= config.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("patch at layer ", p.layer,
                                                     ": the model's layers are 0..",
                                                     config.num_layers - 1));
    }
    const bool head = p.kind == ActivationPatch::Kind::kHeadOutput;
    if (head && (p.head < 0 || p.head >= config.num_heads)) {
      return absl::InvalidArgumentError(absl::StrCat("patch of head ", p.head,
                                                     ": the model's heads are 0..",
                                                     config.num_heads - 1));
    }
    if (!head && (p.position < 0 || p.position >= tokens)) {
      return absl::InvalidArgumentError(absl::StrCat("patch at position ", p.position,
                                                     ": the prompt's positions are 0..",
                                                     tokens - 1));
    }
    const int64_t want = head ? tokens * dim : config.hidden_size;
    if (static_cast<int64_t>(p.values.size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat("a patch of ", p.values.size(),
                                                     " values where ", want, " belong"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckResume(const ModelConfig& config, const ForwardOptions& options, size_t batch,
                         int64_t tokens) {
  const ForwardOptions::Resume& r = options.resume;
  if (r.layer == 0) return absl::OkStatus();
  if (r.layer < 0 || r.layer >= config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("a pass resumed at layer ", r.layer,
                                                   ": the model's layers are 0..",
                                                   config.num_layers - 1));
  }
  if (batch != 1 || options.cache != nullptr) {
    return absl::InvalidArgumentError(
        "a resumed pass takes one sequence in one pass, without a cache");
  }
  if (r.state == nullptr || r.size != tokens * config.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("a pass resumed with ", r.size,
                                                   " values of the residual stream where ",
                                                   tokens * config.hidden_size, " belong"));
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
  ATTNSCOPE_RETURN_IF_ERROR(CheckAblations(config, options));
  ATTNSCOPE_RETURN_IF_ERROR(CheckResume(config, options, batch.size(), static_cast<int64_t>(tokens)));
  return CheckPatches(config, options, batch.size(), static_cast<int64_t>(tokens));
}

absl::Status CheckHiddenKeys(const ForwardOptions& options, int64_t new_tokens, int64_t keys) {
  if (options.hidden_keys.empty() ||
      options.hidden_keys.size() == static_cast<size_t>(new_tokens * keys)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("hidden_keys has ", options.hidden_keys.size(),
                                                 " entries; a pass of ", new_tokens, " tokens over ",
                                                 keys, " keys needs ", new_tokens * keys));
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
