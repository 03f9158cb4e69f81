// AnalyzeTensors: full tensors -> PromptStats through the same observer the
// runtime feeds, optionally block-wise.
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/core/status_macros.h"

namespace attnscope::analysis {
namespace {

// Product of dims, or -1 if it overflows int64.
int64_t CheckedProduct(std::initializer_list<int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d != 0 && product > std::numeric_limits<int64_t>::max() / d) return -1;
    product *= d;
  }
  return product;
}

absl::Status CheckSize(std::string_view name, size_t size, int64_t expected) {
  if (expected < 0 || static_cast<uint64_t>(size) != static_cast<uint64_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("AnalyzeTensors: ", std::string(name), " has ", size,
                                                   " values, the shape needs ", expected));
  }
  return absl::OkStatus();
}

absl::Status CheckTensors(const ForwardTensors& in, const AnalysisOptions& options) {
  const int64_t l = in.num_layers, h = in.num_heads, t = in.num_tokens;
  if (l < 1 || h < 1 || t < 1 || in.width < 1 || in.vocab < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AnalyzeTensors: every dimension must be >= 1, got L=", l, " H=", h, " T=", t,
        " D=", in.width, " V=", in.vocab));
  }
  ATTNSCOPE_RETURN_IF_ERROR(
      CheckSize("attentions", in.attentions.size(), CheckedProduct({l, h, t, t})));
  ATTNSCOPE_RETURN_IF_ERROR(CheckSize("hidden_states", in.hidden_states.size(),
                                      CheckedProduct({l + 1, t, in.width})));
  ATTNSCOPE_RETURN_IF_ERROR(
      CheckSize("logits", in.logits.size(), CheckedProduct({t, in.vocab})));
  if (options.want_value_norms || !in.value_norms.empty()) {
    ATTNSCOPE_RETURN_IF_ERROR(
        CheckSize("value_norms", in.value_norms.size(), CheckedProduct({l, h, t})));
  }
  return absl::OkStatus();
}

// Publishes layer `layer`'s attention in blocks of `block_rows` query rows.
void PublishLayer(const ForwardTensors& in, int layer, int64_t block_rows,
                  std::vector<float>* buffer, PromptAnalyzer* analyzer) {
  const int64_t h = in.num_heads, t = in.num_tokens;
  const float* maps = in.attentions.data() + layer * h * t * t;
  model::AttentionBlock block;
  block.layer = layer;
  block.num_heads = h;
  block.num_keys = t;
  block.value_norms = in.value_norms.empty() ? nullptr : in.value_norms.data() + layer * h * t;
  for (int64_t begin = 0; begin < t; begin += block_rows) {
    const int64_t rows = std::min(block_rows, t - begin);
    block.query_begin = begin;
    block.query_end = begin + rows;
    if (rows == t) {
      block.probs = maps;  // the layer's (H, T, T) slice is already contiguous
    } else {
      buffer->resize(static_cast<size_t>(h * rows * t));
      for (int64_t head = 0; head < h; ++head) {
        const float* src = maps + (head * t + begin) * t;
        std::copy(src, src + rows * t, buffer->data() + head * rows * t);
      }
      block.probs = buffer->data();
    }
    analyzer->OnAttention(block);
  }
}

}  // namespace

absl::StatusOr<PromptStats> AnalyzeTensors(const ForwardTensors& tensors,
                                           const AnalysisOptions& options,
                                           int64_t query_block_size) {
  ATTNSCOPE_RETURN_IF_ERROR(CheckTensors(tensors, options));
  if (query_block_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AnalyzeTensors: query_block_size is ", query_block_size, "; need >= 0"));
  }
  const int64_t t = tensors.num_tokens, d = tensors.width;
  const int64_t block_rows = query_block_size == 0 ? t : query_block_size;
  PromptAnalyzer analyzer(options);
  analyzer.OnBegin(0, t);
  std::vector<float> buffer;
  for (int64_t s = 0; s <= tensors.num_layers; ++s) {
    if (s > 0) PublishLayer(tensors, static_cast<int>(s - 1), block_rows, &buffer, &analyzer);
    analyzer.OnHiddenState(0, static_cast<int>(s), tensors.hidden_states.data() + s * t * d, t,
                           d);
  }
  analyzer.OnLogits(0, tensors.logits.data(), t, tensors.vocab);
  return analyzer.Finish();
}

}  // namespace attnscope::analysis
