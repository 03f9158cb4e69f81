#include "service/model/decoder_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/model/attention_blocks.h"
#include "service/model/causal_attention.h"
#include "service/model/decoder_weights.h"
#include "service/model/device.h"
#include "service/model/forward_checks.h"
#include "service/model/gemm.h"
#include "service/model/kv_cache.h"
#include "service/model/rotary.h"
#include "service/model/tensor_cache.h"
#include "service/model/weight_loader.h"

namespace attnscope::model {
namespace {

// The caller's extra mask as a (T, S) bool tensor.
at::Tensor HiddenKeysTensor(const std::vector<uint8_t>& hidden, int64_t tokens) {
  const int64_t keys = static_cast<int64_t>(hidden.size()) / tokens;
  return at::from_blob(const_cast<uint8_t*>(hidden.data()), {tokens, keys}, at::kByte)
      .to(at::kBool);
}
// A norm that is linear in c: c through `w` with the scale frozen at `ref`
// (each row of ref's leading shape, broadcast over c's): LayerNorm's
// centring and (c - mean c) / sqrt(var ref + eps), RMSNorm's c / sqrt(mean
// ref^2 + eps), then the weight. No bias.
at::Tensor FrozenNorm(const at::Tensor& c, const at::Tensor& ref, const NormWeights& w) {
  at::Tensor scaled;
  if (w.kind == NormKind::kLayerNorm) {
    const at::Tensor var = ref.var(-1, /*unbiased=*/false, /*keepdim=*/true);
    scaled = (c - c.mean(-1, /*keepdim=*/true)) * at::rsqrt(var + w.eps);
  } else {
    scaled = c * at::rsqrt(ref.pow(2).mean(-1, /*keepdim=*/true) + w.eps);
  }
  return w.weight.defined() ? scaled * w.weight.to(at::kFloat) : scaled;
}

// Rows of the MLP per chunk: its inner activation (rows x `inner` floats)
// at most kMlpChunkBytes, and at least 256 rows, so that a chunk's products
// still reuse each packed block of weights over many rows.
constexpr int64_t kMlpChunkBytes = int64_t{32} << 20;
int64_t MlpChunkRows(int64_t inner) { return std::max<int64_t>(256, kMlpChunkBytes / (4 * inner)); }

// What one forward pass shares across its layers.
struct PassState {
  const ForwardOptions& options;
  int64_t past = 0;
  DecoderCache* cache = nullptr;
  RotaryTables rotary;  // undefined tensors without rotary embedding
  ObserverSet& observers;
  // A cache that rotates keys by their cache index: tables for 0 .. S-1.
  RotaryTables key_rotary;
  at::Tensor key_positions;  // (S) long, or undefined for 0 .. S-1
  at::Tensor hidden_keys;    // (T, S) bool, or undefined
  AttentionWorkspace* workspace = nullptr;
  // The float32 weights, or their bfloat16 matrices for Precision::kBfloat16.
  const DecoderWeights* weights = nullptr;
  bool bf16 = false;
};

// The state of products run outside Forward (a read-out, head writes): no
// observers, no cache, default options.
struct DetachedPass {
  ForwardOptions options;
  ObserverSet none{std::vector<ForwardObserver*>{}};
  PassState state{options, 0, nullptr, {}, none, {}, {}, {}, nullptr};
  DetachedPass() = default;
  DetachedPass(const DetachedPass&) = delete;  // state refers to the members
  DetachedPass& operator=(const DetachedPass&) = delete;
};

// A workspace from the pool for the lifetime of one pass.
class PooledWorkspace {
 public:
  explicit PooledWorkspace(WorkspacePool& pool) : pool_(pool), workspace_(pool.Take()) {}
  ~PooledWorkspace() { pool_.Give(std::move(workspace_)); }
  PooledWorkspace(const PooledWorkspace&) = delete;
  PooledWorkspace& operator=(const PooledWorkspace&) = delete;
  AttentionWorkspace* get() const { return workspace_.get(); }

 private:
  WorkspacePool& pool_;
  std::unique_ptr<AttentionWorkspace> workspace_;
};

class DecoderModel : public LanguageModel {
 public:
  DecoderModel(ModelConfig config, DecoderWeights weights, c10::Device device, bool stored_bf16)
      : config_(std::move(config)), spec_(config_.decoder), w_(std::move(weights)),
        device_(device), stored_bf16_(stored_bf16) {}

  const ModelConfig& config() const override { return config_; }
  absl::Status Forward(const std::vector<std::vector<int64_t>>& batch,
                       const ForwardOptions& options,
                       const std::vector<ForwardObserver*>& observers) const override;
  absl::Status HiddenStateLogits(int state, const float* x, int64_t rows, Precision precision,
                                 float* logits) const override;
  absl::Status HeadWrites(int layer, const float* head_mix, const float* attention_raw,
                          int64_t rows, Precision precision, float* out) const override;
  absl::Status ReadoutDirections(const float* residual, const int64_t* targets, int64_t rows,
                                 float* direction, double* offset) const override;
  std::unique_ptr<KvCache> NewCache() const override {
    return NewCache(CachePositions::kOriginal);
  }
  std::unique_ptr<KvCache> NewCache(CachePositions positions) const override {
    if (positions == CachePositions::kCache && spec_.rope.kind == RopeKind::kNone) return nullptr;
    return std::make_unique<DecoderCache>(config_.num_layers, positions);
  }
  Precision stored_precision() const override {
    return stored_bf16_ ? Precision::kBfloat16 : Precision::kFloat32;
  }
  int64_t weight_bytes() const override {
    std::set<const void*> seen;
    int64_t total = HeldBytes(w_, seen);
    if (bf16_made_.load(std::memory_order_acquire)) total += HeldBytes(bf16_, seen);
    return total;
  }

 private:
  at::Tensor Embed(const at::Tensor& ids, const PassState& pass) const;
  // Rows `ids` of the head (V, E), float32, on the model's device.
  at::Tensor HeadRows(const at::Tensor& ids) const;
  // Unimplemented when the residual stream is not a sum of the layers'
  // writes read out through the final norm (a post-norm stack, project_out).
  absl::Status CheckDecomposable() const;
  // y = x W^T + b in the pass's precision.
  at::Tensor Product(const at::Tensor& x, const LinearWeights& w, const PassState& pass) const {
    return pass.bf16 ? LinearBf16(x, w) : Linear(x, w);
  }
  // The bfloat16 matrices, made on the first bfloat16 pass and kept.
  const DecoderWeights& Bf16Weights() const {
    std::call_once(bf16_once_, [this] {
      bf16_ = Bf16Matrices(w_);
      bf16_made_.store(true, std::memory_order_release);
    });
    return bf16_;
  }
  static at::Tensor Norm(const at::Tensor& x, const NormWeights& w) { return Normalize(x, w); }
  // The float32 weights, or the bfloat16 ones for kBfloat16 (made once).
  void UseWeights(PassState& pass, Precision precision) const {
    pass.bf16 = Resolve(precision) == Precision::kBfloat16;
    pass.weights = pass.bf16 ? &Bf16Weights() : &w_;
  }
  at::Tensor RunLayer(int layer, const at::Tensor& x, PassState& pass) const;
  // head_mix: where to put the heads' weighted values before the output
  // projection ((B, T, H * d)), or nullptr.
  at::Tensor Attention(int layer, const at::Tensor& x, PassState& pass,
                       at::Tensor* head_mix = nullptr) const;
  // The steps of Attention, in order.
  struct Heads {
    at::Tensor q;  // (B, H, T, d)
    at::Tensor k;  // (B, KV, T, d); with a cache, every cached key after AppendToCache
    at::Tensor v;  // (B, KV, T, d); likewise
  };
  Heads ProjectHeads(const LayerWeights& l, const at::Tensor& x, const PassState& pass) const;
  void RotateHeads(Heads& h, const PassState& pass) const;
  AttentionStep ScoreStep(int layer, Heads& h, const PassState& pass) const;
  void AppendToCache(int layer, Heads& h, const PassState& pass) const;
  at::Tensor Mlp(const LayerWeights& l, const at::Tensor& x, const PassState& pass) const;
  // The MLP of rows at once (Mlp takes a long prompt's rows in chunks).
  at::Tensor MlpRows(const LayerWeights& l, const at::Tensor& x, const PassState& pass) const;
  at::Tensor Finish(const at::Tensor& x, const PassState& pass) const;
  at::Tensor Logits(const at::Tensor& x, const PassState& pass) const;
  void PublishLogits(const at::Tensor& x, const PassState& pass) const;

  ModelConfig config_;
  const DecoderSpec& spec_;
  DecoderWeights w_;
  c10::Device device_;
  const bool stored_bf16_;  // the checkpoint's matrices are BF16
  mutable std::once_flag bf16_once_;
  mutable DecoderWeights bf16_;
  mutable std::atomic<bool> bf16_made_{false};
  mutable WorkspacePool workspaces_;  // Forward is const and may run concurrently
};

// ids (B, T) -> (B, T, H): token rows (scaled), projected in, plus positions.
at::Tensor DecoderModel::Embed(const at::Tensor& ids, const PassState& pass) const {
  const int64_t past = pass.past;
  at::Tensor x;
  if (w_.embed_in_head) {
    const at::Tensor flat = ids.flatten().contiguous();
    x = at::empty({flat.numel(), w_.head_packed->k()}, ids.options().dtype(at::kFloat));
    w_.head_packed->GatherRows(flat.data_ptr<int64_t>(), flat.numel(), x.data_ptr<float>());
    x = x.view({ids.size(0), ids.size(1), -1});
  } else {
    // A bfloat16 embedding (as stored) widened row by row, exactly.
    x = w_.embed.index_select(0, ids.flatten())
            .to(at::kFloat)
            .view({ids.size(0), ids.size(1), -1});
  }
  // Gemma multiplies by sqrt(H) rounded to the compute dtype (float32 here).
  if (spec_.embedding_scale != 1.0) x = x * static_cast<float>(spec_.embedding_scale);
  if (w_.project_in.present()) x = Product(x, pass.weights->project_in, pass);
  if (w_.positions.defined()) {
    x = x + w_.positions.narrow(0, past + spec_.position_offset, ids.size(1))
                .to(at::kFloat)
                .unsqueeze(0);
  }
  return x;
}

// x (B, T, H) -> q, k, v by one product with the fused q | k | v matrix,
// split into heads, with the q/k norms (Qwen3) over each head.
DecoderModel::Heads DecoderModel::ProjectHeads(const LayerWeights& l, const at::Tensor& x,
                                               const PassState& pass) const {
  const AttentionSpec& a = spec_.attention;
  const int64_t batch = x.size(0), tokens = x.size(1), d = a.head_dim;
  const at::Tensor qkv = Product(x, l.qkv, pass);  // (B, T, (H + 2 KV) d), columns q | k | v
  const int64_t q_cols = a.num_heads * d, kv_cols = a.num_kv_heads * d;
  at::Tensor q = qkv.narrow(-1, 0, q_cols).view({batch, tokens, a.num_heads, d});
  at::Tensor k = qkv.narrow(-1, q_cols, kv_cols).view({batch, tokens, a.num_kv_heads, d});
  at::Tensor v = qkv.narrow(-1, q_cols + kv_cols, kv_cols).view({batch, tokens, a.num_kv_heads, d});
  if (a.qk_norm) {
    q = Norm(q, l.q_norm);
    k = Norm(k, l.k_norm);
  }
  return {q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)};
}

// Rotary embedding of the new queries and keys at their positions (keys of
// a cache that rotates by cache index are rotated after AppendToCache
// instead); under bfloat16 the operands of q k^T and p v are rounded.
void DecoderModel::RotateHeads(Heads& h, const PassState& pass) const {
  const bool rotate_cached = pass.cache != nullptr && pass.cache->rotates_by_index();
  if (pass.rotary.cos.defined()) {
    h.q = ApplyRotary(h.q, pass.rotary);
    if (!rotate_cached) h.k = ApplyRotary(h.k, pass.rotary);
  }
  if (pass.bf16) {
    h.q = RoundToBf16(h.q);
    if (!rotate_cached) h.k = RoundToBf16(h.k);
    h.v = RoundToBf16(h.v);
  }
}

// How the scores of this layer are made: the scale (OPT scales the queries
// before the product, in float32; GPT-2 may divide by the layer number), the
// soft-cap, the sliding window, the masks of the pass.
AttentionStep DecoderModel::ScoreStep(int layer, Heads& h, const PassState& pass) const {
  const AttentionSpec& a = spec_.attention;
  AttentionStep step;
  step.layer = layer;
  step.past = pass.past;
  step.score_scale = a.score_scale;
  step.softcap = a.softcap;
  step.window = a.window[layer];
  step.key_positions = pass.key_positions;
  step.hidden_keys = pass.hidden_keys;
  step.workspace = pass.workspace;
  if (a.scale_query_first) {
    h.q = h.q * static_cast<float>(a.score_scale);
    step.score_scale = 1.0;
  }
  if (a.divide_by_layer_number) step.score_scale /= (layer + 1);
  return step;
}

// The new keys and values join the cache; the pass reads every cached one
// (after an eviction fewer than the positions). StreamingLLM's position
// shift rotates every cached key at its cache index.
void DecoderModel::AppendToCache(int layer, Heads& h, const PassState& pass) const {
  if (pass.cache == nullptr) return;
  std::tie(h.k, h.v) = pass.cache->Append(layer, h.k, h.v);
  if (pass.cache->rotates_by_index()) {
    h.k = ApplyRotary(h.k, pass.key_rotary);
    if (pass.bf16) h.k = RoundToBf16(h.k);
  }
}

// x (B, T, H) -> attention output (B, T, H), before the residual: project,
// q/k norm, rotate, scores (scale, soft-cap, window, mask), softmax and the
// weighted sum in blocks of query rows (CausalAttention, which publishes
// the weights to the observers), ablated heads zeroed, the output product.
at::Tensor DecoderModel::Attention(int layer, const at::Tensor& x, PassState& pass,
                                   at::Tensor* head_mix) const {
  const LayerWeights& l = pass.weights->layers[layer];
  Heads h = ProjectHeads(l, x, pass);
  RotateHeads(h, pass);
  AttentionStep step = ScoreStep(layer, h, pass);
  AppendToCache(layer, h, pass);
  const int64_t batch = x.size(0), tokens = x.size(1), heads = spec_.attention.num_heads;
  step.query_block_size =
      QueryBlockRows(pass.options.query_block_size, batch * heads, tokens, h.k.size(2));
  at::Tensor o = CausalAttention(h.q, h.k, h.v, step, pass.observers);  // (B, H, T, d)
  AblateHeads(layer, pass.options, o);
  for (const ActivationPatch& p : pass.options.patches) {
    if (p.kind != ActivationPatch::Kind::kHeadOutput || p.layer != layer) continue;
    o.select(1, p.head).copy_(  // (B = 1, T, d)
        at::from_blob(const_cast<float*>(p.values.data()), {1, tokens, spec_.attention.head_dim},
                      at::kFloat));
  }
  const at::Tensor mix = o.transpose(1, 2).reshape({batch, tokens, heads * spec_.attention.head_dim});
  if (head_mix != nullptr) *head_mix = mix;
  return Product(mix, l.o, pass);
}

at::Tensor DecoderModel::MlpRows(const LayerWeights& l, const at::Tensor& x,
                                 const PassState& pass) const {
  if (!spec_.mlp.gated && l.up.packed) {  // the activation inside the product's kernel
    return Product(LinearActivated(x, l.up, spec_.mlp.activation,
                                   pass.bf16 ? Operands::kStored : Operands::kFloat32),
                   l.down, pass);
  }
  at::Tensor up = Product(x, l.up, pass);  // a fresh tensor: changed in place below
  if (!spec_.mlp.gated) {
    ActivateInPlace(up, spec_.mlp.activation);
    return Product(up, l.down, pass);
  }
  const int64_t inner = spec_.mlp.intermediate_size;
  at::Tensor gate = up.narrow(-1, 0, inner);
  const at::Tensor value = up.narrow(-1, inner, inner);
  ActivateInPlace(gate, spec_.mlp.activation);
  // A dense product (the down projection reads rows), not gate.mul_ in place
  // and a copy after it.
  return Product(at::mul(gate, value), l.down, pass);
}

at::Tensor DecoderModel::Mlp(const LayerWeights& l, const at::Tensor& x,
                             const PassState& pass) const {
  const int64_t width = x.size(-1);
  const int64_t rows = width > 0 ? x.numel() / width : 0;
  const int64_t inner = std::max<int64_t>(1, spec_.mlp.intermediate_size) * (spec_.mlp.gated ? 2 : 1);
  const int64_t chunk = MlpChunkRows(inner);
  if (rows <= chunk) return MlpRows(l, x, pass);
  // A long prompt's MLP in chunks of rows: its inner activation needs a
  // bounded workspace, reused from chunk to chunk, instead of (T, inner)
  // floats mapped afresh on every layer.
  const at::Tensor flat = x.reshape({rows, width});
  at::Tensor out;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    const at::Tensor part = MlpRows(l, flat.narrow(0, r0, n), pass);
    if (!out.defined()) out = at::empty({rows, part.size(-1)}, part.options());
    out.narrow(0, r0, n).copy_(part);
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out.size(-1);
  return out.view(sizes);
}

at::Tensor DecoderModel::RunLayer(int layer, const at::Tensor& x, PassState& pass) const {
  const LayerWeights& l = pass.weights->layers[layer];
  ObserverSet& observers = pass.observers;
  const bool writes = observers.needs().sublayer_writes;  // kPostNorm refused in Forward
  at::Tensor mix;
  switch (spec_.residual) {
    case ResidualLayout::kParallel: {
      const at::Tensor attn = Attention(layer, Norm(x, l.attn_norm), pass, writes ? &mix : nullptr);
      const at::Tensor mlp = Mlp(l, Norm(x, l.mlp_norm), pass);
      if (writes) observers.PublishSublayerWrites(layer, spec_.attention.num_heads, mix, attn, attn, mlp);
      return mlp + attn + x;  // HF's order of the sum
    }
    case ResidualLayout::kPostNorm: {
      const at::Tensor h = Norm(x + Attention(layer, x, pass), l.attn_norm);
      return Norm(h + Mlp(l, h, pass), l.mlp_norm);
    }
    case ResidualLayout::kPreNorm:
      break;
  }
  const at::Tensor raw = Attention(layer, Norm(x, l.attn_norm), pass, writes ? &mix : nullptr);
  const at::Tensor attn = spec_.post_sublayer_norms ? Norm(raw, l.post_attn_norm) : raw;
  const at::Tensor h = x + attn;
  at::Tensor mlp = Mlp(l, Norm(h, l.mlp_norm), pass);
  if (spec_.post_sublayer_norms) mlp = Norm(mlp, l.post_mlp_norm);
  if (writes) observers.PublishSublayerWrites(layer, spec_.attention.num_heads, mix, raw, attn, mlp);
  return h + mlp;
}

// The last layer's output -> the last hidden state (final norm, project_out).
at::Tensor DecoderModel::Finish(const at::Tensor& x, const PassState& pass) const {
  at::Tensor out = spec_.final_norm ? Norm(x, w_.final_norm) : x;
  if (w_.project_out.present()) out = Product(out, pass.weights->project_out, pass);
  return out;
}

// x (B, T, E) -> logits (B, T, V). A single row (a decoding step) goes
// through matrix-vector: GEMM would first repack the whole (V, E) head.
at::Tensor DecoderModel::Logits(const at::Tensor& x, const PassState& pass) const {
  const at::Tensor rows = x.reshape({-1, x.size(-1)});
  const PackedMatrix* packed = pass.weights->head_packed.get();
  LinearWeights head;
  head.weight = pass.weights->head;
  const bool stored = w_.head.defined() && w_.head.scalar_type() == at::kBFloat16;
  at::Tensor logits =
      packed != nullptr
          ? PackedLinear(rows, *packed, {}, Epilogue::kNone,
                         pass.bf16 ? Operands::kStored : Operands::kFloat32)
      : pass.bf16         ? LinearBf16(rows, head)
      : stored || rows.size(0) > 1 ? WidenedLinear(rows, w_.head, {})
                                   : at::mv(w_.head, rows[0]).unsqueeze(0);
  if (spec_.final_softcap > 0) {
    logits = at::tanh(logits / spec_.final_softcap) * spec_.final_softcap;
  }
  return logits.view({x.size(0), x.size(1), config_.vocab_size});
}

// All at once, or in blocks of rows when every observer takes them so: the
// (T, V) logits are the largest tensor of a pass (200 MB for GPT-2 at T = 1024).
void DecoderModel::PublishLogits(const at::Tensor& x, const PassState& pass) const {
  ObserverSet& observers = pass.observers;
  const int64_t tokens = x.size(1);
  if (!observers.logits_in_blocks()) return observers.PublishLogits(Logits(x, pass));
  // Even blocks (a last small one would take a buffer of its own size).
  const int64_t most = LogitRowsPerBlock(config_.vocab_size);
  const int64_t blocks = (tokens + most - 1) / most;
  const int64_t per = (tokens + blocks - 1) / blocks;
  for (int64_t begin = 0; begin < tokens; begin += per) {
    const int64_t rows = std::min(per, tokens - begin);
    observers.PublishLogitsBlock(begin, Logits(x.narrow(1, begin, rows), pass), tokens);
  }
}

absl::Status DecoderModel::HiddenStateLogits(int state, const float* x, int64_t rows,
                                             Precision precision, float* logits) const {
  if (state < 0 || state > config_.num_layers || rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hidden state ", state, " with ", rows,
                                                   " rows: states are 0..", config_.num_layers,
                                                   " and rows at least 0"));
  }
  if (rows == 0) return absl::OkStatus();
  try {
    c10::InferenceMode inference;
    DetachedPass detached;
    PassState& pass = detached.state;
    UseWeights(pass, precision);
    const bool last = state == config_.num_layers;
    const int64_t width =
        !last ? config_.hidden_size : (w_.head_packed ? w_.head_packed->k() : w_.head.size(1));
    at::Tensor h = at::from_blob(const_cast<float*>(x), {1, rows, width}, at::kFloat).to(device_);
    if (!last) h = Finish(h, pass);
    const at::Tensor z = Logits(h, pass).to(at::kCPU).contiguous();
    std::memcpy(logits, z.data_ptr<float>(), static_cast<size_t>(z.numel()) * sizeof(float));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(config_.model_type, ": reading out hidden state ", state, " failed: ", e.what()));
  }
}

at::Tensor DecoderModel::HeadRows(const at::Tensor& ids) const {
  if (w_.head.defined()) return w_.head.index_select(0, ids.to(w_.head.device())).to(at::kFloat);
  const at::Tensor flat = ids.to(at::kCPU).contiguous();
  at::Tensor rows = at::empty({flat.numel(), w_.head_packed->k()}, at::kFloat);
  w_.head_packed->GatherRows(flat.data_ptr<int64_t>(), flat.numel(), rows.data_ptr<float>());
  return rows.to(device_);
}

absl::Status DecoderModel::CheckDecomposable() const {
  if (spec_.residual == ResidualLayout::kPostNorm) {
    return absl::UnimplementedError(absl::StrCat(
        config_.model_type, ": the residual stream is normalised after each block "
        "(do_layer_norm_before: false), so it is not a sum of the layers' writes; "
        "direct logit attribution and head patching need a pre-norm model"));
  }
  if (w_.project_out.present()) {
    return absl::UnimplementedError(absl::StrCat(
        config_.model_type, ": the read-out goes through project_out; direct logit "
        "attribution is not defined for it"));
  }
  return absl::OkStatus();
}

absl::Status DecoderModel::HeadWrites(int layer, const float* head_mix,
                                      const float* attention_raw, int64_t rows,
                                      Precision precision, float* out) const {
  if (layer < 0 || layer >= config_.num_layers || rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("head writes of layer ", layer, " with ", rows,
                                                   " rows: layers are 0..",
                                                   config_.num_layers - 1, " and rows at least 0"));
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckDecomposable());
  if (rows == 0) return absl::OkStatus();
  try {
    c10::InferenceMode inference;
    DetachedPass detached;
    PassState& pass = detached.state;
    UseWeights(pass, precision);
    const int64_t heads = spec_.attention.num_heads, dim = spec_.attention.head_dim;
    const int64_t width = config_.hidden_size;
    const at::Tensor mix =
        at::from_blob(const_cast<float*>(head_mix), {rows, 1, heads, dim}, at::kFloat).to(device_);
    // Row (r, h) keeps only head h's values: one product gives every head's write.
    const at::Tensor spread = mix * at::eye(heads, mix.options()).view({1, heads, heads, 1});
    const LinearWeights& o = pass.weights->layers[layer].o;
    at::Tensor w = Product(spread.view({1, rows * heads, heads * dim}), o, pass);
    if (o.bias.defined()) w = w - o.bias.to(at::kFloat);
    w = w.view({rows, heads, width});
    if (spec_.post_sublayer_norms) {
      const at::Tensor raw =
          at::from_blob(const_cast<float*>(attention_raw), {rows, 1, width}, at::kFloat)
              .to(device_);
      w = FrozenNorm(w, raw, w_.layers[layer].post_attn_norm);
    }
    const at::Tensor c = w.to(at::kCPU).contiguous();
    std::memcpy(out, c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(config_.model_type, ": head writes of layer ", layer, " failed: ", e.what()));
  }
}

absl::Status DecoderModel::ReadoutDirections(const float* residual, const int64_t* targets,
                                             int64_t rows, float* direction,
                                             double* offset) const {
  if (rows < 0) return absl::InvalidArgumentError("read-out directions: rows below 0");
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] < 0 || targets[r] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("target id ", targets[r], " is outside [0, ",
                                                     config_.vocab_size, ")"));
    }
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckDecomposable());
  if (rows == 0) return absl::OkStatus();
  try {
    c10::InferenceMode inference;
    const int64_t width = config_.hidden_size;
    const at::Tensor r =
        at::from_blob(const_cast<float*>(residual), {rows, width}, at::kFloat).to(device_);
    const at::Tensor ids = at::from_blob(const_cast<int64_t*>(targets), {rows}, at::kLong).clone();
    const at::Tensor unembed = HeadRows(ids);  // (rows, D)
    at::Tensor dir = unembed;
    at::Tensor normed = r;
    if (spec_.final_norm) {
      const NormWeights& n = w_.final_norm;
      at::Tensor g = n.weight.defined() ? unembed * n.weight.to(at::kFloat) : unembed;
      // c . centre(g) = centre(c) . g: LayerNorm's centring moves to the direction.
      if (n.kind == NormKind::kLayerNorm) g = g - g.mean(-1, /*keepdim=*/true);
      const at::Tensor scale =
          n.kind == NormKind::kLayerNorm
              ? at::rsqrt(r.var(-1, /*unbiased=*/false, /*keepdim=*/true) + n.eps)
              : at::rsqrt(r.pow(2).mean(-1, /*keepdim=*/true) + n.eps);
      dir = g * scale;
      normed = Norm(r, n);
    }
    const at::Tensor logit = (normed.to(at::kDouble) * unembed.to(at::kDouble)).sum(-1);
    const at::Tensor rest = logit - (r.to(at::kDouble) * dir.to(at::kDouble)).sum(-1);
    const at::Tensor d = dir.to(at::kCPU).contiguous();
    const at::Tensor o = rest.to(at::kCPU).contiguous();
    std::memcpy(direction, d.data_ptr<float>(), static_cast<size_t>(d.numel()) * sizeof(float));
    std::memcpy(offset, o.data_ptr<double>(), static_cast<size_t>(o.numel()) * sizeof(double));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(config_.model_type, ": reading out a direction failed: ", e.what()));
  }
}

absl::Status DecoderModel::Forward(const std::vector<std::vector<int64_t>>& batch,
                                   const ForwardOptions& options,
                                   const std::vector<ForwardObserver*>& observers) const {
  auto* cache = static_cast<DecoderCache*>(options.cache);
  const int64_t past = cache ? cache->first_new_position() : 0;
  ATTNSCOPE_RETURN_IF_ERROR(CheckForwardInput(config_, batch, options, past));
  const int64_t cached = cache ? cache->length() : 0;
  const auto new_tokens = static_cast<int64_t>(batch[0].size());
  ATTNSCOPE_RETURN_IF_ERROR(CheckHiddenKeys(options, new_tokens, cached + new_tokens));
  try {
    c10::InferenceMode inference;
    if (cache != nullptr) cache->Rollback();
    ObserverSet obs(observers);
    if (obs.needs().sublayer_writes) ATTNSCOPE_RETURN_IF_ERROR(CheckDecomposable());
    const int64_t batch_size = batch.size(), tokens = batch[0].size();
    PooledWorkspace workspace(workspaces_);
    PassState pass{options, past, cache, {}, obs, {}, {}, {}, workspace.get()};
    UseWeights(pass, options.precision);
    if (spec_.rope.kind != RopeKind::kNone) {
      pass.rotary = MakeRotaryTables(spec_.rope, past, tokens);
      if (cache != nullptr && cache->rotates_by_index()) {
        pass.key_rotary = MakeRotaryTables(spec_.rope, 0, cached + tokens);
        pass.key_rotary.cos = pass.key_rotary.cos.to(device_);
        pass.key_rotary.sin = pass.key_rotary.sin.to(device_);
      }
      pass.rotary.cos = pass.rotary.cos.to(device_);
      pass.rotary.sin = pass.rotary.sin.to(device_);
    }
    if (cache != nullptr) pass.key_positions = cache->KeyPositions(tokens);
    if (pass.key_positions.defined()) pass.key_positions = pass.key_positions.to(device_);
    if (!options.hidden_keys.empty()) {
      pass.hidden_keys = HiddenKeysTensor(options.hidden_keys, tokens).to(device_);
    }
    const int first_layer = options.resume.layer;
    at::Tensor x =  // (B, T, H)
        first_layer == 0
            ? Embed(IdsTensor(batch).to(device_), pass)
            : at::from_blob(const_cast<float*>(options.resume.state),
                            {1, tokens, config_.hidden_size}, at::kFloat)
                  .clone()
                  .to(device_);
    obs.Begin(batch_size, tokens);
    if (first_layer == 0) obs.PublishHidden(0, x);
    for (int layer = first_layer; layer < config_.num_layers; ++layer) {
      if (options.should_stop && options.should_stop()) {
        return absl::CancelledError(absl::StrCat("forward pass stopped before layer ", layer));
      }
      for (const ActivationPatch& p : options.patches) {
        if (p.kind != ActivationPatch::Kind::kResidual || p.layer != layer) continue;
        x.select(1, p.position).copy_(  // (B = 1, D)
            at::from_blob(const_cast<float*>(p.values.data()), {1, config_.hidden_size},
                          at::kFloat));
      }
      x = RunLayer(layer, x, pass);
      if (layer + 1 < config_.num_layers) obs.PublishHidden(layer + 1, x);
    }
    x = Finish(x, pass);
    obs.PublishHidden(static_cast<int>(config_.num_layers), x);
    if (obs.needs().logits) PublishLogits(x, pass);
    if (cache != nullptr) cache->Commit(tokens);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(config_.model_type, " forward pass failed in libtorch: ",
                                            e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(config_.model_type, " forward pass failed: ", e.what()));
  }
}

}  // namespace

int64_t LogitRowsPerBlock(int64_t vocab) {
  constexpr int64_t kLogitBlockBytes = int64_t{128} << 20;
  return std::clamp<int64_t>(kLogitBlockBytes / (4 * std::max<int64_t>(vocab, 1)), 128, 256);
}

absl::StatusOr<std::unique_ptr<LanguageModel>> LoadDecoder(
    const ModelConfig& config, std::shared_ptr<const SafetensorsCheckpoint> checkpoint,
    const LoadProgressCallback& progress, const ModelLoadOptions& options) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const c10::Device device, ResolveDevice(options.device));
  const TensorCache* cache = InstallTensorCache();
  const TensorNames& names = config.decoder.names;
  std::vector<std::string> prefixes = names.prefixes;
  for (const std::string& prefix : names.prefixes) {
    if (checkpoint->Find(prefix + names.embed + ".weight") != nullptr) {
      prefixes = {prefix};  // one naming scheme per checkpoint
      break;
    }
  }
  const std::string directory = checkpoint->directory();
  const std::shared_ptr<const SafetensorsCheckpoint> mapped = checkpoint;
  WeightLoader loader(std::move(checkpoint), prefixes, progress);
  try {
    c10::InferenceMode inference;
    ATTNSCOPE_ASSIGN_OR_RETURN(DecoderWeights weights, LoadDecoderWeights(config, loader));
    const bool stored_bf16 = weights.embed.scalar_type() == at::kBFloat16;
    MoveWeights(weights, device);
    // Each matrix is packed and its source let go before the next is read:
    // the checkpoint's pages of a mapped matrix are dropped (the packed copy
    // takes their place in memory), a converted or fused copy is freed and
    // its buffer unmapped at once (the tensor cache would keep up to 256 MiB
    // of them, raising the peak while loading far above the loaded model's
    // memory). For oneDNN on AVX-512 CPUs every matrix; for the AVX2 kernel
    // a BF16 checkpoint's head (decoder_weights.h, PackLayout).
    const auto release = [&](const at::Tensor& t) {
      return mapped->DropPages(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    };
    const auto let_go = [&] {
      if (cache != nullptr) cache->Trim();
    };
    if (device.is_cpu() && ChosenGemmBackend() == GemmBackend::kOneDnn) {
      PackMatrices(weights, PackedType::kFloat32, release, let_go);
    } else if (device.is_cpu() && PanelProducts() && stored_bf16) {
      PackMatrices(weights, PackedType::kBfloat16, release, let_go, PackLayout::kBf16HeadPanels);
    }
    if (cache != nullptr) cache->Trim();  // the temporaries of converting and fusing
    return std::unique_ptr<LanguageModel>(new DecoderModel(config, std::move(weights), device, stored_bf16));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("loading ", directory, ": ", e.what()));
  }
}

}  // namespace attnscope::model
