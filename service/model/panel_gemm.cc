#include "service/model/panel_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "service/core/parallel.h"
#include "service/core/vector_math.h"

namespace attnscope::model {
namespace {

// The kernel's tile (rows of x by rows of W) and the blocks that stay in
// the caches: a kKc x kNr panel of W in L1, a kMc x kKc block of x in L2,
// a kKc x kNc block of W in L3.
constexpr int64_t kMr = 6;
constexpr int64_t kNr = 16;
constexpr int64_t kMc = 72;
constexpr int64_t kKc = 512;
constexpr int64_t kNc = 512;
// The fewest panels of W a thread takes at a time (at the end of a product).
constexpr int64_t kMinPanels = 2;
// The most a chunk of rows of x takes once packed.
constexpr int64_t kPackedRowsBytes = int64_t{16} << 20;

#define TARGET __attribute__((target("avx2,fma")))
#define TARGET512 __attribute__((target("avx512f,avx512bw,avx2,fma")))
#define TARGETBF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma")))

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// The calling thread's buffer for blocks of W, allocated once (64-byte
// aligned).
struct Buffers {
  std::unique_ptr<float, FreeDeleter> b;
  Buffers() : b(static_cast<float*>(std::aligned_alloc(64, kKc * kNc * sizeof(float)))) {
    if (b == nullptr) throw std::bad_alloc();
  }
};

Buffers& ThreadBuffers() {
  thread_local Buffers buffers;
  return buffers;
}

// The 8 x 8 block whose rows are r0..r7 transposed in place: r_i becomes
// its column i.
TARGET inline void Transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4,
                              __m256& r5, __m256& r6, __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(s0, s4, 0x20);
  r1 = _mm256_permute2f128_ps(s1, s5, 0x20);
  r2 = _mm256_permute2f128_ps(s2, s6, 0x20);
  r3 = _mm256_permute2f128_ps(s3, s7, 0x20);
  r4 = _mm256_permute2f128_ps(s0, s4, 0x31);
  r5 = _mm256_permute2f128_ps(s1, s5, 0x31);
  r6 = _mm256_permute2f128_ps(s2, s6, 0x31);
  r7 = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Rows [0, rows) and columns [0, kc) of x into panels of kMr rows: panel
// i holds, for each column p, its kMr values (zeros past the last row).
TARGET void PackX(const float* x, int64_t ldx, int64_t rows, int64_t kc, float* out) {
  for (int64_t i = 0; i < rows; i += kMr) {
    const int64_t mr = std::min(kMr, rows - i);
    float* panel = out + i * kc;
    const float* src = x + i * ldx;
    int64_t p = 0;
    if (mr == kMr) {
      // Eight columns of the six rows transposed at once; each column's
      // store also writes two floats past it, which the next one (or the
      // scalar tail: at least one column is left to it) overwrites, so
      // nothing is written outside the panel.
      const __m256 zero = _mm256_setzero_ps();
      for (; p + 8 < kc; p += 8) {
        __m256 r0 = _mm256_loadu_ps(src + p), r1 = _mm256_loadu_ps(src + ldx + p);
        __m256 r2 = _mm256_loadu_ps(src + 2 * ldx + p), r3 = _mm256_loadu_ps(src + 3 * ldx + p);
        __m256 r4 = _mm256_loadu_ps(src + 4 * ldx + p), r5 = _mm256_loadu_ps(src + 5 * ldx + p);
        __m256 r6 = zero, r7 = zero;
        Transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
        float* dst = panel + p * kMr;
        _mm256_storeu_ps(dst, r0);
        _mm256_storeu_ps(dst + kMr, r1);
        _mm256_storeu_ps(dst + 2 * kMr, r2);
        _mm256_storeu_ps(dst + 3 * kMr, r3);
        _mm256_storeu_ps(dst + 4 * kMr, r4);
        _mm256_storeu_ps(dst + 5 * kMr, r5);
        _mm256_storeu_ps(dst + 6 * kMr, r6);
        _mm256_storeu_ps(dst + 7 * kMr, r7);
      }
    }
    for (; p < kc; ++p) {
      for (int64_t r = 0; r < mr; ++r) panel[p * kMr + r] = src[r * ldx + p];
      for (int64_t r = mr; r < kMr; ++r) panel[p * kMr + r] = 0.0f;
    }
  }
}

// Eight values of a row of W as float32.
template <PanelWeights type>
TARGET inline __m256 Load8(const void* w, int64_t at) {
  if constexpr (type == PanelWeights::kFloat32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + at);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + at));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <PanelWeights type>
float LoadOne(const void* w, int64_t at) {
  if constexpr (type == PanelWeights::kFloat32) {
    return static_cast<const float*>(w)[at];
  } else {
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(w)[at]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
}

// Rows [0, rows) and columns [0, kc) of W (row stride ldw) into panels of
// kNr rows: panel j holds, for each column p, its kNr values as float32
// (zeros past the last row).
template <PanelWeights type>
TARGET void PackW(const void* w, int64_t ldw, int64_t rows, int64_t kc, float* out) {
  constexpr int64_t kWeightBytes = type == PanelWeights::kFloat32 ? 4 : 2;
  // One prefetch per row for every 64-byte line the loads move through,
  // two lines ahead of them.
  constexpr int64_t kPrefetchEvery = 64 / kWeightBytes;
  constexpr int64_t kPrefetchAheadBytes = 128;
  for (int64_t j = 0; j < rows; j += kNr) {
    const int64_t nr = std::min(kNr, rows - j);
    float* panel = out + j * kc;
    int64_t p = 0;
    if (nr == kNr) {
      for (; p + 8 <= kc; p += 8) {
        // Sixteen rows are read side by side, more streams than the
        // hardware prefetcher follows: each row's next lines are asked for
        // ahead of the loads.
        if (p % kPrefetchEvery == 0) {
          for (int64_t r = 0; r < kNr; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(static_cast<const char*>(w) +
                                                       ((j + r) * ldw + p) * kWeightBytes +
                                                       kPrefetchAheadBytes),
                         _MM_HINT_T0);
          }
        }
        for (int64_t half = 0; half < 2; ++half) {
          const int64_t base = (j + half * 8) * ldw + p;
          __m256 r0 = Load8<type>(w, base), r1 = Load8<type>(w, base + ldw);
          __m256 r2 = Load8<type>(w, base + 2 * ldw), r3 = Load8<type>(w, base + 3 * ldw);
          __m256 r4 = Load8<type>(w, base + 4 * ldw), r5 = Load8<type>(w, base + 5 * ldw);
          __m256 r6 = Load8<type>(w, base + 6 * ldw), r7 = Load8<type>(w, base + 7 * ldw);
          Transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
          float* dst = panel + p * kNr + half * 8;
          _mm256_store_ps(dst, r0);
          _mm256_store_ps(dst + kNr, r1);
          _mm256_store_ps(dst + 2 * kNr, r2);
          _mm256_store_ps(dst + 3 * kNr, r3);
          _mm256_store_ps(dst + 4 * kNr, r4);
          _mm256_store_ps(dst + 5 * kNr, r5);
          _mm256_store_ps(dst + 6 * kNr, r6);
          _mm256_store_ps(dst + 7 * kNr, r7);
        }
      }
    }
    for (; p < kc; ++p) {
      for (int64_t r = 0; r < nr; ++r) panel[p * kNr + r] = LoadOne<type>(w, (j + r) * ldw + p);
      for (int64_t r = nr; r < kNr; ++r) panel[p * kNr + r] = 0.0f;
    }
  }
}

// One row of a tile, one step: its value at the step times the panel's 16
// values (b0, b1), added to the row's accumulators.
TARGET inline void StepRow(const float* value, __m256 b0, __m256 b1, __m256& lo, __m256& hi) {
  const __m256 av = _mm256_broadcast_ss(value);
  lo = _mm256_fmadd_ps(av, b0, lo);
  hi = _mm256_fmadd_ps(av, b1, hi);
}

// One row of a tile: 16 values stored, or added to those there.
TARGET inline void Put(float* row, __m256 lo, __m256 hi, bool accumulate) {
  if (accumulate) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
  }
  _mm256_storeu_ps(row, lo);
  _mm256_storeu_ps(row + 8, hi);
}

// A step of a BF16 panel (32 bytes, 32-byte aligned: in 32-bit lane i,
// column i in the low half and column 8 + i in the high half) as float32:
// columns 0-7 (the low halves shifted up) and 8-15 (the high ones masked).
TARGET inline void WidenPairs(const uint16_t* step, __m256& lo, __m256& hi) {
  const __m256i pairs = _mm256_load_si256(reinterpret_cast<const __m256i*>(step));
  lo = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
  hi = _mm256_castsi256_ps(
      _mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// How the kernel reads its kMr rows of x: packed by PackX (step p's kMr
// values together), or in place (row r at a + r * lda, its columns
// consecutive).
enum class Rows { kPacked, kInPlace };

// How the kernel reads a panel of W: float32 (PackW: step p's kNr values
// at b[16 p ..]), or bfloat16 pairs (PackBf16Panels: step p's 32 bytes hold,
// in 32-bit lane i, column i in the low half and column 8 + i in the high
// half), widened in registers: the low halves shifted up, the high ones
// masked.
enum class Panel { kFloat32, kBf16Pairs };

// The kUsed x kNr tile c (row stride ldc) = (accumulate ? c : 0) + scale *
// the product of kUsed rows of x and a packed panel of W over kc steps
// (kUsed < kMr only in place: the last rows of a block of attention rows,
// or a decoding step's, at the cost of their own rows only).
template <Rows rows, Panel panel = Panel::kFloat32, int64_t kUsed = kMr>
TARGET void Tile(int64_t kc, const float* a, int64_t lda, const void* bp, float* c, int64_t ldc,
                 bool accumulate, float scale) {
  static_assert(kUsed >= 1 && kUsed <= kMr && (rows == Rows::kInPlace || kUsed == kMr));
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t r = 0; r < kUsed; ++r) _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
  // In place: row r's pointer, its value at step p at [p]. Packed: step
  // p's values at ap[0 .. kMr).
  const auto row = [&](int64_t r) { return a + std::min(r, kUsed - 1) * lda; };
  const float *r0 = row(0), *r1 = row(1), *r2 = row(2), *r3 = row(3), *r4 = row(4), *r5 = row(5);
  const float* ap = a;
  const float* b = static_cast<const float*>(bp);
  const uint16_t* b16 = static_cast<const uint16_t*>(bp);
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const auto at = [&](const float* in_place, int64_t r) {
      if constexpr (rows == Rows::kPacked) {
        return ap + r;
      } else {
        return in_place + p;
      }
    };
    __m256 b0, b1;
    if constexpr (panel == Panel::kFloat32) {
      b0 = _mm256_load_ps(b);
      b1 = _mm256_load_ps(b + 8);
    } else {
      WidenPairs(b16, b0, b1);
    }
    StepRow(at(r0, 0), b0, b1, c00, c01);
    if constexpr (kUsed > 1) StepRow(at(r1, 1), b0, b1, c10, c11);
    if constexpr (kUsed > 2) StepRow(at(r2, 2), b0, b1, c20, c21);
    if constexpr (kUsed > 3) StepRow(at(r3, 3), b0, b1, c30, c31);
    if constexpr (kUsed > 4) StepRow(at(r4, 4), b0, b1, c40, c41);
    if constexpr (kUsed > 5) StepRow(at(r5, 5), b0, b1, c50, c51);
    if constexpr (rows == Rows::kPacked) ap += kMr;
    if constexpr (panel == Panel::kFloat32) {
      b += kNr;
    } else {
      b16 += kNr;
    }
  }
  if (scale != 1.0f) {
    const __m256 s = _mm256_set1_ps(scale);
    c00 = _mm256_mul_ps(c00, s), c01 = _mm256_mul_ps(c01, s), c10 = _mm256_mul_ps(c10, s);
    c11 = _mm256_mul_ps(c11, s), c20 = _mm256_mul_ps(c20, s), c21 = _mm256_mul_ps(c21, s);
    c30 = _mm256_mul_ps(c30, s), c31 = _mm256_mul_ps(c31, s), c40 = _mm256_mul_ps(c40, s);
    c41 = _mm256_mul_ps(c41, s), c50 = _mm256_mul_ps(c50, s), c51 = _mm256_mul_ps(c51, s);
  }
  Put(c, c00, c01, accumulate);
  if constexpr (kUsed > 1) Put(c + ldc, c10, c11, accumulate);
  if constexpr (kUsed > 2) Put(c + 2 * ldc, c20, c21, accumulate);
  if constexpr (kUsed > 3) Put(c + 3 * ldc, c30, c31, accumulate);
  if constexpr (kUsed > 4) Put(c + 4 * ldc, c40, c41, accumulate);
  if constexpr (kUsed > 5) Put(c + 5 * ldc, c50, c51, accumulate);
}

// A packed panel of x (PackX) times a packed panel of W.
template <Panel panel>
TARGET inline void Kernel(int64_t kc, const float* a, const void* b, float* c, int64_t ldc,
                          bool accumulate) {
  Tile<Rows::kPacked, panel>(kc, a, 0, b, c, ldc, accumulate, 1.0f);
}

// mr rows (1 .. kMr) of x read in place times a packed panel of W, scaled.
template <Panel panel = Panel::kFloat32>
TARGET void RowsKernel(int64_t kc, const float* a, int64_t lda, int64_t mr, const void* b,
                       float* c, int64_t ldc, bool accumulate, float scale) {
  switch (mr) {
    case 1: return Tile<Rows::kInPlace, panel, 1>(kc, a, lda, b, c, ldc, accumulate, scale);
    case 2: return Tile<Rows::kInPlace, panel, 2>(kc, a, lda, b, c, ldc, accumulate, scale);
    case 3: return Tile<Rows::kInPlace, panel, 3>(kc, a, lda, b, c, ldc, accumulate, scale);
    case 4: return Tile<Rows::kInPlace, panel, 4>(kc, a, lda, b, c, ldc, accumulate, scale);
    case 5: return Tile<Rows::kInPlace, panel, 5>(kc, a, lda, b, c, ldc, accumulate, scale);
    default: return Tile<Rows::kInPlace, panel>(kc, a, lda, b, c, ldc, accumulate, scale);
  }
}

// The rows x cols corner of a tile computed whole (row stride ldt) into c
// (row stride ldc): stored, or added to what c holds.
inline void PutCorner(const float* tile, int64_t ldt, int64_t rows, int64_t cols, float* c,
                      int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t q = 0; q < cols; ++q) {
      const float t = tile[r * ldt + q];
      c[r * ldc + q] = accumulate ? c[r * ldc + q] + t : t;
    }
  }
}

// The mr x nr corner (mr <= kMr, nr <= kNr) of RowsKernel's tile: columns
// past nr not written.
template <Panel panel = Panel::kFloat32>
TARGET void RowsKernelEdge(int64_t kc, const float* a, int64_t lda, int64_t mr, const void* b,
                           float* c, int64_t ldc, int64_t nr, bool accumulate, float scale) {
  alignas(32) float tile[kMr * kNr];
  RowsKernel<panel>(kc, a, lda, mr, b, tile, kNr, false, scale);
  PutCorner(tile, kNr, mr, nr, c, ldc, accumulate);
}

// AVX-512: a tile of two panels of x (2 kMr rows) by two panels of W
// (2 kNr columns), 24 accumulators of 16 floats. Each element of y takes
// the same operations in the same order as in the AVX2 tile (zero, one
// fused multiply-add per step, the sum with what c holds), so the two give
// the same bits.
constexpr int64_t kWideRows = 2 * kMr;
constexpr int64_t kWideColumns = 2 * kNr;

// One row of the wide tile: 32 values stored, or added to those there.
TARGET512 inline void PutWide(float* row, __m512 lo, __m512 hi, bool accumulate) {
  if (accumulate) {
    lo = _mm512_add_ps(lo, _mm512_loadu_ps(row));
    hi = _mm512_add_ps(hi, _mm512_loadu_ps(row + kNr));
  }
  _mm512_storeu_ps(row, lo);
  _mm512_storeu_ps(row + kNr, hi);
}

// Two packed panels of x (a0, a1: PackX) times two float32 panels of W
// (b0, b1: PackW or WidenPanels), over kc steps, into the kWideRows x
// kWideColumns tile c.
TARGET512 void WideKernel(int64_t kc, const float* a0, const float* a1, const float* b0,
                          const float* b1, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[kWideRows][2];
#pragma GCC unroll 12
  for (int r = 0; r < kWideRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 w0 = _mm512_load_ps(b0 + p * kNr);
    const __m512 w1 = _mm512_load_ps(b1 + p * kNr);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m512 v = _mm512_set1_ps(a0[p * kMr + r]);
      acc[r][0] = _mm512_fmadd_ps(v, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(v, w1, acc[r][1]);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m512 v = _mm512_set1_ps(a1[p * kMr + r]);
      acc[kMr + r][0] = _mm512_fmadd_ps(v, w0, acc[kMr + r][0]);
      acc[kMr + r][1] = _mm512_fmadd_ps(v, w1, acc[kMr + r][1]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kWideRows; ++r) PutWide(c + r * ldc, acc[r][0], acc[r][1], accumulate);
}

// Steps [0, kc) of the BF16 panels covering `cols` columns (the first
// panel at `panels`, each k steps long) as float32 panels in PackW's
// layout (kc steps each): a step's low halves are its columns 0-7, its high
// halves 8-15.
TARGET void WidenPanels(const uint16_t* panels, int64_t k, int64_t cols, int64_t kc, float* out) {
  for (int64_t j = 0; j < cols; j += kNr) {
    const uint16_t* src = panels + j * k;
    float* dst = out + j * kc;
    for (int64_t p = 0; p < kc; ++p) {
      __m256 lo, hi;
      WidenPairs(src + p * kNr, lo, hi);
      _mm256_store_ps(dst + p * kNr, lo);
      _mm256_store_ps(dst + p * kNr + 8, hi);
    }
  }
}

// Even blocks of at most `most` covering n, each a multiple of `unit`.
int64_t BlockSize(int64_t n, int64_t most, int64_t unit) {
  const int64_t blocks = (n + most - 1) / most;
  const int64_t size = (n + blocks - 1) / blocks;
  return (size + unit - 1) / unit * unit;
}

// The columns [j0, j1) of rows [0, m) of y from x packed by PackX over the
// whole of k (`px`), or, for fewer than kMr rows (a decoding step), from x
// read in place (px null: row i at x + i * ldx), in a tile of its own rows:
// each block of k of W packed once, then multiplied by every block of rows.
// W packed at load (kBfloat16Panels, j0 a multiple of kNr) is read where it
// lies (kPanel kBf16Pairs), or each block of it widened to float32 first
// (kPanel kFloat32: WidenPanels).
template <PanelWeights type,
          Panel kPanel = type == PanelWeights::kBfloat16Panels ? Panel::kBf16Pairs : Panel::kFloat32>
TARGET void Columns(bool wide, const float* px, const float* x, int64_t ldx, int64_t m,
                    const void* w, int64_t k, int64_t ldw, float* y, int64_t ldy, int64_t j0,
                    int64_t j1) {
  float* const pb = ThreadBuffers().b.get();
  const int64_t kc_size = BlockSize(k, kKc, 1);
  const int64_t mc_size = BlockSize(m, kMc, wide ? kWideRows : kMr);
  const int64_t nc = j1 - j0;
  for (int64_t pc = 0; pc < k; pc += kc_size) {
    const int64_t kc = std::min(kc_size, k - pc);
    const bool accumulate = pc > 0;
    if constexpr (type == PanelWeights::kFloat32) {
      PackW<type>(static_cast<const float*>(w) + j0 * ldw + pc, ldw, nc, kc, pb);
    } else if constexpr (type == PanelWeights::kBfloat16) {
      PackW<type>(static_cast<const uint16_t*>(w) + j0 * ldw + pc, ldw, nc, kc, pb);
    } else if constexpr (kPanel == Panel::kFloat32) {
      WidenPanels(static_cast<const uint16_t*>(w) + (j0 / kNr * k + pc) * kNr, k, nc, kc, pb);
    }
    // Panel jr (a column of W's block, a multiple of kNr) of this block.
    const auto panel_at = [&](int64_t jr) -> const void* {
      if constexpr (kPanel == Panel::kBf16Pairs) {
        return static_cast<const uint16_t*>(w) + ((j0 + jr) / kNr * k + pc) * kNr;
      } else {
        return pb + jr * kc;
      }
    };
    // The tile of rows [ir, ir + kMr) of the block at ic and panel jr.
    const auto tile = [&](int64_t ic, int64_t mc, int64_t ir, int64_t jr) {
      const int64_t nr = std::min(kNr, nc - jr);
      const int64_t mr = std::min(kMr, mc - ir);
      const void* bpanel = panel_at(jr);
      float* c = y + (ic + ir) * ldy + j0 + jr;
      if (px == nullptr) {
        const float* a = x + (ic + ir) * ldx + pc;
        if (nr == kNr) {
          RowsKernel<kPanel>(kc, a, ldx, mr, bpanel, c, ldy, accumulate, 1.0f);
        } else {
          RowsKernelEdge<kPanel>(kc, a, ldx, mr, bpanel, c, ldy, nr, accumulate, 1.0f);
        }
        return;
      }
      const float* apanel = px + (ic + ir) * k + pc * kMr;
      if (mr == kMr && nr == kNr) {
        Kernel<kPanel>(kc, apanel, bpanel, c, ldy, accumulate);
        return;
      }
      alignas(32) float edge[kMr * kNr];
      Kernel<kPanel>(kc, apanel, bpanel, edge, kNr, false);
      PutCorner(edge, kNr, mr, nr, c, ldy, accumulate);
    };
    const int64_t step_n = wide ? kWideColumns : kNr;
    const int64_t step_m = wide ? kWideRows : kMr;
    for (int64_t ic = 0; ic < m; ic += mc_size) {
      const int64_t mc = std::min(mc_size, m - ic);
      for (int64_t jr = 0; jr < nc; jr += step_n) {
        for (int64_t ir = 0; ir < mc; ir += step_m) {
          const int64_t mr = std::min(kWideRows, mc - ir);
          // AVX-512's tiles take float32 panels only (BF16 panels are
          // widened first where they run: PanelGemmOn).
          if (kPanel == Panel::kFloat32 && wide && px != nullptr && mr > kMr &&
              jr + kWideColumns <= nc) {
            const float* apanel = px + (ic + ir) * k + pc * kMr;
            const float* b0 = static_cast<const float*>(panel_at(jr));
            const float* b1 = static_cast<const float*>(panel_at(jr + kNr));
            float* c = y + (ic + ir) * ldy + j0 + jr;
            if (mr == kWideRows) {
              WideKernel(kc, apanel, apanel + kMr * k, b0, b1, c, ldy, accumulate);
              continue;
            }
            // 7-11 rows: the second panel of x is padded with zero rows;
            // the tile's first mr rows kept.
            alignas(64) float edge[kWideRows * kWideColumns];
            WideKernel(kc, apanel, apanel + kMr * k, b0, b1, edge, kWideColumns, false);
            PutCorner(edge, kWideColumns, mr, kWideColumns, c, ldy, accumulate);
            continue;
          }
          // Narrow tiles: every tile without AVX-512, and the edges of the
          // wide ones.
          for (int64_t jn = jr; jn < std::min(nc, jr + step_n); jn += kNr) {
            for (int64_t in = ir; in < std::min(mc, ir + step_m); in += kMr) tile(ic, mc, in, jn);
          }
        }
      }
    }
  }
}

// The columns [0, n) of a product handed out in blocks to the installed
// pool's threads, one at a time to whichever thread asks next, each a share
// of what is left (guided scheduling): kNc columns while much is left,
// fewer towards the end, down to kMinPanels panels, so that the threads
// finish together on a machine whose cores are not equally fast at every
// moment, and a product of few columns still keeps every thread busy.
// fn(j0, j1) multiplies columns [j0, j1) (j0 a multiple of kNr).
template <typename Fn>
void GuidedColumnBlocks(int64_t n, const Fn& fn) {
  const int64_t panels = (n + kNr - 1) / kNr;
  // The next block: panels [first, first + take) of what is left, a share
  // of it for each thread that has joined, twice over.
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> joined{0};
  const auto grab = [&](int64_t& first, int64_t& take) {
    first = next.load(std::memory_order_relaxed);
    while (first < panels) {
      const int64_t left = panels - first;
      // An even number of panels: AVX-512's tiles take two at a time.
      const int64_t share = std::clamp(left / (2 * joined.load(std::memory_order_relaxed)),
                                       kMinPanels, kNc / kNr);
      take = std::min(left, (share + 1) / 2 * 2);
      if (next.compare_exchange_weak(first, first + take, std::memory_order_relaxed)) return true;
    }
    return false;
  };
  core::ParallelFor(panels, 1, [&](int64_t, int64_t) {
    joined.fetch_add(1, std::memory_order_relaxed);
    int64_t first = 0, take = 0;
    while (grab(first, take)) fn(first * kNr, std::min(n, (first + take) * kNr));
  });
}

}  // namespace

bool PanelGemmAvailable() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

PanelIsa ChosenPanelIsa() {
  static const PanelIsa isa = [] {
    const char* env = std::getenv("ATTNSCOPE_PANEL_ISA");
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (env != nullptr && std::string_view(env) == "avx2") return PanelIsa::kAvx2;
    return avx512 ? PanelIsa::kAvx512 : PanelIsa::kAvx2;
  }();
  return isa;
}

void PanelGemm(const float* x, int64_t m, int64_t ldx, const void* w, PanelWeights type,
               int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy) {
  PanelGemmOn(ChosenPanelIsa(), x, m, ldx, w, type, n, k, ldw, y, ldy);
}

void PanelGemmOn(PanelIsa isa, const float* x, int64_t m, int64_t ldx, const void* w,
                 PanelWeights type, int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy) {
  if (m <= 0 || n <= 0) return;
  const bool wide = isa == PanelIsa::kAvx512;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + n, 0.0f);
    return;
  }
  // Rows in chunks whose packed copy takes at most kPackedRowsBytes: each
  // chunk packed once (by all threads, panels shared out), then read by
  // every block of columns.
  // Fewer rows than a tile (a decoding step) are read in place, in a tile
  // of their own rows: packing them would pad them to kMr rows, and the
  // tile would multiply the padding.
  const bool in_place = m < kMr;
  const int64_t chunk_rows =
      std::max(kMr, kPackedRowsBytes / (static_cast<int64_t>(sizeof(float)) * k) / kMr * kMr);
  thread_local std::vector<float> packed;
  const int64_t most_rows = std::min(m, chunk_rows);
  const size_t need = in_place ? 0 : static_cast<size_t>((most_rows + kMr - 1) / kMr * kMr * k);
  if (packed.size() < need) packed.resize(need);
  float* const px = in_place ? nullptr : packed.data();
  for (int64_t r0 = 0; r0 < m; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, m - r0);
    if (!in_place) {
      core::ParallelFor((rows + kMr - 1) / kMr, 4, [&](int64_t begin, int64_t end) {
        const int64_t i0 = begin * kMr, i1 = std::min(rows, end * kMr);
        PackX(x + (r0 + i0) * ldx, ldx, i1 - i0, k, px + i0 * k);
      });
    }
    float* const yc = y + r0 * ldy;
    GuidedColumnBlocks(n, [&](int64_t j0, int64_t j1) {
      const float* xr = x + r0 * ldx;
      switch (type) {
        case PanelWeights::kFloat32:
          Columns<PanelWeights::kFloat32>(wide, px, xr, ldx, rows, w, k, ldw, yc, ldy, j0, j1);
          break;
        case PanelWeights::kBfloat16:
          Columns<PanelWeights::kBfloat16>(wide, px, xr, ldx, rows, w, k, ldw, yc, ldy, j0, j1);
          break;
        case PanelWeights::kBfloat16Panels:
          // AVX-512's tiles on packed rows take each block of the panels
          // widened once (a shift and a mask per step) rather than a
          // shuffle per step of every tile; AVX2's tiles widen in registers.
          if (wide && px != nullptr) {
            Columns<PanelWeights::kBfloat16Panels, Panel::kFloat32>(wide, px, xr, ldx, rows, w, k,
                                                                    ldw, yc, ldy, j0, j1);
          } else {
            Columns<PanelWeights::kBfloat16Panels>(wide, px, xr, ldx, rows, w, k, ldw, yc, ldy,
                                                   j0, j1);
          }
          break;
      }
    });
  }
}

namespace {

// Bfloat16 products by AVX-512 BF16's dot-product instruction (vdpbf16ps:
// each 32-bit lane adds the products of a pair of bfloat16 values, two
// steps of k at once, in float32). The operands in pairs along k: x's rows
// rounded to bfloat16 (bf16 rows), then packed by PackX as 32-bit pairs;
// W's rows as 32-bit pairs packed by PackW (a float32 packing moves bits
// only), or BF16 head panels (pairs along n) regrouped by one vpermw per
// two steps.

// x (m x k, ldx) rounded to bfloat16 (nearest even), dense rows of k.
TARGETBF16 void RoundRows(const float* x, int64_t m, int64_t ldx, int64_t k, uint16_t* out) {
  for (int64_t r = 0; r < m; ++r) {
    const float* src = x + r * ldx;
    uint16_t* dst = out + r * k;
    int64_t j = 0;
    for (; j + 32 <= k; j += 32) {
      const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16), _mm512_loadu_ps(src + j));
      _mm512_storeu_si512(dst + j, reinterpret_cast<const __m512i&>(h));
    }
    for (; j < k; ++j) dst[j] = vmath::FloatToBf16(src[j]);
  }
}

// vpermw's index: element 2 j + s of the result is column j of step s of
// a BF16 head panel's two steps (the 64 bytes from step 2 q).
TARGETBF16 inline __m512i PairsOrder() {
  alignas(64) uint16_t index[32];
  for (int j = 0; j < 16; ++j) {
    const int slot = j < 8 ? 2 * j : 2 * (j - 8) + 1;
    index[2 * j] = static_cast<uint16_t>(slot);
    index[2 * j + 1] = static_cast<uint16_t>(16 + slot);
  }
  return _mm512_load_si512(index);
}

template <Panel panel>
TARGETBF16 inline __m512bh DotStep(const void* b, int64_t q, __m512i order) {
  if constexpr (panel == Panel::kFloat32) {  // pairs packed by PackW
    const __m512 v = _mm512_load_ps(static_cast<const float*>(b) + q * kNr);
    return reinterpret_cast<const __m512bh&>(v);
  } else {
    const __m512i v = _mm512_permutexvar_epi16(
        order, _mm512_loadu_si512(static_cast<const uint16_t*>(b) + 2 * q * kNr));
    return reinterpret_cast<const __m512bh&>(v);
  }
}

// The kWideRows x kWideColumns tile c (row stride ldc) = (accumulate ? c :
// 0) + two packed panels of x pairs (a0, a1) times two panels of W (b0, b1)
// over `pairs` pairs of steps.
template <Panel panel>
TARGETBF16 void DotKernel(int64_t pairs, const float* a0, const float* a1, const void* b0,
                          const void* b1, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[kWideRows][2];
#pragma GCC unroll 12
  for (int r = 0; r < kWideRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const __m512i order = PairsOrder();
  const int32_t* x0 = reinterpret_cast<const int32_t*>(a0);
  const int32_t* x1 = reinterpret_cast<const int32_t*>(a1);
#pragma GCC unroll 2
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh w0 = DotStep<panel>(b0, q, order);
    const __m512bh w1 = DotStep<panel>(b1, q, order);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m512i v = _mm512_set1_epi32(x0[q * kMr + r]);
      const __m512bh vb = reinterpret_cast<const __m512bh&>(v);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], vb, w0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], vb, w1);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m512i v = _mm512_set1_epi32(x1[q * kMr + r]);
      const __m512bh vb = reinterpret_cast<const __m512bh&>(v);
      acc[kMr + r][0] = _mm512_dpbf16_ps(acc[kMr + r][0], vb, w0);
      acc[kMr + r][1] = _mm512_dpbf16_ps(acc[kMr + r][1], vb, w1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kWideRows; ++r) PutWide(c + r * ldc, acc[r][0], acc[r][1], accumulate);
}

// Zeros standing in for the panels past the last rows of x or of W at the
// edges of the tiles (a panel of either, kKc steps).
const float* ZeroPanel() {
  alignas(64) static const float zeros[kNr * kKc] = {};
  return zeros;
}

// The columns [j0, j1) of y from x's bf16 pairs packed by PackX over the
// whole of k (`px`, k / 2 pairs a row), as Columns does with wide tiles
// only; edge tiles computed whole on zero panels and the part inside y
// kept.
template <PanelWeights type>
TARGETBF16 void DotColumns(const float* px, int64_t m, const void* w, int64_t k, int64_t ldw,
                           float* y, int64_t ldy, int64_t j0, int64_t j1) {
  constexpr Panel kPanel =
      type == PanelWeights::kBfloat16Panels ? Panel::kBf16Pairs : Panel::kFloat32;
  float* const pb = ThreadBuffers().b.get();
  const int64_t kc_size = BlockSize(k, kKc, 2);
  const int64_t mc_size = BlockSize(m, kMc, kWideRows);
  const int64_t nc = j1 - j0, kp = k / 2;
  alignas(64) float edge[kWideRows * kWideColumns];
  for (int64_t pc = 0; pc < k; pc += kc_size) {
    const int64_t kc = std::min(kc_size, k - pc), pairs = kc / 2;
    const bool accumulate = pc > 0;
    if constexpr (type == PanelWeights::kBfloat16) {
      PackW<PanelWeights::kFloat32>(
          reinterpret_cast<const float*>(static_cast<const uint16_t*>(w) + j0 * ldw + pc),
          ldw / 2, nc, pairs, pb);
    }
    const auto panel_at = [&](int64_t jr) -> const void* {
      if (jr >= nc) return ZeroPanel();
      if constexpr (kPanel == Panel::kBf16Pairs) {
        return static_cast<const uint16_t*>(w) + ((j0 + jr) / kNr * k + pc) * kNr;
      } else {
        return pb + jr * pairs;
      }
    };
    for (int64_t ic = 0; ic < m; ic += mc_size) {
      const int64_t mc = std::min(mc_size, m - ic);
      for (int64_t jr = 0; jr < nc; jr += kWideColumns) {
        const int64_t nr = std::min(kWideColumns, nc - jr);
        for (int64_t ir = 0; ir < mc; ir += kWideRows) {
          const int64_t mr = std::min(kWideRows, mc - ir);
          const float* a0 = px + (ic + ir) * kp + (pc / 2) * kMr;
          const float* a1 = mr > kMr ? a0 + kMr * kp : ZeroPanel();
          float* c = y + (ic + ir) * ldy + j0 + jr;
          if (mr == kWideRows && nr == kWideColumns) {
            DotKernel<kPanel>(pairs, a0, a1, panel_at(jr), panel_at(jr + kNr), c, ldy, accumulate);
            continue;
          }
          DotKernel<kPanel>(pairs, a0, a1, panel_at(jr), panel_at(jr + kNr), edge, kWideColumns,
                            false);
          PutCorner(edge, kWideColumns, mr, nr, c, ldy, accumulate);
        }
      }
    }
  }
}

}  // namespace

bool PanelBf16DotsAvailable() {
  static const bool available = ChosenPanelIsa() == PanelIsa::kAvx512 &&
                                __builtin_cpu_supports("avx512bf16");
  return available;
}

void PanelGemmBf16(const float* x, int64_t m, int64_t ldx, const void* w, PanelWeights type,
                   int64_t n, int64_t k, int64_t ldw, float* y, int64_t ldy) {
  if (m <= 0 || n <= 0) return;
  const bool dots = PanelBf16DotsAvailable() && type != PanelWeights::kFloat32 && k % 2 == 0 &&
                    (type == PanelWeights::kBfloat16Panels || ldw % 2 == 0) && m >= kWideRows;
  if (!dots) {
    // Float32 products of x rounded to bfloat16 (exactly representable).
    thread_local std::vector<float> rounded_rows;
    if (rounded_rows.size() < static_cast<size_t>(m * k)) {
      rounded_rows.resize(static_cast<size_t>(m * k));
    }
    float* const rounded = rounded_rows.data();
    core::ParallelFor(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t r = begin; r < end; ++r) {
                          for (int64_t j = 0; j < k; ++j) {
                            rounded[r * k + j] =
                                vmath::Bf16ToFloat(vmath::FloatToBf16(x[r * ldx + j]));
                          }
                        }
                      });
    PanelGemm(rounded, m, k, w, type, n, k, ldw, y, ldy);
    return;
  }
  const int64_t kp = k / 2;
  // Rows in chunks as PanelGemm takes them: rounded, packed as pairs, then
  // every block of columns.
  const int64_t chunk_rows = std::max(
      kWideRows, kPackedRowsBytes / (static_cast<int64_t>(sizeof(float)) * kp) / kWideRows *
                     kWideRows);
  const int64_t most_rows = std::min(m, chunk_rows);
  thread_local std::vector<uint16_t> bf16_rows;
  thread_local std::vector<float> packed;
  if (bf16_rows.size() < static_cast<size_t>(most_rows * k)) {
    bf16_rows.resize(static_cast<size_t>(most_rows * k));
  }
  const size_t need = static_cast<size_t>((most_rows + kMr - 1) / kMr * kMr * kp);
  if (packed.size() < need) packed.resize(need);
  // The calling thread's buffers, by pointer: the pool's threads have their
  // own thread_locals.
  uint16_t* const rounded = bf16_rows.data();
  float* const px = packed.data();
  for (int64_t r0 = 0; r0 < m; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, m - r0);
    core::ParallelFor((rows + kMr - 1) / kMr, 4, [&](int64_t begin, int64_t end) {
      const int64_t i0 = begin * kMr, i1 = std::min(rows, end * kMr);
      RoundRows(x + (r0 + i0) * ldx, i1 - i0, ldx, k, rounded + i0 * k);
      PackX(reinterpret_cast<const float*>(rounded + i0 * k), kp, i1 - i0, kp, px + i0 * kp);
    });
    float* const yc = y + r0 * ldy;
    GuidedColumnBlocks(n, [&](int64_t j0, int64_t j1) {
      if (type == PanelWeights::kBfloat16) {
        DotColumns<PanelWeights::kBfloat16>(px, rows, w, k, ldw, yc, ldy, j0, j1);
      } else {
        DotColumns<PanelWeights::kBfloat16Panels>(px, rows, w, k, ldw, yc, ldy, j0, j1);
      }
    });
  }
}

int64_t Bf16PanelElements(int64_t n, int64_t k) { return (n + kNr - 1) / kNr * kNr * k; }

namespace {

// Where row i of a panel (0 .. 15) sits among a step's 16 values: the low
// half of 32-bit lane i (i < 8) or the high half of lane i - 8.
inline int64_t PanelSlot(int64_t i) { return i < 8 ? 2 * i : 2 * (i - 8) + 1; }

// Panel j of PackBf16Panels: steps [0, k) of rows 16 j .. 16 j + 15.
TARGET void PackBf16Panel(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, int64_t j,
                          uint16_t* panel) {
  const int64_t row0 = j * kNr;
  int64_t p = 0;
  if (row0 + kNr <= n) {
    // Eight steps at a time: lane i of step p pairs rows i and 8 + i
    // (unpack), then the 8 x 8 block of pairs transposed to step order.
    for (; p + 8 <= k; p += 8) {
      __m256 u[8];
      for (int64_t i = 0; i < 8; ++i) {
        const __m128i lo =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + (row0 + i) * ldw + p));
        const __m128i hi =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + (row0 + 8 + i) * ldw + p));
        u[i] = _mm256_castsi256_ps(
            _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi)));
      }
      Transpose8(u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]);
      for (int64_t q = 0; q < 8; ++q) {
        _mm256_store_ps(reinterpret_cast<float*>(panel + (p + q) * kNr), u[q]);
      }
    }
  }
  for (int64_t i = 0; i < kNr; ++i) {  // the steps left, and zeros past row n
    const int64_t row = row0 + i, slot = PanelSlot(i);
    for (int64_t q = p; q < k; ++q) panel[q * kNr + slot] = row < n ? w[row * ldw + q] : 0;
  }
}

}  // namespace

void PackBf16Panels(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, uint16_t* out) {
  core::ParallelFor((n + kNr - 1) / kNr, 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) PackBf16Panel(w, ldw, n, k, j, out + j * kNr * k);
  });
}

uint16_t Bf16PanelValue(const uint16_t* panels, int64_t k, int64_t row, int64_t p) {
  return panels[(row / kNr * k + p) * kNr + PanelSlot(row % kNr)];
}

int64_t PanelFloats(int64_t n, int64_t d) { return (n + kNr - 1) / kNr * kNr * d; }

void PackKeyPanels(const float* k, int64_t ldk, int64_t keys, int64_t d, float* out) {
  PackW<PanelWeights::kFloat32>(k, ldk, keys, d, out);
}

void PackValuePanels(const float* v, int64_t ldv, int64_t keys, int64_t d, float* out) {
  for (int64_t j = 0; j < d; j += kNr) {
    const int64_t nr = std::min(kNr, d - j);
    float* panel = out + j * keys;
    for (int64_t key = 0; key < keys; ++key) {
      std::memcpy(panel + key * kNr, v + key * ldv + j, nr * sizeof(float));
      std::fill(panel + key * kNr + nr, panel + (key + 1) * kNr, 0.0f);
    }
  }
}

void PanelScores(const float* q, int64_t rows, int64_t ldq, const float* key_panels, int64_t d,
                 int64_t first, int64_t last, float scale, float* s, int64_t lds) {
  // Keys in blocks whose panels (about kScoreBlockBytes) stay in L2 while
  // each tile of rows runs along them: every row of s is then written as
  // one stream per block, where a whole panel's pass over every tile of
  // rows wrote a line to each of the block's rows, rows whose stride of a
  // power of two maps them onto the same cache sets.
  constexpr int64_t kScoreBlockBytes = int64_t{128} << 10;
  const int64_t block =
      std::max(kNr, kScoreBlockBytes / (d * static_cast<int64_t>(sizeof(float))) / kNr * kNr);
  for (int64_t b0 = first; b0 < last; b0 += block) {
    const int64_t b1 = std::min(last, b0 + block);
    for (int64_t r = 0; r < rows; r += kMr) {
      const int64_t mr = std::min(kMr, rows - r);
      for (int64_t j0 = b0; j0 < b1; j0 += kNr) {
        const int64_t nr = std::min(kNr, b1 - j0);
        const float* b = key_panels + j0 * d;
        float* c = s + r * lds + j0;
        if (nr == kNr) {
          RowsKernel(d, q + r * ldq, ldq, mr, b, c, lds, false, scale);
        } else {
          RowsKernelEdge(d, q + r * ldq, ldq, mr, b, c, lds, nr, false, scale);
        }
      }
    }
  }
}

void PanelWeightedValues(const float* p, int64_t rows, int64_t ldp, const float* value_panels,
                         int64_t keys, int64_t d, int64_t first, int64_t last, float* out,
                         int64_t ldo) {
  if (last <= first) {
    for (int64_t r = 0; r < rows; ++r) std::fill(out + r * ldo, out + r * ldo + d, 0.0f);
    return;
  }
  // Keys in blocks whose panel (kKc x kNr floats) stays in L1 while every
  // tile of rows runs over it.
  constexpr int64_t kKeys = 256;
  for (int64_t k0 = first; k0 < last; k0 += kKeys) {
    const int64_t kc = std::min(kKeys, last - k0);
    const bool accumulate = k0 > first;
    for (int64_t j = 0; j < d; j += kNr) {
      const int64_t nr = std::min(kNr, d - j);
      const float* b = value_panels + j * keys + k0 * kNr;
      for (int64_t r = 0; r < rows; r += kMr) {
        const int64_t mr = std::min(kMr, rows - r);
        const float* a = p + r * ldp + k0;
        float* c = out + r * ldo + j;
        if (nr == kNr) {
          RowsKernel(kc, a, ldp, mr, b, c, ldo, accumulate, 1.0f);
        } else {
          RowsKernelEdge(kc, a, ldp, mr, b, c, ldo, nr, accumulate, 1.0f);
        }
      }
    }
  }
}

}  // namespace attnscope::model
