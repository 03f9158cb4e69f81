// Internal to the model library: the parameters of a DecoderSpec model in one
// layout whatever the checkpoint's (matrices (out, in), q | k | v fused into
// one projection, gate | up fused into one), and the building blocks that
// use them. Norms, biases and learned positions are float32; the matrices
// and the embedding are float32, or bfloat16 as a BF16 checkpoint stores
// them (held once: products widen them to float32 just before they run, or
// multiply them as they are in bfloat16 precision). Tensors a checkpoint
// holds in this layout are read-only views of its mapped file (GPT-2's
// (in, out) Conv1D matrices as transposed views); the others are copies.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "service/model/decoder_spec.h"
#include "service/model/gemm.h"
#include "service/model/model_config.h"
#include "service/model/weight_loader.h"

namespace attnscope::model {

struct LinearWeights {
  // (out, in). Once packed: kept only where it is a view of the checkpoint's
  // mapping (whose pages are then dropped), else undefined.
  at::Tensor weight;
  at::Tensor bias;  // (out) or undefined
  // oneDNN's packed copy (CPU, GemmBackend::kOneDnn), which the products use.
  std::shared_ptr<const PackedMatrix> packed;
  bool present() const { return weight.defined() || packed != nullptr; }
};

// A norm and how it normalises: the kind and epsilon are settled when the
// weights are read (q/k norms follow the model's RMS variant), so the pass
// never works them out again.
struct NormWeights {
  at::Tensor weight;  // (n) or undefined (no affine); (1 + w) for kRmsNormPlusOne
  at::Tensor bias;    // (n) or undefined
  NormKind kind = NormKind::kRmsNorm;
  double eps = 1e-6;
};

struct LayerWeights {
  NormWeights attn_norm, mlp_norm, post_attn_norm, post_mlp_norm;
  LinearWeights qkv;  // ((heads + 2 kv_heads) * head_dim, H): rows q | k | v
  NormWeights q_norm, k_norm;  // (head_dim) when the spec has q/k norms
  LinearWeights o;             // (H, heads * head_dim)
  LinearWeights up;            // (I, H), or (2 I, H) rows gate | up when gated
  LinearWeights down;          // (H, I)
};

struct DecoderWeights {
  at::Tensor embed;      // (V, E) float32 or bfloat16; undefined when a tied head serves it
  at::Tensor positions;  // (max_positions + offset, H) or undefined
  LinearWeights project_in, project_out;  // (H, E), (E, H) or undefined
  NormWeights final_norm;
  at::Tensor head;  // (V, E): `embed` when tied; undefined once packed unless mapped
  std::shared_ptr<const PackedMatrix> head_packed;
  // A tied head packed as float32: lookups read head_packed. From a mapped
  // embedding whose pages were dropped (touching the mapping would load
  // whole folios of it again), or from a converted one that was let go
  // (`embed` is then undefined: no second float32 copy of it).
  bool embed_in_head = false;
  std::vector<LayerWeights> layers;
};

// Reads every parameter `config.decoder.names` names. InvalidArgument naming
// the tensor for a missing one or a shape that disagrees with config.json.
absl::StatusOr<DecoderWeights> LoadDecoderWeights(const ModelConfig& config,
                                                  const WeightLoader& loader);

// Bytes the weights occupy: every tensor's storage and every packed matrix
// the forward pass reads, each counted once across calls with the same
// `seen` (a view of the mapped checkpoint, such as an untied BF16
// embedding, counts as the bytes it spans, although only the rows read are
// resident; a source kept beside its packed copy is not read and its pages
// were dropped: not counted).
int64_t HeldBytes(const DecoderWeights& w, std::set<const void*>& seen);

// fn on every projection: project_in/out, then each layer's q|k|v, o, up,
// down (the head is not a LinearWeights).
void ForEachLinear(DecoderWeights& w, const std::function<void(LinearWeights&)>& fn);

// Packs every matrix (the head first, then the projections) as `type` for
// oneDNN, each right after the other, and hands each source to `release` once it is
// packed: `release` returns true where the source is a view of the mapped
// checkpoint whose pages it dropped (the tensor is kept: reading it faults
// its pages back in), false where the tensor owns its memory (a converted
// copy), which is then let go, except the embedding a tied head shares, and
// `let_go` (if set) is called: LoadDecoder unmaps the copy's buffer there at
// once, so that the packed copies do not pile up beside the converted ones.
//
// kBf16HeadPanels instead packs only a bfloat16 head (rows dense) for the
// AVX2 kernel (PackedMatrix::PackPanels; `type` unused), on CPUs without
// AVX-512: the head is multiplied once per block of logit rows and would be
// packed again for each, while a projection's product packs each block of
// its weights once for all of a pass's rows. Everything else stays as it is.
enum class PackLayout { kOneDnn, kBf16HeadPanels };
void PackMatrices(DecoderWeights& w, PackedType type,
                  const std::function<bool(const at::Tensor&)>& release,
                  const std::function<void()>& let_go = {},
                  PackLayout layout = PackLayout::kOneDnn);

// y = x W^T + b over the last dimension, in float32 (a bfloat16 W, packed
// or not, widened just before its products).
at::Tensor Linear(const at::Tensor& x, const LinearWeights& w);

// y = x P^T (+ b) over the last dimension through a packed matrix, with
// `operands` (gemm.h: float32, or the stored type). With `epilogue`, the
// activation applied in the product's kernel.
at::Tensor PackedLinear(const at::Tensor& x, const PackedMatrix& p, const at::Tensor& bias,
                        Epilogue epilogue, Operands operands);

// Up to this many rows of x (a decoding step) take dot products on a
// bfloat16 W's rows, each row read once (vmath::Bf16RowDots).
inline constexpr int64_t kDotProductRows = 8;

// y = x W^T (+ b) in float32 for an unpacked W. A bfloat16 W is never
// copied whole to float32: up to kDotProductRows rows of x take dot products on its
// bfloat16 rows; more go through PanelGemm, which widens W (exactly) block
// by block while it packs it (where PanelProducts(); elsewhere chunks of at
// most 16 MiB as float32 are widened just before their BLAS products).
at::Tensor WidenedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// activation(x W^T + b) in one product where `w` is packed (the activation
// inside oneDNN's kernel, with `operands`), else the product (float32) then
// ActivateInPlace.
at::Tensor LinearActivated(const at::Tensor& x, const LinearWeights& w, Activation activation,
                           Operands operands);

// The norm `w` (its kind, epsilon and weights) over the last dimension.
at::Tensor Normalize(const at::Tensor& x, const NormWeights& w);

// x = activation(x), in place (the MLP's inner activations are the pass's
// largest tensors after the logits: no second copy of them).
void ActivateInPlace(at::Tensor& x, Activation activation);

}  // namespace attnscope::model
