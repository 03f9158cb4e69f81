#include "service/model/decoder_weights.h"

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "service/core/parallel.h"
#include "service/core/status_macros.h"
#include "service/core/vector_math.h"
#include "service/model/gemm.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

// Reads the tensors of one model, turning every layout into the runtime's.
class SpecReader {
 public:
  SpecReader(const ModelConfig& config, const WeightLoader& loader)
      : c_(config), s_(config.decoder), n_(config.decoder.names), w_(loader) {}

  absl::StatusOr<LayerWeights> Layer(int64_t i) const;
  absl::StatusOr<DecoderWeights> Globals() const;

 private:
  absl::StatusOr<at::Tensor> Matrix(const std::string& name, int64_t out, int64_t in,
                                    const std::string& origin) const;
  absl::StatusOr<LinearWeights> Linear(const std::string& name, int64_t out, int64_t in,
                                       bool bias, const std::string& origin) const;
  absl::StatusOr<NormWeights> Norm(const std::string& name, int64_t n, NormKind kind) const;
  absl::StatusOr<LinearWeights> Qkv(const std::string& layer) const;
  absl::StatusOr<LinearWeights> Up(const std::string& layer) const;
  std::string AttentionDims() const {
    return absl::StrCat("hidden_size=", c_.hidden_size, ", heads=", c_.num_heads,
                        ", kv_heads=", c_.num_kv_heads, ", head_dim=", c_.head_dim);
  }
  std::string MlpDims() const {
    return absl::StrCat("hidden_size=", c_.hidden_size, ", intermediate_size=",
                        c_.intermediate_size);
  }

  const ModelConfig& c_;
  const DecoderSpec& s_;
  const TensorNames& n_;
  const WeightLoader& w_;
};

absl::StatusOr<at::Tensor> SpecReader::Matrix(const std::string& name, int64_t out, int64_t in,
                                              const std::string& origin) const {
  // As stored for BF16 (packed or widened before each product), else float32.
  if (!n_.conv1d) return w_.GetStored(name + ".weight", {out, in}, origin);
  // GPT-2's Conv1D stores (in, out): used as a transposed view (BLAS reads
  // it as it lies), not copied.
  ATTNSCOPE_ASSIGN_OR_RETURN(at::Tensor t, w_.GetStored(name + ".weight", {in, out}, origin));
  return t.t();
}

absl::StatusOr<LinearWeights> SpecReader::Linear(const std::string& name, int64_t out,
                                                 int64_t in, bool bias,
                                                 const std::string& origin) const {
  LinearWeights l;
  ATTNSCOPE_ASSIGN_OR_RETURN(l.weight, Matrix(name, out, in, origin));
  if (bias) {
    ATTNSCOPE_ASSIGN_OR_RETURN(l.bias, w_.Get(name + ".bias", {out}, origin));
  }
  return l;
}

absl::StatusOr<NormWeights> SpecReader::Norm(const std::string& name, int64_t n,
                                             NormKind kind) const {
  NormWeights w;
  w.kind = kind;
  w.eps = s_.norm_eps;
  if (!s_.norm_affine) return w;
  const std::string origin = absl::StrCat("width ", n);
  ATTNSCOPE_ASSIGN_OR_RETURN(w.weight, w_.Get(name + ".weight", {n}, origin));
  if (kind == NormKind::kRmsNormPlusOne) w.weight = w.weight + 1.0;  // as HF: 1.0 + w in float32
  if (kind == NormKind::kLayerNorm) {
    ATTNSCOPE_ASSIGN_OR_RETURN(w.bias, w_.Get(name + ".bias", {n}, origin));
  }
  return w;
}

absl::StatusOr<LinearWeights> SpecReader::Qkv(const std::string& p) const {
  const int64_t h = c_.hidden_size, d = c_.head_dim;
  const int64_t q_rows = c_.num_heads * d, kv_rows = c_.num_kv_heads * d;
  const bool bias = s_.attention.qkv_bias;
  switch (n_.qkv_layout) {
    case QkvLayout::kFused:
      return Linear(p + n_.qkv, q_rows + 2 * kv_rows, h, bias, AttentionDims());
    case QkvLayout::kFusedPerHead: {
      // Rows are [heads, 3, head_dim]: regroup to q | k | v.
      ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights l,
                                 Linear(p + n_.qkv, 3 * q_rows, h, bias, AttentionDims()));
      const at::Tensor stored = l.weight;
      l.weight = l.weight.view({c_.num_heads, 3, d, h}).transpose(0, 1).reshape({3 * q_rows, h});
      w_.ReleaseIfMapped(stored);  // copied by the regrouping
      if (bias) l.bias = l.bias.view({c_.num_heads, 3, d}).transpose(0, 1).reshape({-1});
      return l;
    }
    case QkvLayout::kSeparate:
      break;
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights q, Linear(p + n_.q, q_rows, h, bias, AttentionDims()));
  ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights k, Linear(p + n_.k, kv_rows, h, bias, AttentionDims()));
  ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights v, Linear(p + n_.v, kv_rows, h, bias, AttentionDims()));
  LinearWeights l;
  l.weight = at::cat({q.weight, k.weight, v.weight}, 0);
  for (const LinearWeights* part : {&q, &k, &v}) w_.ReleaseIfMapped(part->weight);
  if (bias) l.bias = at::cat({q.bias, k.bias, v.bias}, 0);
  return l;
}

absl::StatusOr<LinearWeights> SpecReader::Up(const std::string& p) const {
  const int64_t h = c_.hidden_size, inner = c_.intermediate_size;
  const bool bias = s_.mlp.bias;
  if (!s_.mlp.gated) return Linear(p + n_.up, inner, h, bias, MlpDims());
  if (!n_.gate_up.empty()) return Linear(p + n_.gate_up, 2 * inner, h, bias, MlpDims());
  ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights gate, Linear(p + n_.gate, inner, h, bias, MlpDims()));
  ATTNSCOPE_ASSIGN_OR_RETURN(LinearWeights up, Linear(p + n_.up, inner, h, bias, MlpDims()));
  LinearWeights l;
  l.weight = at::cat({gate.weight, up.weight}, 0);
  for (const LinearWeights* part : {&gate, &up}) w_.ReleaseIfMapped(part->weight);
  if (bias) l.bias = at::cat({gate.bias, up.bias}, 0);
  return l;
}

absl::StatusOr<LayerWeights> SpecReader::Layer(int64_t i) const {
  const std::string p = absl::StrCat(n_.layer_prefix, i, ".");
  const int64_t h = c_.hidden_size;
  LayerWeights l;
  ATTNSCOPE_ASSIGN_OR_RETURN(l.attn_norm, Norm(p + n_.attn_norm, h, s_.norm));
  ATTNSCOPE_ASSIGN_OR_RETURN(l.mlp_norm, Norm(p + n_.mlp_norm, h, s_.norm));
  if (s_.post_sublayer_norms) {
    ATTNSCOPE_ASSIGN_OR_RETURN(l.post_attn_norm, Norm(p + n_.post_attn_norm, h, s_.norm));
    ATTNSCOPE_ASSIGN_OR_RETURN(l.post_mlp_norm, Norm(p + n_.post_mlp_norm, h, s_.norm));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(l.qkv, Qkv(p));
  if (s_.attention.qk_norm) {  // RMS norms over head_dim, Gemma's (1 + w) where the model's are
    const NormKind kind =
        s_.norm == NormKind::kRmsNormPlusOne ? NormKind::kRmsNormPlusOne : NormKind::kRmsNorm;
    ATTNSCOPE_ASSIGN_OR_RETURN(l.q_norm, Norm(p + n_.q_norm, c_.head_dim, kind));
    ATTNSCOPE_ASSIGN_OR_RETURN(l.k_norm, Norm(p + n_.k_norm, c_.head_dim, kind));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(l.o, Linear(p + n_.o, h, c_.num_heads * c_.head_dim,
                                         s_.attention.o_bias, AttentionDims()));
  ATTNSCOPE_ASSIGN_OR_RETURN(l.up, Up(p));
  ATTNSCOPE_ASSIGN_OR_RETURN(l.down,
                             Linear(p + n_.down, h, c_.intermediate_size, s_.mlp.bias, MlpDims()));
  return l;
}

absl::StatusOr<DecoderWeights> SpecReader::Globals() const {
  const int64_t h = c_.hidden_size, e = s_.embed_dim, v = c_.vocab_size;
  const std::string embed_dims = absl::StrCat("vocab_size=", v, ", embedding width=", e);
  DecoderWeights w;
  // As stored: a BF16 embedding is looked up and widened row by row.
  ATTNSCOPE_ASSIGN_OR_RETURN(w.embed, w_.GetStored(n_.embed + ".weight", {v, e}, embed_dims));
  if (s_.learned_positions) {
    const int64_t rows = c_.max_positions + s_.position_offset;
    // As stored too: the rows a pass uses are widened when added.
    ATTNSCOPE_ASSIGN_OR_RETURN(
        w.positions,
        w_.GetStored(n_.positions + ".weight", {rows, h},
               absl::StrCat("max_positions=", c_.max_positions, " + offset ", s_.position_offset,
                            ", hidden_size=", h)));
  }
  if (e != h) {
    const std::string dims = absl::StrCat("hidden_size=", h, ", word_embed_proj_dim=", e);
    ATTNSCOPE_ASSIGN_OR_RETURN(w.project_in, Linear(n_.project_in, h, e, false, dims));
    ATTNSCOPE_ASSIGN_OR_RETURN(w.project_out, Linear(n_.project_out, e, h, false, dims));
  }
  if (s_.final_norm) {
    ATTNSCOPE_ASSIGN_OR_RETURN(w.final_norm, Norm(n_.final_norm, h, s_.norm));
  }
  if (s_.tied_head) {
    w.head = w.embed;
  } else {
    ATTNSCOPE_ASSIGN_OR_RETURN(w.head, w_.GetUnprefixedStored(n_.head + ".weight", {v, e}, embed_dims));
  }
  return w;
}

}  // namespace

absl::StatusOr<DecoderWeights> LoadDecoderWeights(const ModelConfig& config,
                                                  const WeightLoader& loader) {
  const SpecReader reader(config, loader);
  ATTNSCOPE_ASSIGN_OR_RETURN(DecoderWeights w, reader.Globals());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    ATTNSCOPE_ASSIGN_OR_RETURN(LayerWeights layer, reader.Layer(i));
    w.layers.push_back(std::move(layer));
  }
  return w;
}

int64_t HeldBytes(const DecoderWeights& w, std::set<const void*>& seen) {
  int64_t total = 0;
  auto tensor = [&](const at::Tensor& t) {
    if (!t.defined() || !seen.insert(t.storage().data()).second) return;
    total += static_cast<int64_t>(t.storage().nbytes());
  };
  auto packed = [&](const std::shared_ptr<const PackedMatrix>& p) {
    if (p && seen.insert(p.get()).second) total += static_cast<int64_t>(p->bytes());
  };
  auto norm = [&](const NormWeights& n) {
    tensor(n.weight);
    tensor(n.bias);
  };
  // A matrix kept beside its packed copy is a view of the mapped checkpoint
  // whose pages were dropped at packing: the products read the packed copy.
  auto linear = [&](const LinearWeights& l) {
    if (!l.packed) tensor(l.weight);
    tensor(l.bias);
    packed(l.packed);
  };
  if (!w.embed_in_head) tensor(w.embed);
  tensor(w.positions);
  if (!w.head_packed) tensor(w.head);
  packed(w.head_packed);
  norm(w.final_norm);
  linear(w.project_in);
  linear(w.project_out);
  for (const LayerWeights& l : w.layers) {
    for (const NormWeights* n : {&l.attn_norm, &l.mlp_norm, &l.post_attn_norm, &l.post_mlp_norm,
                                 &l.q_norm, &l.k_norm}) {
      norm(*n);
    }
    for (const LinearWeights* m : {&l.qkv, &l.o, &l.up, &l.down}) linear(*m);
  }
  return total;
}

void ForEachLinear(DecoderWeights& w, const std::function<void(LinearWeights&)>& fn) {
  fn(w.project_in);
  fn(w.project_out);
  for (LayerWeights& l : w.layers) {
    for (LinearWeights* m : {&l.qkv, &l.o, &l.up, &l.down}) fn(*m);
  }
}

void PackMatrices(DecoderWeights& w, PackedType type,
                  const std::function<bool(const at::Tensor&)>& release,
                  const std::function<void()>& let_go, PackLayout layout) {
  // A bfloat16 matrix (a BF16 checkpoint's) is packed as it is, whatever
  // `type`: its float32 products widen it chunk by chunk (Operands::kFloat32).
  auto packed_type = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kBFloat16 ? PackedType::kBfloat16 : type;
  };
  // Null where the layout leaves the matrix as it is.
  auto pack = [&](const at::Tensor& t) -> std::shared_ptr<const PackedMatrix> {
    const bool bf16 = t.scalar_type() == at::kBFloat16;
    if (layout == PackLayout::kBf16HeadPanels) {
      if (!bf16 || t.stride(1) != 1) return nullptr;
      auto memory = std::make_shared<at::Tensor>(
          at::empty({PackedMatrix::PanelBytes(t.size(0), t.size(1)) / 2}, at::kBFloat16));
      void* out = memory->data_ptr();
      return PackedMatrix::PackPanels(reinterpret_cast<const uint16_t*>(t.data_ptr()), t.size(0),
                                      t.size(1), t.stride(0), out, std::move(memory));
    }
    return PackedMatrix::Pack(t.data_ptr(), bf16 ? PackedType::kBfloat16 : PackedType::kFloat32,
                              t.size(0), t.size(1), t.stride(0), t.stride(1), packed_type(t));
  };
  auto linear = [&](LinearWeights& l) {
    if (!l.weight.defined()) return;
    l.packed = pack(l.weight);
    if (l.packed == nullptr) return;
    if (!release(l.weight)) {
      l.weight = at::Tensor();
      if (let_go) let_go();
    }
  };
  // The head first: it is the largest, and its source and packed copy
  // coexist for a moment before the source goes.
  if (w.head.defined() && (w.head_packed = pack(w.head)) != nullptr) {
    const bool tied = w.head.is_same(w.embed);
    const bool mapped = release(w.head);
    // A tied head packed with the embedding's own values (float32, or a
    // bfloat16 one as stored) also serves the embedding's lookups
    // (GatherRows): a converted embedding is then let go too.
    w.embed_in_head = tied && (w.head_packed->type() == PackedType::kFloat32 ||
                               w.head.scalar_type() == at::kBFloat16);
    if (!mapped && (!tied || w.embed_in_head)) {
      w.head = at::Tensor();
      if (tied) w.embed = at::Tensor();
      if (let_go) let_go();
    }
  }
  if (layout == PackLayout::kOneDnn) ForEachLinear(w, linear);
}

at::Tensor PackedLinear(const at::Tensor& x, const PackedMatrix& p, const at::Tensor& bias,
                        Epilogue epilogue, Operands operands) {
  at::Tensor rows = x.reshape({-1, x.size(-1)});
  if (rows.stride(1) != 1 || (rows.size(0) > 1 && rows.stride(0) < rows.size(1))) {
    rows = rows.contiguous();
  }
  const int64_t ldx = rows.size(0) > 1 ? rows.stride(0) : rows.size(1);
  at::Tensor y = at::empty({rows.size(0), p.n()}, x.options());
  const at::Tensor b = bias.defined() ? bias.contiguous() : bias;
  at::internal::lazy_init_num_threads();  // this thread's OpenMP count, which oneDNN reads
  p.Multiply(rows.data_ptr<float>(), rows.size(0), ldx,
             b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>(), p.n(), epilogue,
             operands);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = p.n();
  return y.view(sizes);
}

namespace {

// rows x k bfloat16 values (row stride `ld`) widened to float32 (exact: the
// bits shifted up) into `out` (rows x k, dense), on the installed pool.
void WidenRows(const at::BFloat16* w, int64_t ld, int64_t rows, int64_t k, float* out) {
  core::ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const uint16_t* src = reinterpret_cast<const uint16_t*>(w + r * ld);
                        uint32_t* dst = reinterpret_cast<uint32_t*>(out + r * k);
                        for (int64_t j = 0; j < k; ++j) dst[j] = static_cast<uint32_t>(src[j]) << 16;
                      }
                    });
}

}  // namespace

at::Tensor WidenedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto optional = [](const at::Tensor& t) {
    return t.defined() ? c10::optional<at::Tensor>(t) : c10::optional<at::Tensor>();
  };
  const bool plain = x.is_cpu() && weight.is_cpu() && x.scalar_type() == at::kFloat &&
                     weight.dim() == 2 && weight.stride(1) == 1;
  if (weight.scalar_type() == at::kFloat && plain && PanelProducts() &&
      x.numel() > kDotProductRows * weight.size(1)) {
    // The same kernel as for bfloat16 weights: a BF16 checkpoint and an F32
    // one holding the same values give the same bits.
    const int64_t n = weight.size(0), k = weight.size(1);
    const at::Tensor a = x.contiguous();
    const int64_t m = a.numel() / k;
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = n;
    at::Tensor y = at::empty(sizes, x.options());
    PanelGemm(a.data_ptr<float>(), m, k, weight.data_ptr<float>(), PanelWeights::kFloat32, n, k,
              weight.stride(0), y.data_ptr<float>(), n);
    if (bias.defined()) y.add_(bias);
    return y;
  }
  if (weight.scalar_type() != at::kBFloat16) return at::linear(x, weight, optional(bias));
  const int64_t n = weight.size(0), k = weight.size(1);
  if (!plain) return at::linear(x, weight.to(at::kFloat), optional(bias));
  // Chunks of rows of 16 MiB as float32: BLAS packs its operands again on
  // every call, so fewer, larger calls than the packed path's cache-sized
  // chunks. Each chunk is widened into the calling thread's scratch (reused:
  // no allocation, no page faults) and multiplied straight into its columns
  // of y.
  constexpr int64_t kChunkBytes = int64_t{16} << 20;
  const int64_t per = std::min(n, std::max<int64_t>(64, kChunkBytes / (4 * k)));
  const at::Tensor a = x.contiguous();
  const int64_t m = a.numel() / k;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = n;
  at::Tensor y = at::empty(sizes, x.options());
  const at::BFloat16* w = weight.data_ptr<at::BFloat16>();
  const int64_t ld = weight.stride(0);
  if (m <= kDotProductRows) {
    // A decoding step: each weight row read once, widened in registers.
    const float* xs = a.data_ptr<float>();
    float* ys = y.data_ptr<float>();
    core::ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      vmath::Bf16RowDots(xs, k, m, reinterpret_cast<const uint16_t*>(w + begin * ld), ld,
                         end - begin, k, ys + begin, n);
    });
    if (bias.defined()) y.add_(bias);
    return y;
  }
  if (PanelProducts()) {
    // Widened while packed, block by block, inside the product's kernel.
    PanelGemm(a.data_ptr<float>(), m, k, w, PanelWeights::kBfloat16, n, k, ld, y.data_ptr<float>(),
              n);
    if (bias.defined()) y.add_(bias);
    return y;
  }
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(per * k)) scratch.resize(static_cast<size_t>(per * k));
  for (int64_t r = 0; r < n; r += per) {
    const int64_t rows = std::min(per, n - r);
    WidenRows(w + r * ld, ld, rows, k, scratch.data());
    Sgemm(/*b_transposed=*/true, m, rows, k, 1.0f, a.data_ptr<float>(), k, scratch.data(), k,
          y.data_ptr<float>() + r, n);
  }
  if (bias.defined()) y.add_(bias);
  return y;
}

at::Tensor LinearActivated(const at::Tensor& x, const LinearWeights& w, Activation activation,
                           Operands operands) {
  if (!w.packed || !w.packed->FusesEpilogue()) {
    at::Tensor y = w.packed ? PackedLinear(x, *w.packed, w.bias, Epilogue::kNone, operands)
                            : Linear(x, w);
    ActivateInPlace(y, activation);
    return y;
  }
  Epilogue epilogue = Epilogue::kNone;
  switch (activation) {
    case Activation::kGeluTanh:
      epilogue = Epilogue::kGeluTanh;
      break;
    case Activation::kGeluErf:
      epilogue = Epilogue::kGeluErf;
      break;
    case Activation::kRelu:
      epilogue = Epilogue::kRelu;
      break;
    case Activation::kSilu:
      epilogue = Epilogue::kSilu;
      break;
  }
  return PackedLinear(x, *w.packed, w.bias, epilogue, operands);
}

at::Tensor Linear(const at::Tensor& x, const LinearWeights& w) {
  if (w.packed) return PackedLinear(x, *w.packed, w.bias, Epilogue::kNone, Operands::kFloat32);
  return WidenedLinear(x, w.weight, w.bias);
}

at::Tensor Normalize(const at::Tensor& x, const NormWeights& w) {
  if (w.kind == NormKind::kLayerNorm) {
    return at::layer_norm(x, {x.size(-1)}, w.weight, w.bias, w.eps);
  }
  const at::Tensor normed = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + w.eps);
  return w.weight.defined() ? normed * w.weight : normed;
}

void ActivateInPlace(at::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::kGeluTanh:
      at::gelu_(x, "tanh");
      return;
    case Activation::kGeluErf:
      at::gelu_(x);
      return;
    case Activation::kRelu:
      at::relu_(x);
      return;
    case Activation::kSilu:
      at::silu_(x);
      return;
  }
}

}  // namespace attnscope::model
