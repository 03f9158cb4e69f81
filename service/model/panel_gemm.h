// Internal to the model library: the project's own float32 matrix product for
// y = x W^T on CPUs with AVX2 and FMA, for the products of the forward pass
// on the BLAS path (CPUs without AVX-512). Torch-free.
//
// The layout of BLIS (Van Zee and van de Geijn): W is packed block by block
// into panels of 16 rows, x into panels of 6 rows, and a 6 x 16 kernel
// keeps its tile of y in twelve registers while it runs along k. The
// difference from a BLAS call on a widened copy: a bfloat16 W is widened to
// float32 while its block is packed (exactly: the bits shifted up), so the
// weights are read once, in their own type, and no float32 copy of a matrix
// or of a chunk of one is ever made.
#pragma once

#include <cstdint>

namespace attnscope::model {

enum class PanelWeights { kFloat32, kBfloat16 };

// True where this CPU runs the kernel (AVX2 and FMA).
bool PanelGemmAvailable();

// y (m x n, row stride ldy) = x (m x k, row stride ldx) W^T, W (n x k) at
// `w` with row stride ldw (in elements), float32 or bfloat16 (16-bit
// values, the upper half of a float32), accumulated in float32. Runs on the
// installed pool (core::ParallelFor), split over the columns of y; safe to
// call from several threads at once. Requires PanelGemmAvailable().
void PanelGemm(const float* x, int64_t m, int64_t ldx, const void* w, PanelWeights type,
               int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy);

}  // namespace attnscope::model
