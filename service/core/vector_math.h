// Row kernels of the hot path (softmax, entropies, norms, column sums) over
// plain float arrays, 16 lanes at a time on AVX-512 and 8 elsewhere, with
// exp and log evaluated by polynomials instead of per-element libm calls.
// Each kernel is compiled for AVX-512, for AVX2+FMA and for baseline x86-64
// and picks one at load time, so the binaries still run on CPUs without
// AVX2; ATTNSCOPE_VMATH=base|avx2 picks a narrower one (tests). Torch-free:
// the model runtime and the statistics share them.
#pragma once

#include <cstdint>
#include <cstring>

namespace attnscope::vmath {

// exp(x) and log(x) of one float, by the same polynomials the kernels use,
// in the instantiation in use (KernelSet()) (relative error about 1e-7; exp
// gives 0 below -87.3 and NaN for NaN; log is only meaningful for normal
// x > 0). For tests.
float Exp(float x);
float Log(float x);

// The instantiation in use: "avx512", "avx2" or "base".
const char* KernelSet();

// out[j] = exp(in[j] - m) / sum_k exp(in[k] - m), m = max in[0..n), n >= 1.
// `in` and `out` may be the same array (in place). Exponentials in float,
// their sum in double (over float partial sums of 8 terms a lane).
void Softmax(const float* in, int64_t n, float* out);

// Softmax, writing the same out[], and the entropy -sum_j out_j log out_j of
// the row (in nats), computed without a log per element as
// log Z - sum_j e_j (in_j - m) / Z, e_j = exp(in_j - m), Z = sum_j e_j: the
// same number up to rounding (about 1e-7 relative; the attention kernel
// hands it to the statistics so that they need not take logs again). For
// finite input.
double SoftmaxEntropy(const float* in, int64_t n, float* out);

// The per-row numbers of one attention row p[0..n):
//   entropy  = -sum_j p_j log p_j   (entries <= 0 count as 0)
//   weighted = sum_j p_j w_j        (0 when w is null)
// and column[j] += p_j for every j when `column` is non-null. Products are
// taken in float and summed in double (in float over 8 terms a lane). Without
// `with_entropy` the entropy is skipped (reported as 0): the caller has it
// from SoftmaxEntropy.
struct AttentionRowSums {
  double entropy = 0.0;
  double weighted = 0.0;
};
AttentionRowSums AttentionRow(const float* p, const float* w, int64_t n, double* column,
                              bool with_entropy = true);

// One row z[0..n) of logits, n >= 1: max_j z_j, log_z = log sum_j exp(z_j)
// and the entropy -sum_j q_j log q_j of q = softmax(z), in nats. Exponentials
// in float, sums in double.
struct LogitRowStats {
  double max = 0.0;
  double log_z = 0.0;
  double entropy = 0.0;
};
LogitRowStats LogitRow(const float* z, int64_t n);

// sum_j x_j^2 over x[0..n), in double (hidden states reach values of several
// thousand, whose squares would lose digits in float).
double SumSquares(const float* x, int64_t n);

// The indices of the k largest x[0..n) (ties: lower index first), largest
// first, in idx[0..min(k, n)); returns how many were written. NaN entries
// are never picked ahead of a number. One pass; blocks of 16 below the
// current k-th largest are skipped after one vector compare.
int64_t TopK(const float* x, int64_t n, int64_t k, int64_t* idx);

// A bfloat16 value, given by its bits, as a float (exact: the bits shifted
// up).
inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f rounded to bfloat16 (nearest, ties to even, as at::Tensor::to(kBFloat16);
// a NaN stays a quiet NaN), as its bits.
inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The products of the m rows of x (m x k floats, row stride ldx) with the n
// rows of w (n x k bfloat16 values, row stride ldw), each value widened
// exactly to float: y[i * ldy + r] = sum_j x[i * ldx + j] * w[r * ldw + j],
// summed in float as a float32 matrix product sums (in another order; each
// y the same bits whatever n and whichever rows are taken together). A
// decoding step's few rows against bfloat16 weights read each weight once
// this way, instead of widening the whole matrix first.
void Bf16RowDots(const float* x, int64_t ldx, int64_t m, const uint16_t* w, int64_t ldw,
                 int64_t n, int64_t k, float* y, int64_t ldy);

}  // namespace attnscope::vmath
