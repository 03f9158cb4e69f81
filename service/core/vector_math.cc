#include "service/core/vector_math.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// The kernels work on GCC vector extensions of 8 floats. Each public kernel
// is one always-inlined body instantiated twice, for AVX2+FMA and for the
// baseline, and dispatched on the CPU at run time (-Wno-psabi is set for
// this file: the 32-byte vectors never cross a non-inlined call).
namespace attnscope::vmath {
namespace {

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));

#define INLINE [[gnu::always_inline]] inline

INLINE V8 Splat(float x) { return V8{} + x; }

INLINE V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

INLINE void Store(float* p, V8 v) { std::memcpy(p, &v, sizeof v); }

// The first n < 8 floats of p, the other lanes `fill`.
INLINE V8 LoadPartial(const float* p, int64_t n, float fill) {
  float lanes[8];
  for (int i = 0; i < 8; ++i) lanes[i] = i < n ? p[i] : fill;
  return Load(lanes);
}

INLINE D4 Low(V8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), D4); }
INLINE D4 High(V8 v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), D4); }
INLINE double Sum(D4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// Cephes' expf: 2^n * p(r), r = x - n ln 2 in [-ln2/2, ln2/2]. NaN stays
// NaN; below -87.3 (2^-126) the result is 0, as softmax needs for masked
// and negligible entries.
INLINE V8 Exp8(V8 x) {
  const V8 c = x > 88.3762626647949f ? Splat(88.3762626647949f) : x;
  const V8 fx = c * 1.44269504088896341f + 0.5f;
  V8 n = __builtin_convertvector(__builtin_convertvector(fx, I8), V8);
  n = n > fx ? n - 1.0f : n;  // floor
  V8 r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const V8 z = r * r;
  V8 y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const I8 bits = (__builtin_convertvector(n, I8) + 127) << 23;
  const V8 out = y * __builtin_bit_cast(V8, bits);
  return c < -87.33654f ? V8{} : out;
}

// Cephes' logf for normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
// log x = e ln 2 + log1p(m - 1) by a degree-9 polynomial.
INLINE V8 Log8(V8 x) {
  const I8 bits = __builtin_bit_cast(I8, x);
  V8 e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, V8);
  const I8 mantissa = (bits & 0x007fffff) | 0x3f000000;  // in [0.5, 1)
  V8 m = __builtin_bit_cast(V8, mantissa);
  const auto small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const V8 z = m * m;
  V8 y = 7.0376836292e-2f * m + -1.1514610310e-1f;
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
INLINE V8 Max8(V8 a, V8 b) { return b > a ? b : a; }

INLINE float MaxOf(const float* x, int64_t n) {
  V8 m = Splat(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m = Max8(m, Load(x + j));
  float best = m[0];
  for (int i = 1; i < 8; ++i) best = m[i] > best ? m[i] : best;
  for (; j < n; ++j) best = x[j] > best ? x[j] : best;
  return best;
}

INLINE void SoftmaxBody(const float* in, int64_t n, float* out) {
  const float max = MaxOf(in, n);
  D4 sum{};
  V8 chunk{};
  int64_t j = 0;
  for (int step = 1; j + 8 <= n; j += 8, ++step) {
    const V8 e = Exp8(Load(in + j) - max);
    Store(out + j, e);
    chunk += e;
    if (step % 8 == 0) {  // float partial sums of 64 terms at most
      sum += Low(chunk) + High(chunk);
      chunk = V8{};
    }
  }
  double total = Sum(sum + Low(chunk) + High(chunk));
  for (; j < n; ++j) {
    out[j] = Exp8(Splat(in[j] - max))[0];
    total += out[j];
  }
  const auto inv = static_cast<float>(1.0 / total);
  j = 0;
  for (; j + 8 <= n; j += 8) Store(out + j, Load(out + j) * inv);
  for (; j < n; ++j) out[j] *= inv;
}

INLINE void AddColumns(double* column, V8 p) {
  D4 lo, hi;
  std::memcpy(&lo, column, sizeof lo);
  std::memcpy(&hi, column + 4, sizeof hi);
  lo += Low(p);
  hi += High(p);
  std::memcpy(column, &lo, sizeof lo);
  std::memcpy(column + 4, &hi, sizeof hi);
}

INLINE AttentionRowSums AttentionRowBody(const float* p, const float* w, int64_t n,
                                         double* column) {
  D4 entropy{}, weighted{};
  V8 chunk_entropy{}, chunk_weighted{};
  int64_t j = 0;
  for (int step = 1; j < n; j += 8, ++step) {
    const int64_t lanes = n - j < 8 ? n - j : 8;
    const V8 v = lanes == 8 ? Load(p + j) : LoadPartial(p + j, lanes, 0.0f);
    const V8 positive = v > 0.0f ? v : V8{};
    // log of a non-positive lane is garbage, but it is multiplied by 0.
    chunk_entropy += positive * Log8(v > 0.0f ? v : Splat(1.0f));
    if (w != nullptr) {
      chunk_weighted += v * (lanes == 8 ? Load(w + j) : LoadPartial(w + j, lanes, 0.0f));
    }
    if (column != nullptr) {
      if (lanes == 8) {
        AddColumns(column + j, v);
      } else {
        for (int64_t i = 0; i < lanes; ++i) column[j + i] += v[i];
      }
    }
    if (step % 8 == 0 || j + 8 >= n) {  // flush the float partial sums every 64
      entropy += Low(chunk_entropy) + High(chunk_entropy);
      weighted += Low(chunk_weighted) + High(chunk_weighted);
      chunk_entropy = V8{};
      chunk_weighted = V8{};
    }
  }
  AttentionRowSums out;
  out.entropy = -Sum(entropy);
  out.weighted = Sum(weighted);
  return out;
}

INLINE LogitRowStats LogitRowBody(const float* z, int64_t n) {
  const float max = MaxOf(z, n);
  // A pad far enough below the max that its exp is exactly 0 (and 0 * pad too).
  const float pad = max - 200.0f;
  D4 sum{}, weighted{};
  V8 chunk_sum{}, chunk_weighted{};
  int64_t j = 0;
  for (int step = 1; j < n; j += 8, ++step) {
    const int64_t lanes = n - j < 8 ? n - j : 8;
    const V8 d = (lanes == 8 ? Load(z + j) : LoadPartial(z + j, lanes, pad)) - max;
    const V8 e = Exp8(d);
    chunk_sum += e;
    chunk_weighted += e * d;
    if (step % 8 == 0 || j + 8 >= n) {
      sum += Low(chunk_sum) + High(chunk_sum);
      weighted += Low(chunk_weighted) + High(chunk_weighted);
      chunk_sum = V8{};
      chunk_weighted = V8{};
    }
  }
  const double s = Sum(sum);
  const double log_s = std::log(s);
  LogitRowStats out;
  out.max = max;
  out.log_z = max + log_s;
  // -sum q log q with log q = d - log s: log s - (sum e d) / s, both terms >= 0.
  out.entropy = log_s - Sum(weighted) / s;
  return out;
}

INLINE double SumSquaresBody(const float* x, int64_t n) {
  D4 acc{};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const V8 v = Load(x + j);
    const D4 lo = Low(v), hi = High(v);
    acc += lo * lo + hi * hi;
  }
  double s = Sum(acc);
  for (; j < n; ++j) s += static_cast<double>(x[j]) * x[j];
  return s;
}

// a ranks ahead of b: larger, or a number where b is NaN.
bool Ahead(float a, float b) { return a > b || (std::isnan(b) && !std::isnan(a)); }

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
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    if (count == keep && !std::isnan(vals[keep - 1])) {
      const V8 m = Max8(Load(x + j), Load(x + j + 8));
      bool any = false;
      for (int i = 0; i < 8; ++i) any = any || m[i] > vals[keep - 1];
      if (!any) continue;
    }
    for (int64_t i = j; i < j + 16; ++i) insert(i);
  }
  for (; j < n; ++j) insert(j);
  return keep;
}

bool HasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

#define ATTNSCOPE_KERNEL(ret, name, params, args)                                     \
  __attribute__((target("avx2,fma"))) ret name##Avx2 params { return name##Body args; } \
  ret name##Base params { return name##Body args; }

ATTNSCOPE_KERNEL(void, Softmax, (const float* in, int64_t n, float* out), (in, n, out))
ATTNSCOPE_KERNEL(AttentionRowSums, AttentionRow,
                 (const float* p, const float* w, int64_t n, double* column), (p, w, n, column))
ATTNSCOPE_KERNEL(LogitRowStats, LogitRow, (const float* z, int64_t n), (z, n))
ATTNSCOPE_KERNEL(double, SumSquares, (const float* x, int64_t n), (x, n))
ATTNSCOPE_KERNEL(int64_t, TopK, (const float* x, int64_t n, int64_t k, int64_t* idx),
                 (x, n, k, idx))

}  // namespace

float Exp(float x) { return Exp8(Splat(x))[0]; }

float Log(float x) { return Log8(Splat(x))[0]; }

void Softmax(const float* in, int64_t n, float* out) {
  HasAvx2Fma() ? SoftmaxAvx2(in, n, out) : SoftmaxBase(in, n, out);
}

AttentionRowSums AttentionRow(const float* p, const float* w, int64_t n, double* column) {
  return HasAvx2Fma() ? AttentionRowAvx2(p, w, n, column) : AttentionRowBase(p, w, n, column);
}

LogitRowStats LogitRow(const float* z, int64_t n) {
  return HasAvx2Fma() ? LogitRowAvx2(z, n) : LogitRowBase(z, n);
}

double SumSquares(const float* x, int64_t n) {
  return HasAvx2Fma() ? SumSquaresAvx2(x, n) : SumSquaresBase(x, n);
}

int64_t TopK(const float* x, int64_t n, int64_t k, int64_t* idx) {
  return HasAvx2Fma() ? TopKAvx2(x, n, k, idx) : TopKBase(x, n, k, idx);
}

}  // namespace attnscope::vmath
