#include "service/model/decoder_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

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
// Rows of logits per block when observers take blocks: 128 (26 MB for
// GPT-2). Through BLAS every block's GEMM repacks the whole (V, E) head, and
// a packed head's kernel (oneDNN) still reads the whole head once per
// block, so fewer rows cost more while more rows gain little (the
// measurements: docs/performance-history.md, "Measurements behind choices
// in the code").
constexpr int64_t kLogitRowsPerBlock = 128;

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
  at::Tensor Norm(const at::Tensor& x, const NormWeights& w) const {
    return Normalize(x, w, spec_.norm, spec_.norm_eps);
  }
  at::Tensor RunLayer(int layer, const at::Tensor& x, PassState& pass) const;
  at::Tensor Attention(int layer, const at::Tensor& x, PassState& pass) const;
  at::Tensor Mlp(const LayerWeights& l, const at::Tensor& x, const PassState& pass) const;
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

// x (B, T, H) -> attention output (B, T, H), before the residual.
at::Tensor DecoderModel::Attention(int layer, const at::Tensor& x, PassState& pass) const {
  const LayerWeights& l = pass.weights->layers[layer];
  const AttentionSpec& a = spec_.attention;
  const int64_t batch = x.size(0), tokens = x.size(1), d = a.head_dim;
  const at::Tensor qkv = Product(x, l.qkv, pass);  // (B, T, (H + 2 KV) d), columns q | k | v
  const int64_t q_cols = a.num_heads * d, kv_cols = a.num_kv_heads * d;
  at::Tensor q = qkv.narrow(-1, 0, q_cols).view({batch, tokens, a.num_heads, d});
  at::Tensor k = qkv.narrow(-1, q_cols, kv_cols).view({batch, tokens, a.num_kv_heads, d});
  at::Tensor v = qkv.narrow(-1, q_cols + kv_cols, kv_cols).view({batch, tokens, a.num_kv_heads, d});
  if (a.qk_norm) {
    const NormKind kind =
        spec_.norm == NormKind::kRmsNormPlusOne ? NormKind::kRmsNormPlusOne : NormKind::kRmsNorm;
    q = Normalize(q, l.q_norm, kind, spec_.norm_eps);
    k = Normalize(k, l.k_norm, kind, spec_.norm_eps);
  }
  q = q.transpose(1, 2);  // (B, H, T, d)
  k = k.transpose(1, 2);  // (B, KV, T, d)
  v = v.transpose(1, 2);
  const bool rotate_cached = pass.cache != nullptr && pass.cache->rotates_by_index();
  if (pass.rotary.cos.defined()) {
    q = ApplyRotary(q, pass.rotary);
    if (!rotate_cached) k = ApplyRotary(k, pass.rotary);
  }
  if (pass.bf16) {  // the operands of q k^T and p v
    q = RoundToBf16(q);
    if (!rotate_cached) k = RoundToBf16(k);  // else after the rotation below
    v = RoundToBf16(v);
  }
  AttentionStep step;
  step.layer = layer;
  step.past = pass.past;
  step.score_scale = a.score_scale;
  step.softcap = a.softcap;
  step.window = a.window[layer];
  step.key_positions = pass.key_positions;
  step.hidden_keys = pass.hidden_keys;
  step.workspace = pass.workspace;
  // OPT scales the projected queries in float32 before the product.
  if (a.scale_query_first) {
    q = q * static_cast<float>(a.score_scale);
    step.score_scale = 1.0;
  }
  if (a.divide_by_layer_number) step.score_scale /= (layer + 1);
  if (pass.cache != nullptr) {
    std::tie(k, v) = pass.cache->Append(layer, k, v);
    // StreamingLLM's position shift: every cached key at its cache index.
    if (rotate_cached) {
      k = ApplyRotary(k, pass.key_rotary);
      if (pass.bf16) k = RoundToBf16(k);
    }
  }
  // Keys: the cached tokens (after an eviction fewer than the positions) and
  // the new ones.
  step.query_block_size = QueryBlockRows(pass.options.query_block_size, batch * a.num_heads,
                                         tokens, k.size(2));
  at::Tensor o = CausalAttention(q, k, v, step, pass.observers);  // (B, H, T, d)
  AblateHeads(layer, pass.options, o);
  return Product(o.transpose(1, 2).reshape({batch, tokens, q_cols}), l.o, pass);
}

at::Tensor DecoderModel::Mlp(const LayerWeights& l, const at::Tensor& x,
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
  return Product(gate.mul_(value), l.down, pass);
}

at::Tensor DecoderModel::RunLayer(int layer, const at::Tensor& x, PassState& pass) const {
  const LayerWeights& l = pass.weights->layers[layer];
  switch (spec_.residual) {
    case ResidualLayout::kParallel: {
      const at::Tensor attn = Attention(layer, Norm(x, l.attn_norm), pass);
      return Mlp(l, Norm(x, l.mlp_norm), pass) + attn + x;  // HF's order of the sum
    }
    case ResidualLayout::kPostNorm: {
      const at::Tensor h = Norm(x + Attention(layer, x, pass), l.attn_norm);
      return Norm(h + Mlp(l, h, pass), l.mlp_norm);
    }
    case ResidualLayout::kPreNorm:
      break;
  }
  at::Tensor attn = Attention(layer, Norm(x, l.attn_norm), pass);
  if (spec_.post_sublayer_norms) attn = Norm(attn, l.post_attn_norm);
  const at::Tensor h = x + attn;
  at::Tensor mlp = Mlp(l, Norm(h, l.mlp_norm), pass);
  if (spec_.post_sublayer_norms) mlp = Norm(mlp, l.post_mlp_norm);
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
      : stored            ? WidenedLinear(rows, w_.head, {})
      : rows.size(0) == 1 ? at::mv(w_.head, rows[0]).unsqueeze(0)
                          : at::mm(rows, w_.head.t());
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
  for (int64_t begin = 0; begin < tokens; begin += kLogitRowsPerBlock) {
    const int64_t rows = std::min(kLogitRowsPerBlock, tokens - begin);
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
    ForwardOptions options;
    ObserverSet none({});
    PassState pass{options, 0, nullptr, {}, none, {}, {}, {}, nullptr};
    pass.bf16 = Resolve(precision) == Precision::kBfloat16;
    pass.weights = pass.bf16 ? &Bf16Weights() : &w_;
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

absl::Status DecoderModel::Forward(const std::vector<std::vector<int64_t>>& batch,
                                   const ForwardOptions& options,
                                   const std::vector<ForwardObserver*>& observers) const {
  auto* cache = static_cast<DecoderCache*>(options.cache);
  const int64_t past = cache ? cache->first_new_position() : 0;
  ATTNSCOPE_RETURN_IF_ERROR(CheckForwardInput(config_, batch, options, past));
  const int64_t cached = cache ? cache->length() : 0;
  const int64_t new_tokens = static_cast<int64_t>(batch[0].size());
  if (!options.hidden_keys.empty() &&
      options.hidden_keys.size() != static_cast<size_t>(new_tokens * (cached + new_tokens))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hidden_keys has ", options.hidden_keys.size(), " entries; a pass of ", new_tokens,
        " tokens over ", cached + new_tokens, " keys needs ", new_tokens * (cached + new_tokens)));
  }
  try {
    c10::InferenceMode inference;
    if (cache != nullptr) cache->Rollback();
    ObserverSet obs(observers);
    const int64_t batch_size = batch.size(), tokens = batch[0].size();
    PooledWorkspace workspace(workspaces_);
    PassState pass{options, past, cache, {}, obs, {}, {}, {}, workspace.get()};
    pass.bf16 = Resolve(options.precision) == Precision::kBfloat16;
    pass.weights = pass.bf16 ? &Bf16Weights() : &w_;
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
    at::Tensor x = Embed(IdsTensor(batch).to(device_), pass);  // (B, T, H)
    obs.Begin(batch_size, tokens);
    obs.PublishHidden(0, x);
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      if (options.should_stop && options.should_stop()) {
        return absl::CancelledError(absl::StrCat("forward pass stopped before layer ", layer));
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
    if (device.is_cpu() && ChosenGemmBackend() == GemmBackend::kOneDnn) {
      // Each matrix is packed and its source let go before the next is read:
      // the checkpoint's pages of a mapped F32 matrix are dropped (the
      // packed copy takes their place in memory), a converted copy is freed
      // and its buffer unmapped at once (the tensor cache would keep up to
      // 256 MiB of them, raising the peak while loading far above the
      // loaded model's memory).
      PackMatrices(
          weights, PackedType::kFloat32,
          [&](const at::Tensor& t) {
            return mapped->DropPages(t.data_ptr(),
                                     static_cast<size_t>(t.numel()) * t.element_size());
          },
          [&] {
            if (cache != nullptr) cache->Trim();
          });
    }
    if (cache != nullptr) cache->Trim();  // the temporaries of converting and fusing
    return std::unique_ptr<LanguageModel>(new DecoderModel(config, std::move(weights), device, stored_bf16));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("loading ", directory, ": ", e.what()));
  }
}

}  // namespace attnscope::model
