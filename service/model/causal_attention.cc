#include "service/model/causal_attention.h"

#include <limits>

namespace attnscope::model {
namespace {

// Query head h reads key/value head h / group (repeat_interleave, not tile).
at::Tensor ExpandGroups(const at::Tensor& kv, int64_t num_heads) {
  const int64_t group = num_heads / kv.size(1);
  return group == 1 ? kv : kv.repeat_interleave(group, /*dim=*/1);
}

// True where query row r (at position p = past + row_begin + r) may not see
// key j (at position q_j: j, or step.key_positions[j]): q_j > p, or with a
// window W, q_j <= p - W; or where step.hidden_keys says so.
at::Tensor HiddenKeys(int64_t row_begin, int64_t rows, const AttentionStep& step,
                      int64_t keys) {
  const at::Tensor key_pos =
      (step.key_positions.defined() ? step.key_positions : at::arange(keys, at::kLong))
          .unsqueeze(0);
  const int64_t first = step.past + row_begin;
  const at::Tensor query_pos = at::arange(first, first + rows, at::kLong).unsqueeze(1);
  at::Tensor hidden = key_pos > query_pos;  // (rows, keys)
  if (step.window > 0) hidden = hidden.logical_or(key_pos <= query_pos - step.window);
  if (step.hidden_keys.defined()) {
    hidden = hidden.logical_or(step.hidden_keys.narrow(0, row_begin, rows));
  }
  return hidden;
}

}  // namespace

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionStep& step, ObserverSet& observers) {
  const int64_t num_heads = q.size(1);
  const int64_t num_queries = q.size(2);
  const int64_t num_keys = k.size(2);
  const at::Tensor values32 = ExpandGroups(v, num_heads);  // (B, H, S, d)
  at::Tensor value_norms;
  if (observers.needs().value_norms) value_norms = values32.norm(2, {-1});  // (B, H, S)

  // Scores, softmax and the weighted sum run in float64 and are rounded to
  // float32 afterwards: BLAS sums in a different order for different block
  // shapes, and in float32 that made block-wise and whole-layer results drift
  // apart by ~1e-6 over a few layers. In float64 the drift is far below
  // float32 resolution, so both modes give the same numbers.
  const at::Tensor queries = q.to(at::kDouble);
  const at::Tensor keys_t = ExpandGroups(k, num_heads).to(at::kDouble).transpose(-1, -2);
  const at::Tensor values = values32.to(at::kDouble);
  const int64_t block = step.query_block_size > 0 ? step.query_block_size : num_queries;
  at::Tensor out = at::empty_like(q);  // (B, H, T, d) float32
  for (int64_t begin = 0; begin < num_queries; begin += block) {
    const int64_t rows = std::min(block, num_queries - begin);
    at::Tensor scores = at::matmul(queries.narrow(2, begin, rows), keys_t)
                            .mul_(step.score_scale);  // (B, H, rows, S)
    // Gemma-2 soft-caps after scaling and before the mask.
    if (step.softcap > 0) scores = at::tanh(scores / step.softcap).mul_(step.softcap);
    // HF masks with the lowest finite value, not -inf (exp gives exact zeros).
    scores.masked_fill_(HiddenKeys(begin, rows, step, num_keys),
                        std::numeric_limits<double>::lowest());
    const at::Tensor probs = at::softmax(scores, -1);
    out.narrow(2, begin, rows).copy_(at::matmul(probs, values));
    if (observers.needs().attention) {
      observers.PublishAttention(step.layer, begin, probs.to(at::kFloat), value_norms);
    }
  }
  return out;
}

void AblateHeads(int layer, const ForwardOptions& options, at::Tensor& o) {
  for (const HeadRef& ref : options.ablate) {
    if (ref.layer != layer) continue;
    at::Tensor head = o.select(1, ref.head);  // (B, T, d)
    if (options.ablation_mode == AblationMode::kZero) {
      head.zero_();
    } else {
      head.copy_(head.mean(at::IntArrayRef{0, 1}, /*keepdim=*/true).expand_as(head));
    }
  }
}

}  // namespace attnscope::model
