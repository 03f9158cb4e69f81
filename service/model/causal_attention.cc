#include "service/model/causal_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "service/model/attention_kernel.h"
#include "service/model/gemm.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

// Without an observer of the probabilities the block size is invisible, so
// rows go in blocks whose scores stay in the cache.
constexpr int64_t kUnobservedBlock = 64;

// Query head h reads key/value head h / group (repeat_interleave, not tile).
at::Tensor ExpandGroups(const at::Tensor& kv, int64_t num_heads) {
  const int64_t group = num_heads / kv.size(1);
  return group == 1 ? kv : kv.repeat_interleave(group, /*dim=*/1);
}

// True where query row r (at position p = past + row_begin + r) may not see
// key j (at position q_j: j, or step.key_positions[j]): q_j > p, or with a
// window W, q_j <= p - W; or where step.hidden_keys says so.
at::Tensor HiddenKeys(int64_t row_begin, int64_t rows, const AttentionStep& step, int64_t keys,
                      const at::Device& device) {
  const at::TensorOptions longs = at::TensorOptions(at::kLong).device(device);
  const at::Tensor key_pos =
      (step.key_positions.defined() ? step.key_positions.to(device) : at::arange(keys, longs))
          .unsqueeze(0);
  const int64_t first = step.past + row_begin;
  const at::Tensor query_pos = at::arange(first, first + rows, longs).unsqueeze(1);
  at::Tensor hidden = key_pos > query_pos;  // (rows, keys)
  if (step.window > 0) hidden = hidden.logical_or(key_pos <= query_pos - step.window);
  if (step.hidden_keys.defined()) {
    hidden = hidden.logical_or(step.hidden_keys.narrow(0, row_begin, rows).to(device));
  }
  return hidden;
}

// The kernel masks key j as if it sat at position j + offset. Returns the
// offset when step.key_positions is undefined (0) or consecutive (a cache
// that evicted only its oldest tokens), nullopt when the positions have gaps.
std::optional<int64_t> KeyPositionOffset(const AttentionStep& step, int64_t keys) {
  if (!step.key_positions.defined()) return 0;
  const at::Tensor pos = step.key_positions.to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = pos.data_ptr<int64_t>();
  for (int64_t j = 1; j < keys; ++j) {
    if (p[j] != p[0] + j) return std::nullopt;
  }
  return keys > 0 ? p[0] : 0;
}

at::Tensor ValueNorms(const at::Tensor& v, int64_t num_heads, const ObserverSet& observers) {
  if (!observers.needs().value_norms) return {};
  return ExpandGroups(v.norm(2, {-1}), num_heads).contiguous();  // (B, H, S)
}

int64_t BlockRows(const AttentionStep& step, int64_t num_queries, const ObserverSet& observers) {
  const int64_t asked = step.query_block_size > 0 ? step.query_block_size : num_queries;
  return observers.needs().attention ? asked : std::min(asked, kUnobservedBlock);
}

// Any device: ATen ops on whole blocks, in float32.
at::Tensor AtenAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const AttentionStep& step, ObserverSet& observers) {
  const int64_t num_heads = q.size(1), num_queries = q.size(2), num_keys = k.size(2);
  const at::Tensor values = ExpandGroups(v, num_heads);
  const at::Tensor keys_t = ExpandGroups(k, num_heads).transpose(-1, -2);
  const at::Tensor value_norms = ValueNorms(v, num_heads, observers);
  const int64_t block = BlockRows(step, num_queries, observers);
  at::Tensor out = at::empty({q.size(0), num_queries, num_heads, q.size(3)}, q.options());
  for (int64_t begin = 0; begin < num_queries; begin += block) {
    const int64_t rows = std::min(block, num_queries - begin);
    at::Tensor scores = at::matmul(q.narrow(2, begin, rows), keys_t).mul_(step.score_scale);
    if (step.softcap > 0) scores = at::tanh(scores / step.softcap).mul_(step.softcap);
    scores.masked_fill_(HiddenKeys(begin, rows, step, num_keys, q.device()),
                        std::numeric_limits<float>::lowest());
    const at::Tensor probs = at::softmax(scores, -1);  // (B, H, rows, S)
    out.narrow(1, begin, rows).copy_(at::matmul(probs, values).transpose(1, 2));
    if (observers.needs().attention) {
      observers.PublishAttention(step.layer, begin, probs, value_norms);
    }
  }
  return out.permute({0, 2, 1, 3});
}

// A tensor whose last dimension is dense (BLAS reads the other strides).
at::Tensor RowDense(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

}  // namespace

template <typename T>
T* AttentionWorkspace::Buffer<T>::Get(int64_t numel) {
  if (numel > size) {
    data.reset();  // release first: the old and new buffers need not coexist
    data.reset(new T[static_cast<size_t>(numel)]);
    size = numel;
  }
  return data.get();
}

float* AttentionWorkspace::Floats(int64_t numel) { return floats_.Get(numel); }

double* AttentionWorkspace::Doubles(int64_t numel) { return doubles_.Get(numel); }

std::unique_ptr<AttentionWorkspace> WorkspacePool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return std::make_unique<AttentionWorkspace>();
  std::unique_ptr<AttentionWorkspace> w = std::move(free_.back());
  free_.pop_back();
  return w;
}

void WorkspacePool::Give(std::unique_ptr<AttentionWorkspace> workspace) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(workspace));
}

at::Tensor CausalAttention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                           const AttentionStep& step, ObserverSet& observers) {
  // The kernel masks by key index only: an extra mask, or cached keys whose
  // positions have gaps (an evicting cache in original positions), take the
  // ATen path.
  const std::optional<int64_t> key_offset =
      step.hidden_keys.defined() ? std::nullopt : KeyPositionOffset(step, k_in.size(2));
  if (!q_in.is_cpu() || q_in.scalar_type() != at::kFloat || !key_offset.has_value()) {
    return AtenAttention(q_in, k_in, v_in, step, observers);
  }
  const at::Tensor q = RowDense(q_in), k = RowDense(k_in), v = RowDense(v_in);
  const int64_t batch = q.size(0), heads = q.size(1), tokens = q.size(2), d = q.size(3);
  const int64_t num_keys = k.size(2), group = heads / k.size(1);
  const at::Tensor value_norms = ValueNorms(v, heads, observers);
  const int64_t block = BlockRows(step, tokens, observers);
  AttentionWorkspace local;
  AttentionWorkspace& workspace = step.workspace != nullptr ? *step.workspace : local;
  float* probs = workspace.Floats(batch * heads * std::min(block, tokens) * num_keys);
  // The rows' entropies come out of the softmax when an observer wants them.
  double* entropy = observers.needs().attention && observers.needs().row_entropy
                        ? workspace.Doubles(batch * heads * std::min(block, tokens))
                        : nullptr;
  at::Tensor out = at::empty({batch, tokens, heads, d}, q.options());  // (B, T, H, d)
  const float* qp = q.data_ptr<float>();
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  float* op = out.data_ptr<float>();
  // With the own kernel, each (sequence, key/value head)'s keys and values
  // packed once here for every block of query rows and every query head of
  // its group (BLAS would pack them again per block and per head). A few
  // query rows (a decoding step) stay with BLAS: packing would read every
  // key and value once more for little work.
  const int64_t kv_heads = k.size(1);
  const bool panels = PanelProducts() && tokens >= kPanelWidth && batch * kv_heads > 0;
  const int64_t key_floats = PanelFloats(num_keys, d), value_floats = PanelFloats(d, num_keys);
  at::Tensor key_panels, value_panels;
  if (panels) {
    key_panels = at::empty({batch * kv_heads * key_floats}, q.options());
    value_panels = at::empty({batch * kv_heads * value_floats}, q.options());
    float* kpp = key_panels.data_ptr<float>();
    float* vpp = value_panels.data_ptr<float>();
    at::parallel_for(0, batch * kv_heads, 1, [&](int64_t first, int64_t end) {
      for (int64_t bk = first; bk < end; ++bk) {
        const int64_t b = bk / kv_heads, h = bk % kv_heads;
        PackKeyPanels(kp + b * k.stride(0) + h * k.stride(1), k.stride(2), num_keys, d,
                      kpp + bk * key_floats);
        PackValuePanels(vp + b * v.stride(0) + h * v.stride(1), v.stride(2), num_keys, d,
                        vpp + bk * value_floats);
      }
    });
  }
  for (int64_t begin = 0; begin < tokens; begin += block) {
    const int64_t rows = std::min(block, tokens - begin);
    const bool observed = observers.needs().attention;
    if (observed) {
      observers.StartAttention(step.layer, begin, batch, heads, rows, num_keys, probs,
                               value_norms, entropy);
    }
    // One (sequence, head) per task: its scores stay in the core's cache and
    // BLAS runs single-threaded inside the parallel region. Observers that
    // take heads one by one read each head right after it is computed, while
    // it is still in this core's cache.
    at::parallel_for(0, batch * heads, 1, [&](int64_t first, int64_t end) {
      for (int64_t bh = first; bh < end; ++bh) {
        const int64_t b = bh / heads, h = bh % heads, kv = h / group;
        HeadAttentionArgs a;
        a.q = qp + b * q.stride(0) + h * q.stride(1) + begin * q.stride(2);
        a.q_ld = q.stride(2);
        a.k = kp + b * k.stride(0) + kv * k.stride(1);
        a.k_ld = k.stride(2);
        a.v = vp + b * v.stride(0) + kv * v.stride(1);
        a.v_ld = v.stride(2);
        a.out = op + ((b * tokens + begin) * heads + h) * d;
        a.out_ld = heads * d;
        a.probs = probs + bh * rows * num_keys;  // (B, H, rows, S) row-major
        a.probs_ld = num_keys;
        if (entropy != nullptr) a.row_entropy = entropy + bh * rows;  // (B, H, rows)
        a.rows = rows;
        a.head_dim = d;
        a.num_keys = num_keys;
        a.first_position = step.past + begin - *key_offset;
        a.window = step.window;
        a.scale = static_cast<float>(step.score_scale);
        a.softcap = static_cast<float>(step.softcap);
        if (panels) {
          a.key_panels = key_panels.data_ptr<float>() + (b * kv_heads + kv) * key_floats;
          a.value_panels = value_panels.data_ptr<float>() + (b * kv_heads + kv) * value_floats;
        }
        HeadAttention(a);
        if (observed) observers.PublishAttentionHead(b, h);
      }
    });
    if (observed) {
      observers.PublishAttention(step.layer, begin,
                                 at::from_blob(probs, {batch, heads, rows, num_keys}),
                                 value_norms, entropy);
    }
  }
  return out.permute({0, 2, 1, 3});  // (B, H, T, d) view
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
