#include "service/model/gpt2_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/model/causal_attention.h"
#include "service/model/forward_checks.h"
#include "service/model/weight_loader.h"

namespace attnscope::model {
namespace {

struct LayerNormWeights {
  at::Tensor weight, bias;  // (D)
};

// Conv1D weights are stored (in, out): y = x @ weight + bias.
struct Conv1D {
  at::Tensor weight, bias;
};

struct Gpt2Block {
  LayerNormWeights ln_1, ln_2;
  Conv1D c_attn;    // (D, 3D)
  Conv1D attn_proj;  // (D, D)
  Conv1D c_fc;      // (D, I)
  Conv1D mlp_proj;  // (I, D)
};

class Gpt2Cache : public KvCache {
 public:
  int64_t length() const override { return length_; }
  // Drops keys/values a failed (e.g. cancelled) step appended to some layers.
  void Rollback() {
    for (size_t l = 0; l < keys.size(); ++l) {
      if (keys[l].defined() && keys[l].size(2) > length_) {
        keys[l] = keys[l].narrow(2, 0, length_).contiguous();
        values[l] = values[l].narrow(2, 0, length_).contiguous();
      }
    }
  }
  void Commit(int64_t length) { length_ = length; }
  std::vector<at::Tensor> keys, values;  // per layer (1, H, S, d)

 private:
  int64_t length_ = 0;
};

class Gpt2Model : public LanguageModel {
 public:
  explicit Gpt2Model(ModelConfig config) : config_(std::move(config)) {}

  absl::Status LoadWeights(const WeightLoader& w);
  const ModelConfig& config() const override { return config_; }
  absl::Status Forward(const std::vector<std::vector<int64_t>>& batch,
                       const ForwardOptions& options,
                       const std::vector<ForwardObserver*>& observers) const override;
  std::unique_ptr<KvCache> NewCache() const override {
    auto cache = std::make_unique<Gpt2Cache>();
    cache->keys.resize(config_.num_layers);
    cache->values.resize(config_.num_layers);
    return cache;
  }

 private:
  absl::StatusOr<LayerNormWeights> LoadNorm(const WeightLoader& w, const std::string& name) const;
  absl::StatusOr<Conv1D> LoadConv(const WeightLoader& w, const std::string& name, int64_t in,
                                  int64_t out, const std::string& origin) const;
  at::Tensor RunBlock(int layer, const at::Tensor& x, const ForwardOptions& options,
                      int64_t past, Gpt2Cache* cache, ObserverSet& observers) const;
  at::Tensor Activate(const at::Tensor& x) const;
  at::Tensor Logits(const at::Tensor& x) const;
  at::Tensor Norm(const at::Tensor& x, const LayerNormWeights& n) const {
    return at::layer_norm(x, {config_.hidden_size}, n.weight, n.bias, config_.norm_eps);
  }

  ModelConfig config_;
  at::Tensor wte_;      // (V, D)
  at::Tensor wpe_;      // (P, D)
  at::Tensor lm_head_;  // (V, D): wte_ when tied
  std::vector<Gpt2Block> blocks_;
  LayerNormWeights ln_f_;
};

absl::StatusOr<LayerNormWeights> Gpt2Model::LoadNorm(const WeightLoader& w,
                                                     const std::string& name) const {
  const std::string origin = absl::StrCat("n_embd=", config_.hidden_size);
  LayerNormWeights n;
  ATTNSCOPE_ASSIGN_OR_RETURN(n.weight, w.Get(name + ".weight", {config_.hidden_size}, origin));
  ATTNSCOPE_ASSIGN_OR_RETURN(n.bias, w.Get(name + ".bias", {config_.hidden_size}, origin));
  return n;
}

absl::StatusOr<Conv1D> Gpt2Model::LoadConv(const WeightLoader& w, const std::string& name,
                                           int64_t in, int64_t out,
                                           const std::string& origin) const {
  Conv1D c;
  ATTNSCOPE_ASSIGN_OR_RETURN(c.weight, w.Get(name + ".weight", {in, out}, origin));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.bias, w.Get(name + ".bias", {out}, origin));
  return c;
}

absl::Status Gpt2Model::LoadWeights(const WeightLoader& w) {
  const int64_t d = config_.hidden_size, inner = config_.intermediate_size;
  const std::string dims = absl::StrCat("n_embd=", d);
  const std::string mlp = absl::StrCat("n_embd=", d, ", n_inner=", inner);
  ATTNSCOPE_ASSIGN_OR_RETURN(
      wte_, w.Get("wte.weight", {config_.vocab_size, d},
                  absl::StrCat("vocab_size=", config_.vocab_size, ", n_embd=", d)));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      wpe_, w.Get("wpe.weight", {config_.max_positions, d},
                  absl::StrCat("n_positions=", config_.max_positions, ", n_embd=", d)));
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string p = absl::StrCat("h.", i, ".");
    Gpt2Block b;
    ATTNSCOPE_ASSIGN_OR_RETURN(b.ln_1, LoadNorm(w, p + "ln_1"));
    ATTNSCOPE_ASSIGN_OR_RETURN(b.ln_2, LoadNorm(w, p + "ln_2"));
    ATTNSCOPE_ASSIGN_OR_RETURN(b.c_attn, LoadConv(w, p + "attn.c_attn", d, 3 * d, dims));
    ATTNSCOPE_ASSIGN_OR_RETURN(b.attn_proj, LoadConv(w, p + "attn.c_proj", d, d, dims));
    ATTNSCOPE_ASSIGN_OR_RETURN(b.c_fc, LoadConv(w, p + "mlp.c_fc", d, inner, mlp));
    ATTNSCOPE_ASSIGN_OR_RETURN(b.mlp_proj, LoadConv(w, p + "mlp.c_proj", inner, d, mlp));
    blocks_.push_back(std::move(b));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(ln_f_, LoadNorm(w, "ln_f"));
  lm_head_ = wte_;
  if (w.Has("lm_head.weight")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        lm_head_, w.Get("lm_head.weight", {config_.vocab_size, d},
                        absl::StrCat("vocab_size=", config_.vocab_size, ", n_embd=", d)));
  }
  return absl::OkStatus();
}

// x (B, T, D) -> logits (B, T, V). A single row (a decoding step) goes
// through matrix-vector: GEMM would first repack the whole (V, D) head.
at::Tensor Gpt2Model::Logits(const at::Tensor& x) const {
  const at::Tensor rows = x.reshape({-1, config_.hidden_size});
  const at::Tensor logits = rows.size(0) == 1 ? at::mv(lm_head_, rows[0]).unsqueeze(0)
                                              : at::mm(rows, lm_head_.t());
  return logits.view({x.size(0), x.size(1), config_.vocab_size});
}

at::Tensor Gpt2Model::Activate(const at::Tensor& x) const {
  switch (config_.activation) {
    case Activation::kGeluTanh:
      return at::gelu(x, "tanh");
    case Activation::kGeluErf:
      return at::gelu(x);
    case Activation::kRelu:
      return at::relu(x);
  }
  return x;
}

// One pre-LN block: x + attn(ln_1(x)), then + mlp(ln_2(.)). x is (B, T, D).
at::Tensor Gpt2Model::RunBlock(int layer, const at::Tensor& x, const ForwardOptions& options,
                               int64_t past, Gpt2Cache* cache, ObserverSet& observers) const {
  const Gpt2Block& b = blocks_[layer];
  const int64_t batch = x.size(0), tokens = x.size(1), d = config_.hidden_size;
  const int64_t heads = config_.num_heads, head_dim = config_.head_dim;
  const at::Tensor a = Norm(x, b.ln_1).reshape({batch * tokens, d});
  // c_attn's output columns are contiguous blocks q | k | v, each (H, d).
  const at::Tensor qkv = at::addmm(b.c_attn.bias, a, b.c_attn.weight)
                             .view({batch, tokens, 3, heads, head_dim})
                             .permute({2, 0, 3, 1, 4});  // (3, B, H, T, d)
  at::Tensor k = qkv[1], v = qkv[2];
  if (cache != nullptr) {
    if (past > 0) {
      k = at::cat({cache->keys[layer], k}, 2);
      v = at::cat({cache->values[layer], v}, 2);
    }
    cache->keys[layer] = k.contiguous();
    cache->values[layer] = v.contiguous();
  }
  AttentionStep step;
  step.layer = layer;
  step.past = past;
  step.query_block_size = options.query_block_size;
  step.score_divisor = config_.scale_attn_weights ? std::sqrt(static_cast<double>(head_dim)) : 1.0;
  if (config_.scale_attn_by_inverse_layer_idx) step.score_divisor *= (layer + 1);
  at::Tensor o = CausalAttention(qkv[0], k, v, step, observers);  // (B, H, T, d)
  AblateHeads(layer, options, o);
  o = o.permute({0, 2, 1, 3}).reshape({batch * tokens, d});
  at::Tensor h = x + at::addmm(b.attn_proj.bias, o, b.attn_proj.weight).view({batch, tokens, d});
  const at::Tensor m = Norm(h, b.ln_2).reshape({batch * tokens, d});
  const at::Tensor up = Activate(at::addmm(b.c_fc.bias, m, b.c_fc.weight));
  return h + at::addmm(b.mlp_proj.bias, up, b.mlp_proj.weight).view({batch, tokens, d});
}

absl::Status Gpt2Model::Forward(const std::vector<std::vector<int64_t>>& batch,
                                const ForwardOptions& options,
                                const std::vector<ForwardObserver*>& observers) const {
  auto* cache = static_cast<Gpt2Cache*>(options.cache);
  const int64_t past = cache ? cache->length() : 0;
  ATTNSCOPE_RETURN_IF_ERROR(CheckForwardInput(config_, batch, options, past));
  try {
    c10::InferenceMode inference;
    if (cache != nullptr) cache->Rollback();
    ObserverSet obs(observers);
    const int64_t batch_size = batch.size(), tokens = batch[0].size();
    const at::Tensor ids = IdsTensor(batch);  // (B, T)
    at::Tensor x = wte_.index_select(0, ids.flatten()).view({batch_size, tokens, -1}) +
                   wpe_.narrow(0, past, tokens).unsqueeze(0);
    obs.Begin(batch_size, tokens);
    obs.PublishHidden(0, x);
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      if (options.should_stop && options.should_stop()) {
        return absl::CancelledError(absl::StrCat("forward pass stopped before layer ", layer));
      }
      x = RunBlock(layer, x, options, past, cache, obs);
      if (layer + 1 < config_.num_layers) obs.PublishHidden(layer + 1, x);
    }
    x = Norm(x, ln_f_);
    obs.PublishHidden(static_cast<int>(config_.num_layers), x);
    if (obs.needs().logits) obs.PublishLogits(Logits(x));
    if (cache != nullptr) cache->Commit(past + tokens);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("GPT-2 forward pass failed in libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("GPT-2 forward pass failed: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LanguageModel>> LoadGpt2(const ModelConfig& config,
                                                        const SafetensorsCheckpoint& checkpoint) {
  const std::string prefix = DetectPrefix(checkpoint, "wte.weight", {"transformer.", ""});
  // lm_head.weight never carries the transformer. prefix.
  WeightLoader loader(checkpoint, prefix.empty() ? std::vector<std::string>{""}
                                                 : std::vector<std::string>{prefix, ""});
  auto model = std::make_unique<Gpt2Model>(config);
  try {
    c10::InferenceMode inference;
    ATTNSCOPE_RETURN_IF_ERROR(model->LoadWeights(loader));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("loading ", checkpoint.directory(), ": ", e.what()));
  }
  return model;
}

}  // namespace attnscope::model
