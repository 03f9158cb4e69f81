#include "service/core/vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

// The kernels work on GCC vector extensions of N floats. Each public kernel
// is one always-inlined body instantiated three times, 16 lanes for AVX-512,
// 8 for AVX2+FMA and for the baseline, and dispatched on the CPU at run time
// (-Wno-psabi is set for this file: the 32- and 64-byte vectors never cross
// a non-inlined call).
namespace attnscope::vmath {
namespace {

// N floats at a time: 8 (AVX2, and the baseline's pairs of SSE registers) or
// 16 (AVX-512). D holds N/2 doubles.
template <int N>
struct Lanes {
  typedef float F __attribute__((vector_size(N * 4)));
  typedef int32_t I __attribute__((vector_size(N * 4)));
  typedef double D __attribute__((vector_size(N * 4)));
  typedef uint32_t U __attribute__((vector_size(N * 4)));
  // Float partial sums are flushed to double every kFlush steps: each lane
  // sums 8 terms in float (64 terms a flush with 8 lanes, 128 with 16, the
  // per-lane rounding the 8-lane kernels always had; every 4 steps with 16
  // lanes cost an AVX-512 exp pass ~20 % before Widen made flushes cheap).
  static constexpr int kFlush = 8;
};

#define INLINE [[gnu::always_inline]] inline

template <int N>
INLINE typename Lanes<N>::F Splat(float x) {
  return typename Lanes<N>::F{} + x;
}

template <int N>
INLINE typename Lanes<N>::F Load(const float* p) {
  typename Lanes<N>::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int N>
INLINE void Store(float* p, typename Lanes<N>::F v) {
  std::memcpy(p, &v, sizeof v);
}

// The first n < N floats of p, the other lanes `fill`.
template <int N>
INLINE typename Lanes<N>::F LoadPartial(const float* p, int64_t n, float fill) {
  float lanes[N];
  for (int i = 0; i < N; ++i) lanes[i] = i < n ? p[i] : fill;
  return Load<N>(lanes);
}

// The N floats of v as N doubles, in its low and high halves. One
// conversion of the whole vector: GCC 12 converts half a 16-float vector
// (8 floats to 8 doubles) as two 4-lane conversions and an insert, but all
// 16 as one extract and two vcvtps2pd, and clang as two vcvtps2pd. The
// first way made the flush of the float partial sums a large share of a
// logit row's time (docs/performance-history.md, "Measurements behind
// choices in the code").
template <int N>
INLINE void Widen(typename Lanes<N>::F v, typename Lanes<N>::D* low,
                  typename Lanes<N>::D* high) {
  typedef double W __attribute__((vector_size(N * 8)));
  const W w = __builtin_convertvector(v, W);
  std::memcpy(low, &w, sizeof *low);
  std::memcpy(high, reinterpret_cast<const char*>(&w) + sizeof *low, sizeof *high);
}

// Low half + high half, in double: a float partial sum flushed.
template <int N>
INLINE typename Lanes<N>::D Halves(typename Lanes<N>::F v) {
  typename Lanes<N>::D low, high;
  Widen<N>(v, &low, &high);
  return low + high;
}

template <int N>
INLINE double Sum(typename Lanes<N>::D v) {
  double s = 0.0;
  for (int i = 0; i < N / 2; ++i) s += v[i];
  return s;
}

// Cephes' expf: 2^n * p(r), r = x - n ln 2 in [-ln2/2, ln2/2]. NaN stays
// NaN; below -87.3 (2^-126) the result is 0, as softmax needs for masked
// and negligible entries.
template <int N>
INLINE typename Lanes<N>::F ExpV(typename Lanes<N>::F x) {
  using F = typename Lanes<N>::F;
  using I = typename Lanes<N>::I;
  const F c = x > 88.3762626647949f ? Splat<N>(88.3762626647949f) : x;
  // n = round(c log2 e) by adding 1.5 * 2^23: the sum's low mantissa bits
  // hold n itself, so neither a float -> int -> float round trip nor a
  // floor correction is needed, which makes an exp pass over a row
  // markedly faster.
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23, bits 0x4b400000
  const F t = c * 1.44269504088896341f + kRound;
  const F n = t - kRound;
  F r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const F z = r * r;
  F y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const I bits = (__builtin_bit_cast(I, t) + (127 - 0x4b400000)) << 23;
  const F out = y * __builtin_bit_cast(F, bits);
  return c < -87.33654f ? F{} : out;
}

// Cephes' logf for normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
// log x = e ln 2 + log1p(m - 1) by a degree-9 polynomial.
template <int N>
INLINE typename Lanes<N>::F LogV(typename Lanes<N>::F x) {
  using F = typename Lanes<N>::F;
  using I = typename Lanes<N>::I;
  const I bits = __builtin_bit_cast(I, x);
  F e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, F);
  const I mantissa = (bits & 0x007fffff) | 0x3f000000;  // in [0.5, 1)
  F m = __builtin_bit_cast(F, mantissa);
  const auto small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const F z = m * m;
  F y = 7.0376836292e-2f * m + -1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m + -1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m + -1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m + -2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  return m + y + e * 0.693359375f;
}

// Largest lane; NaN lanes are ignored unless all are NaN.
template <int N>
INLINE typename Lanes<N>::F Max(typename Lanes<N>::F a, typename Lanes<N>::F b) {
  return b > a ? b : a;
}

// One float through the vector kernels (Exp and Log: the tests check every
// instantiation's polynomials through them).
template <int N>
INLINE float ExpOneBody(float x) {
  return ExpV<N>(Splat<N>(x))[0];
}
template <int N>
INLINE float LogOneBody(float x) {
  return LogV<N>(Splat<N>(x))[0];
}

// Four independent running maxima: one alone is a chain of dependent
// vmaxps, one per N floats, which was a large share of LogitRow's time.
template <int N>
INLINE float MaxOf(const float* x, int64_t n) {
  using F = typename Lanes<N>::F;
  const F low = Splat<N>(-std::numeric_limits<float>::infinity());
  F m = low, m1 = low, m2 = low, m3 = low;
  int64_t j = 0;
  for (; j + 4 * N <= n; j += 4 * N) {
    m = Max<N>(m, Load<N>(x + j));
    m1 = Max<N>(m1, Load<N>(x + j + N));
    m2 = Max<N>(m2, Load<N>(x + j + 2 * N));
    m3 = Max<N>(m3, Load<N>(x + j + 3 * N));
  }
  m = Max<N>(Max<N>(m, m1), Max<N>(m2, m3));
  for (; j + N <= n; j += N) m = Max<N>(m, Load<N>(x + j));
  float best = m[0];
  for (int i = 1; i < N; ++i) best = m[i] > best ? m[i] : best;
  for (; j < n; ++j) best = x[j] > best ? x[j] : best;
  return best;
}

// kEntropy: also returns the entropy -sum_j p_j log p_j of the output,
// as log Z - sum_j e_j d_j / Z with d_j = in_j - max, e_j = exp(d_j) and
// Z = sum_j e_j (the same number, without a log per element).
template <int N, bool kEntropy>
INLINE double SoftmaxBodyT(const float* in, int64_t n, float* out) {
  using F = typename Lanes<N>::F;
  using D = typename Lanes<N>::D;
  const float max = MaxOf<N>(in, n);
  D sum{}, weighted{};
  F chunk{}, chunk_weighted{};
  int64_t j = 0;
  for (int step = 1; j + N <= n; j += N, ++step) {
    const F d = Load<N>(in + j) - max;
    const F e = ExpV<N>(d);
    Store<N>(out + j, e);
    chunk += e;
    // e is exactly 0 where d is very negative; d is finite for finite input.
    if constexpr (kEntropy) chunk_weighted += e * d;
    if (step % Lanes<N>::kFlush == 0) {  // float partial sums of 8 terms a lane
      sum += Halves<N>(chunk);
      chunk = F{};
      if constexpr (kEntropy) {
        weighted += Halves<N>(chunk_weighted);
        chunk_weighted = F{};
      }
    }
  }
  double total = Sum<N>(sum + Halves<N>(chunk));
  double total_weighted = 0.0;
  if constexpr (kEntropy) {
    total_weighted = Sum<N>(weighted + Halves<N>(chunk_weighted));
  }
  for (; j < n; ++j) {
    const float d = in[j] - max;
    out[j] = ExpV<N>(Splat<N>(d))[0];
    total += out[j];
    if constexpr (kEntropy) total_weighted += static_cast<double>(out[j]) * d;
  }
  const auto inv = static_cast<float>(1.0 / total);
  j = 0;
  for (; j + N <= n; j += N) Store<N>(out + j, Load<N>(out + j) * inv);
  for (; j < n; ++j) out[j] *= inv;
  return kEntropy ? std::log(total) - total_weighted / total : 0.0;
}

template <int N>
INLINE void SoftmaxBody(const float* in, int64_t n, float* out) {
  SoftmaxBodyT<N, false>(in, n, out);
}

template <int N>
INLINE double SoftmaxEntropyBody(const float* in, int64_t n, float* out) {
  return SoftmaxBodyT<N, true>(in, n, out);
}

template <int N>
INLINE void AddColumns(double* column, typename Lanes<N>::F p) {
  using D = typename Lanes<N>::D;
  D lo, hi, p_lo, p_hi;
  std::memcpy(&lo, column, sizeof lo);
  std::memcpy(&hi, column + N / 2, sizeof hi);
  Widen<N>(p, &p_lo, &p_hi);
  lo += p_lo;
  hi += p_hi;
  std::memcpy(column, &lo, sizeof lo);
  std::memcpy(column + N / 2, &hi, sizeof hi);
}

template <int N, bool kEntropy>
INLINE AttentionRowSums AttentionRowBodyT(const float* p, const float* w, int64_t n,
                                          double* column) {
  using F = typename Lanes<N>::F;
  using D = typename Lanes<N>::D;
  D entropy{}, weighted{};
  F chunk_entropy{}, chunk_weighted{};
  int64_t j = 0;
  for (int step = 1; j < n; j += N, ++step) {
    const int64_t lanes = n - j < N ? n - j : N;
    const F v = lanes == N ? Load<N>(p + j) : LoadPartial<N>(p + j, lanes, 0.0f);
    if constexpr (kEntropy) {
      const F positive = v > 0.0f ? v : F{};
      // log of a non-positive lane is garbage, but it is multiplied by 0.
      chunk_entropy += positive * LogV<N>(v > 0.0f ? v : Splat<N>(1.0f));
    }
    if (w != nullptr) {
      chunk_weighted += v * (lanes == N ? Load<N>(w + j) : LoadPartial<N>(w + j, lanes, 0.0f));
    }
    if (column != nullptr) {
      if (lanes == N) {
        AddColumns<N>(column + j, v);
      } else {
        for (int64_t i = 0; i < lanes; ++i) column[j + i] += v[i];
      }
    }
    if (step % Lanes<N>::kFlush == 0 || j + N >= n) {  // flush the float partial sums
      entropy += Halves<N>(chunk_entropy);
      weighted += Halves<N>(chunk_weighted);
      chunk_entropy = F{};
      chunk_weighted = F{};
    }
  }
  AttentionRowSums out;
  out.entropy = -Sum<N>(entropy);
  out.weighted = Sum<N>(weighted);
  return out;
}

template <int N>
INLINE AttentionRowSums AttentionRowBody(const float* p, const float* w, int64_t n,
                                         double* column) {
  return AttentionRowBodyT<N, true>(p, w, n, column);
}

template <int N>
INLINE AttentionRowSums AttentionRowSumsBody(const float* p, const float* w, int64_t n,
                                             double* column) {
  return AttentionRowBodyT<N, false>(p, w, n, column);
}

template <int N>
INLINE LogitRowStats LogitRowBody(const float* z, int64_t n) {
  using F = typename Lanes<N>::F;
  using D = typename Lanes<N>::D;
  const float max = MaxOf<N>(z, n);
  // A pad far enough below the max that its exp is exactly 0 (and 0 * pad too).
  const float pad = max - 200.0f;
  D sum{}, weighted{};
  F chunk_sum{}, chunk_weighted{};
  int64_t j = 0;
  for (int step = 1; j < n; j += N, ++step) {
    const int64_t lanes = n - j < N ? n - j : N;
    const F d = (lanes == N ? Load<N>(z + j) : LoadPartial<N>(z + j, lanes, pad)) - max;
    const F e = ExpV<N>(d);
    chunk_sum += e;
    chunk_weighted += e * d;
    if (step % Lanes<N>::kFlush == 0 || j + N >= n) {
      sum += Halves<N>(chunk_sum);
      weighted += Halves<N>(chunk_weighted);
      chunk_sum = F{};
      chunk_weighted = F{};
    }
  }
  const double s = Sum<N>(sum);
  const double log_s = std::log(s);
  LogitRowStats out;
  out.max = max;
  out.log_z = max + log_s;
  // -sum q log q with log q = d - log s: log s - (sum e d) / s, both terms >= 0.
  out.entropy = log_s - Sum<N>(weighted) / s;
  return out;
}

template <int N>
INLINE double SumSquaresBody(const float* x, int64_t n) {
  using D = typename Lanes<N>::D;
  D acc{};
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto v = Load<N>(x + j);
    D lo, hi;
    Widen<N>(v, &lo, &hi);
    acc += lo * lo + hi * hi;
  }
  double s = Sum<N>(acc);
  for (; j < n; ++j) s += static_cast<double>(x[j]) * x[j];
  return s;
}

// Dot products of float rows with bfloat16 rows, 2N values a step: the
// step's 2N bfloat16 values read as N 32-bit words, whose low halves
// (shifted up) are the even values and whose high halves (masked) the odd
// ones, exactly as floats: one load, one shift and one mask for 2N values,
// where widening them in order took GCC's generic code six instructions
// for N. The float rows are read in the same order, permuted once per call
// (DealRow): each step's even values, then its odd ones.
constexpr int64_t kMaxDotRows = 4;
// How far ahead of its loads (in bfloat16 values: four 64-byte lines) each
// weight row is prefetched.
constexpr int64_t kDotPrefetchAhead = 128;

// out = row x (k floats) with each step of 2N values dealt into its even
// values then its odd ones; the tail past the last whole step as it is.
template <int N>
INLINE void DealRow(const float* x, int64_t k, float* out) {
  int64_t j = 0;
  for (; j + 2 * N <= k; j += 2 * N) {
    for (int i = 0; i < N; ++i) {
      out[j + i] = x[j + 2 * i];
      out[j + N + i] = x[j + 2 * i + 1];
    }
  }
  for (; j < k; ++j) out[j] = x[j];
}

// A step's even and odd bfloat16 values at p as floats.
template <int N>
INLINE void LoadBf16Pairs(const uint16_t* p, typename Lanes<N>::F* even,
                          typename Lanes<N>::F* odd) {
  using U = typename Lanes<N>::U;
  U words;
  std::memcpy(&words, p, sizeof words);
  const U low = words << 16, high = words & 0xFFFF0000u;
  std::memcpy(even, &low, sizeof low);
  std::memcpy(odd, &high, sizeof high);
}

// The end of one dot product: the even and odd accumulators added, their
// lanes summed in order, then the terms from j to k (x dealt, its tail in
// order) one by one.
template <int N>
INLINE float FinishDot(typename Lanes<N>::F a, typename Lanes<N>::F b, const float* x,
                       const uint16_t* w, int64_t j, int64_t k) {
  const typename Lanes<N>::F s = a + b;
  float lanes[N];
  std::memcpy(lanes, &s, sizeof lanes);
  float total = 0.0f;
  for (int l = 0; l < N; ++l) total += lanes[l];
  for (int64_t t = j; t < k; ++t) total += x[t] * Bf16ToFloat(w[t]);
  return total;
}

// Up to kMaxDotRows dealt rows of x (row stride ldx) against one bfloat16
// row w.
template <int N>
INLINE void DotsOfOneRow(const float* x, int64_t ldx, int64_t m, const uint16_t* w, int64_t k,
                         float* y, int64_t ldy) {
  using F = typename Lanes<N>::F;
  F a[kMaxDotRows] = {}, b[kMaxDotRows] = {};
  int64_t j = 0;
  for (; j + 2 * N <= k; j += 2 * N) {
    F even, odd;
    LoadBf16Pairs<N>(w + j, &even, &odd);
    for (int64_t i = 0; i < m; ++i) {
      a[i] += Load<N>(x + i * ldx + j) * even;
      b[i] += Load<N>(x + i * ldx + j + N) * odd;
    }
  }
  for (int64_t i = 0; i < m; ++i) y[i * ldy] = FinishDot<N>(a[i], b[i], x + i * ldx, w, j, k);
}

// One step of one bfloat16 row against a dealt row's even and odd values
// (xe, xo), into the row's two accumulators; the row's lines asked for
// ahead of the loads (four rows read side by side: the hardware's
// prefetcher alone left the loop short of the memory's speed).
template <int N>
INLINE void DotStep(const uint16_t* row, typename Lanes<N>::F xe, typename Lanes<N>::F xo,
                    typename Lanes<N>::F& a, typename Lanes<N>::F& b) {
  __builtin_prefetch(row + kDotPrefetchAhead);
  typename Lanes<N>::F even, odd;
  LoadBf16Pairs<N>(row, &even, &odd);
  a += xe * even;
  b += xo * odd;
}

// One dealt row x against four bfloat16 rows w + r * ldw: y[r] as
// DotsOfOneRow gives each (the same sums in the same order), with eight
// accumulators in flight and each x vector loaded once for the four rows.
template <int N>
INLINE void DotsOfFourRows(const float* x, const uint16_t* w, int64_t ldw, int64_t k, float* y) {
  using F = typename Lanes<N>::F;
  const uint16_t *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
  F a0{}, b0{}, a1{}, b1{}, a2{}, b2{}, a3{}, b3{};
  int64_t j = 0;
  for (; j + 2 * N <= k; j += 2 * N) {
    const F xe = Load<N>(x + j), xo = Load<N>(x + j + N);
    DotStep<N>(w0 + j, xe, xo, a0, b0);
    DotStep<N>(w1 + j, xe, xo, a1, b1);
    DotStep<N>(w2 + j, xe, xo, a2, b2);
    DotStep<N>(w3 + j, xe, xo, a3, b3);
  }
  y[0] = FinishDot<N>(a0, b0, x, w0, j, k);
  y[1] = FinishDot<N>(a1, b1, x, w1, j, k);
  y[2] = FinishDot<N>(a2, b2, x, w2, j, k);
  y[3] = FinishDot<N>(a3, b3, x, w3, j, k);
}

template <int N>
INLINE void Bf16RowDotsBody(const float* x, int64_t ldx, int64_t m, const uint16_t* w,
                            int64_t ldw, int64_t n, int64_t k, float* y, int64_t ldy) {
  thread_local std::vector<float> dealt;
  if (dealt.size() < static_cast<size_t>(kMaxDotRows * k)) {
    dealt.resize(static_cast<size_t>(kMaxDotRows * k));
  }
  for (int64_t i0 = 0; i0 < m; i0 += kMaxDotRows) {
    const int64_t rows = std::min(kMaxDotRows, m - i0);
    for (int64_t i = 0; i < rows; ++i) DealRow<N>(x + (i0 + i) * ldx, k, dealt.data() + i * k);
    float* yi = y + i0 * ldy;
    int64_t r = 0;
    if (rows == 1) {
      float four[4];
      for (; r + 4 <= n; r += 4) {
        DotsOfFourRows<N>(dealt.data(), w + r * ldw, ldw, k, four);
        for (int q = 0; q < 4; ++q) yi[r + q] = four[q];
      }
    }
    for (; r < n; ++r) DotsOfOneRow<N>(dealt.data(), k, rows, w + r * ldw, k, yi + r, ldy);
  }
}

// Whether any lane of a comparison's mask is set: its 64-bit words ORed.
template <int N>
INLINE bool AnyLane(typename Lanes<N>::I mask) {
  uint64_t words[sizeof mask / 8];
  std::memcpy(words, &mask, sizeof mask);
  uint64_t any = 0;
  for (uint64_t w : words) any |= w;
  return any != 0;
}

// a ranks ahead of b: larger, or a number where b is NaN.
bool Ahead(float a, float b) { return a > b || (std::isnan(b) && !std::isnan(a)); }

template <int N>
INLINE int64_t TopKBody(const float* x, int64_t n, int64_t k, int64_t* idx) {
  const int64_t keep = k < n ? k : n;
  if (keep <= 0) return 0;
  std::vector<float> vals(static_cast<size_t>(keep));
  int64_t count = 0;
  auto insert = [&](int64_t i) {
    int64_t pos = count < keep ? count : keep - 1;
    if (count == keep && !Ahead(x[i], vals[pos])) return;
    while (pos > 0 && Ahead(x[i], vals[pos - 1])) {
      vals[pos] = vals[pos - 1];
      idx[pos] = idx[pos - 1];
      --pos;
    }
    vals[pos] = x[i];
    idx[pos] = i;
    if (count < keep) ++count;
  };
  // Whether any of `vectors` vectors from x + j may beat the k-th kept
  // value: always while fewer than k are kept or the k-th is NaN, else by
  // one vector comparison.
  // Each running maximum starts at the k-th value, so a NaN (which Max
  // keeps only as its first argument) never enters it to hide a larger
  // number of the same lane; NaNs rank last and never beat a number.
  const auto may_beat = [&](int64_t j, int vectors) {
    if (count < keep || std::isnan(vals[keep - 1])) return true;
    const auto t = Splat<N>(vals[keep - 1]);
    auto m = Max<N>(t, Load<N>(x + j));
    for (int v = 1; v < vectors; ++v) m = Max<N>(m, Load<N>(x + j + v * N));
    return AnyLane<N>(m > t);
  };
  // Blocks of 4 N floats, a block none of whose values beats the k-th
  // skipped after one comparison; in a block that has one, each vector is
  // asked again (with the k-th as it grows), and only those that may beat
  // it are inserted one value at a time (docs/performance-history.md,
  // "Measurements behind choices in the code").
  int64_t j = 0;
  for (; j + 4 * N <= n; j += 4 * N) {
    if (!may_beat(j, 4)) continue;
    for (int64_t v = j; v < j + 4 * N; v += N) {
      if (!may_beat(v, 1)) continue;
      for (int64_t i = v; i < v + N; ++i) insert(i);
    }
  }
  for (; j < n; ++j) insert(j);
  return keep;
}

enum class Isa { kBase, kAvx2, kAvx512 };

// The widest the CPU has, or narrower where ATTNSCOPE_VMATH (base, avx2)
// asks: the tests run every instantiation on one machine that way.
Isa Best() {
  static const Isa isa = [] {
    Isa cpu = Isa::kBase;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("fma")) {
      cpu = Isa::kAvx512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      cpu = Isa::kAvx2;
    }
    const char* asked = std::getenv("ATTNSCOPE_VMATH");
    if (asked != nullptr && std::strcmp(asked, "base") == 0) return Isa::kBase;
    if (asked != nullptr && std::strcmp(asked, "avx2") == 0 && cpu == Isa::kAvx512) {
      return Isa::kAvx2;
    }
    return cpu;
  }();
  return isa;
}

#define ATTNSCOPE_KERNEL(ret, name, params, args)                                             \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma"))) ret name##Avx512 params { \
    return name##Body<16> args;                                                                \
  }                                                                                           \
  __attribute__((target("avx2,fma"))) ret name##Avx2 params { return name##Body<8> args; }    \
  ret name##Base params { return name##Body<8> args; }                                        \
  ret name##Best params {                                                                     \
    switch (Best()) {                                                                         \
      case Isa::kAvx512:                                                                      \
        return name##Avx512 args;                                                             \
      case Isa::kAvx2:                                                                        \
        return name##Avx2 args;                                                               \
      case Isa::kBase:                                                                        \
        break;                                                                                \
    }                                                                                         \
    return name##Base args;                                                                   \
  }

ATTNSCOPE_KERNEL(float, ExpOne, (float x), (x))
ATTNSCOPE_KERNEL(float, LogOne, (float x), (x))
ATTNSCOPE_KERNEL(void, Softmax, (const float* in, int64_t n, float* out), (in, n, out))
ATTNSCOPE_KERNEL(double, SoftmaxEntropy, (const float* in, int64_t n, float* out), (in, n, out))
ATTNSCOPE_KERNEL(AttentionRowSums, AttentionRow,
                 (const float* p, const float* w, int64_t n, double* column), (p, w, n, column))
ATTNSCOPE_KERNEL(AttentionRowSums, AttentionRowSums,
                 (const float* p, const float* w, int64_t n, double* column), (p, w, n, column))
ATTNSCOPE_KERNEL(LogitRowStats, LogitRow, (const float* z, int64_t n), (z, n))
ATTNSCOPE_KERNEL(double, SumSquares, (const float* x, int64_t n), (x, n))
ATTNSCOPE_KERNEL(void, Bf16RowDots,
                 (const float* x, int64_t ldx, int64_t m, const uint16_t* w, int64_t ldw,
                  int64_t n, int64_t k, float* y, int64_t ldy),
                 (x, ldx, m, w, ldw, n, k, y, ldy))
ATTNSCOPE_KERNEL(int64_t, TopK, (const float* x, int64_t n, int64_t k, int64_t* idx),
                 (x, n, k, idx))

}  // namespace

float Exp(float x) { return ExpOneBest(x); }

float Log(float x) { return LogOneBest(x); }

void Softmax(const float* in, int64_t n, float* out) { SoftmaxBest(in, n, out); }

double SoftmaxEntropy(const float* in, int64_t n, float* out) {
  return SoftmaxEntropyBest(in, n, out);
}

AttentionRowSums AttentionRow(const float* p, const float* w, int64_t n, double* column,
                              bool with_entropy) {
  return with_entropy ? AttentionRowBest(p, w, n, column)
                      : AttentionRowSumsBest(p, w, n, column);
}

LogitRowStats LogitRow(const float* z, int64_t n) { return LogitRowBest(z, n); }

double SumSquares(const float* x, int64_t n) { return SumSquaresBest(x, n); }

int64_t TopK(const float* x, int64_t n, int64_t k, int64_t* idx) { return TopKBest(x, n, k, idx); }

void Bf16RowDots(const float* x, int64_t ldx, int64_t m, const uint16_t* w, int64_t ldw,
                 int64_t n, int64_t k, float* y, int64_t ldy) {
  Bf16RowDotsBest(x, ldx, m, w, ldw, n, k, y, ldy);
}

}  // namespace attnscope::vmath

namespace attnscope::vmath {

const char* KernelSet() {
  switch (Best()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kBase:
      break;
  }
  return "base";
}

}  // namespace attnscope::vmath
