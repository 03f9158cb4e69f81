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

// Attention's two products on the same kernel, single-threaded (heads run
// in parallel around them), on keys and values packed once per layer and
// head instead of once per block of query rows. Require PanelGemmAvailable().
//
// Keys and value columns go in panels of this many.
inline constexpr int64_t kPanelWidth = 16;
// The panels of `n` keys or value columns take PanelFloats(n, d) floats;
// the buffer must be 32-byte aligned.
int64_t PanelFloats(int64_t n, int64_t d);
// Keys (keys x d, row stride ldk) as panels of 16 keys: panel j holds, for
// each of the d columns, the values of keys 16j .. 16j + 15 (zeros past the
// last key).
void PackKeyPanels(const float* k, int64_t ldk, int64_t keys, int64_t d, float* out);
// Values (keys x d, row stride ldv) as panels of 16 of their d columns:
// panel j holds, for each key, its columns 16j .. 16j + 15 (zeros past d).
void PackValuePanels(const float* v, int64_t ldv, int64_t keys, int64_t d, float* out);
// s[r][j] = scale * (q[r] . key j) for rows [0, rows) of q (row stride ldq)
// and keys [first, last) of the panels (first a multiple of 16), written at
// s + r * lds + j; nothing outside those columns is written.
void PanelScores(const float* q, int64_t rows, int64_t ldq, const float* key_panels, int64_t d,
                 int64_t first, int64_t last, float scale, float* s, int64_t lds);
// out[r] = sum over keys j in [first, last) of p[r][j] value j, for rows
// [0, rows) of p (row stride ldp; p[r][j] at p + r * ldp + j) and the value
// panels of `keys` keys; out (rows x d, row stride ldo) is overwritten.
void PanelWeightedValues(const float* p, int64_t rows, int64_t ldp, const float* value_panels,
                         int64_t keys, int64_t d, int64_t first, int64_t last, float* out,
                         int64_t ldo);

}  // namespace attnscope::model
