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
// or of a chunk of one is ever made. A W multiplied many times a pass (a
// BF16 checkpoint's head, once per block of logit rows) can be laid out
// once, at load, as the kernel reads it (PackBf16Panels) instead.
#pragma once

#include <cstdint>

namespace attnscope::model {

// W as the checkpoint holds it (rows dense, row stride ldw; packed block by
// block while it is multiplied), or bfloat16 packed once ahead
// (PackBf16Panels; ldw unused).
enum class PanelWeights { kFloat32, kBfloat16, kBfloat16Panels };

// True where this CPU runs the kernel (AVX2 and FMA).
bool PanelGemmAvailable();

// y (m x n, row stride ldy) = x (m x k, row stride ldx) W^T, W (n x k) at
// `w` with row stride ldw (in elements), float32 or bfloat16 (16-bit
// values, the upper half of a float32), accumulated in float32. Runs on the
// installed pool (core::ParallelFor), split over the columns of y; safe to
// call from several threads at once. Requires PanelGemmAvailable().
void PanelGemm(const float* x, int64_t m, int64_t ldx, const void* w, PanelWeights type,
               int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy);

// Which tiles PanelGemm runs: AVX2's 6 x 16 (twelve 8-float accumulators),
// or AVX-512's 12 x 32 (24 16-float accumulators) where the CPU has
// AVX-512F and BW, with AVX2 tiles at its edges. Every element of y takes
// the same operations in the same order in either, so both give the same
// bits. ATTNSCOPE_PANEL_ISA=avx2 keeps the AVX2 tiles (for comparison).
enum class PanelIsa { kAvx2, kAvx512 };
PanelIsa ChosenPanelIsa();
// PanelGemm on the given tiles (kAvx512 requires AVX-512F and BW).
void PanelGemmOn(PanelIsa isa, const float* x, int64_t m, int64_t ldx, const void* w,
                 PanelWeights type, int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy);

// Bfloat16 products: y = bf16(x) W^T for a bfloat16 W (kBfloat16 rows or
// kBfloat16Panels), x rounded to bfloat16 (nearest even), accumulated in
// float32. Where PanelBf16DotsAvailable() (AVX-512 BF16) and k is even, at
// least 12 rows: the CPU's bfloat16 dot products, two steps of k per
// instruction (twice the float32 rate; the pair's two products added in
// the instruction's order, denormals flushed); otherwise PanelGemm's
// float32 products of the rounded x.
bool PanelBf16DotsAvailable();
void PanelGemmBf16(const float* x, int64_t m, int64_t ldx, const void* w, PanelWeights type,
                   int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy);

// A bfloat16 W (n x k, row stride ldw) laid out once, ahead of its
// products, as the kernel reads it: panels of 16 rows, each step's 16 values
// together (rows 16 j .. 16 j + 7 in the low halves of eight 32-bit lanes,
// 16 j + 8 .. 16 j + 15 in the high halves; zeros past row n), widened to
// float32 in registers by the AVX2 tiles, block by block into float32
// panels for the AVX-512 ones. The same products as from the rows, to the bit;
// no packing per product. Bf16PanelElements(n, k) 16-bit values, 32-byte
// aligned. Runs on the installed pool.
int64_t Bf16PanelElements(int64_t n, int64_t k);
void PackBf16Panels(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, uint16_t* out);
// W[row][p] (its 16 bits) from the panels.
uint16_t Bf16PanelValue(const uint16_t* panels, int64_t k, int64_t row, int64_t p);

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
