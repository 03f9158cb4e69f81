// Internal to the model library: the libtorch device a model runs on, moving
// its weights there, and the bfloat16 copies of its matrices.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "service/model/compute_options.h"
#include "service/model/decoder_weights.h"

namespace attnscope::model {

// kCpu: the CPU. kCuda: the first CUDA device, or FailedPrecondition saying
// why not (a libtorch built without CUDA, or no device visible) and what to
// do. kAuto: CUDA when libtorch sees a device, else the CPU.
absl::StatusOr<c10::Device> ResolveDevice(DeviceKind kind);

// Moves every tensor of `weights` to `device` (nothing to do on the CPU).
void MoveWeights(DecoderWeights& weights, const c10::Device& device);

// The same weights with every matrix of a product (projections, MLP, head)
// rounded to bfloat16; embeddings, biases and norms shared with `weights`
// (float32). Matrices already in bfloat16 (a BF16 checkpoint's, packed or
// not) are shared as they are: no second copy. Float32 packed matrices
// (oneDNN) become oneDNN's bfloat16 packing (half the bytes). Other float32
// matrices: bfloat16 tensors on CUDA and where the own kernel multiplies
// (PanelProducts(): the products a BF16 checkpoint's matrices take, the
// same bits); elsewhere float32 tensors holding the bfloat16-rounded
// values, so that no product pays a conversion.
DecoderWeights Bf16Matrices(const DecoderWeights& weights);

// x rounded to bfloat16 and back (same dtype and device as x).
at::Tensor RoundToBf16(const at::Tensor& x);

// y = bf16(x) W16^T (+ b in float32), float32 out, W16 from Bf16Matrices.
// Packed (oneDNN on an AVX-512 CPU): a bfloat16 product with float32
// accumulation and output, in oneDNN's bf16 kernels (native AVX-512 BF16
// instructions where the CPU has them). On CUDA the product runs in bfloat16 (its output rounded to bfloat16, as
// cuBLAS gives it); on the CPU, which has no native bfloat16 product in
// libtorch 1.13 (its fallback is far slower than float32 BLAS), the
// bfloat16-rounded operands are multiplied by float32 BLAS:
// every product of two bfloat16 values is exact in float32, so this is the
// bfloat16 product with float32 accumulation that AVX-512 BF16 computes.
at::Tensor LinearBf16(const at::Tensor& x, const LinearWeights& w16);

}  // namespace attnscope::model
