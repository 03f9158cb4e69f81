// Internal to the model library: the parameters of a DecoderSpec model as
// float32 tensors in one layout whatever the checkpoint's (matrices (out, in),
// q | k | v fused into one projection, gate | up fused into one), and the
// building blocks that use them. Tensors an F32 checkpoint holds in this
// layout are read-only views of its mapped file (GPT-2's (in, out) Conv1D
// matrices as transposed views); the others are converted copies.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "absl/status/statusor.h"
#include "service/model/decoder_spec.h"
#include "service/model/model_config.h"
#include "service/model/weight_loader.h"

namespace attnscope::model {

struct LinearWeights {
  at::Tensor weight;  // (out, in)
  at::Tensor bias;    // (out) or undefined
};

struct NormWeights {
  at::Tensor weight;  // (n) or undefined (no affine); (1 + w) for kRmsNormPlusOne
  at::Tensor bias;    // (n) or undefined
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
  at::Tensor embed;      // (V, E)
  at::Tensor positions;  // (max_positions + offset, H) or undefined
  LinearWeights project_in, project_out;  // (H, E), (E, H) or undefined
  NormWeights final_norm;
  at::Tensor head;  // (V, E): `embed` when tied
  std::vector<LayerWeights> layers;
};

// Reads every parameter `config.decoder.names` names. InvalidArgument naming
// the tensor for a missing one or a shape that disagrees with config.json.
absl::StatusOr<DecoderWeights> LoadDecoderWeights(const ModelConfig& config,
                                                  const WeightLoader& loader);

// y = x W^T + b over the last dimension.
at::Tensor Linear(const at::Tensor& x, const LinearWeights& w);

// The norm of `kind` over the last dimension.
at::Tensor Normalize(const at::Tensor& x, const NormWeights& w, NormKind kind, double eps);

// x = activation(x), in place (the MLP's inner activations are the pass's
// largest tensors after the logits: no second copy of them).
void ActivateInPlace(at::Tensor& x, Activation activation);

}  // namespace attnscope::model
