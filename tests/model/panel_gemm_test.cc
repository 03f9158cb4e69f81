// The project's own product for bfloat16 and float32 weights
// (service/model/panel_gemm.h) against float64 sums: every edge of its
// 6 x 16 tiles and of its blocks, strided operands, bfloat16 weights equal
// to float32 weights of the same values bit for bit, NaN, and threads
// (blocks handed out to a pool of three, calls from several threads at
// once) giving the same bits as one thread; bfloat16 weights packed ahead
// (PackBf16Panels) giving the bits of the same weights packed per product;
// AVX-512's tiles giving the bits of AVX2's; bfloat16 products (AVX-512
// BF16's dot products) against float64 sums of the rounded operands; and
// attention's two products on
// keys and values packed once (PanelScores, PanelWeightedValues).
#include "service/model/panel_gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/parallel.h"

namespace attnscope::model {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float Widen(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A pool of `threads` std::threads for core::ParallelFor (each chunk on
// its own thread), installed for the test's lifetime.
class Pool {
 public:
  explicit Pool(int threads) : previous_(core::CurrentParallelForImpl()) {
    width_ = threads;
    core::SetParallelForImpl(&Run);
  }
  ~Pool() { core::SetParallelForImpl(previous_); }

 private:
  static void Run(int64_t n, int64_t grain, const core::ChunkFn& fn) {
    const int64_t chunks = std::min<int64_t>(width_, (n + grain - 1) / grain);
    std::vector<std::thread> threads;
    for (int64_t c = 1; c < chunks; ++c) {
      threads.emplace_back([&, c] { fn(n * c / chunks, n * (c + 1) / chunks); });
    }
    fn(0, n / chunks);
    for (std::thread& t : threads) t.join();
  }
  static inline int width_ = 1;
  core::ParallelForImpl previous_;
};

// sum_i a[i * sa] b[i * sb] over n terms in float64, and sum_i |terms|
// (the scale of its rounding error).
struct Sum {
  double value = 0, size = 0;
};
Sum Float64Dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n) {
  Sum s;
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(a[i * sa]) * b[i * sb];
    s.value += t;
    s.size += std::fabs(t);
  }
  return s;
}

struct Case {
  int64_t m, n, k;
};

// y (c.m rows, row stride ldy, filled with 7 before the product) against
// float64 sums of x (c.m x c.k, ldx) times w (c.n x c.k, ldw) transposed,
// within 1e-6 of sum |x w| (fails on NaN); the padding columns of y must
// still hold 7.
void ExpectFloat64Sums(const std::string& what, const Case& c, const float* x, int64_t ldx,
                       const float* w, int64_t ldw, const std::vector<float>& y, int64_t ldy) {
  int failures = 0;
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t col = 0; col < ldy; ++col) {
      const float got = y[r * ldy + col];
      if (col >= c.n) {
        if (!(got == 7.0f) && ++failures <= 3) ADD_FAILURE() << what << ": padding changed";
        continue;
      }
      const Sum dot = Float64Dot(x + r * ldx, 1, w + col * ldw, 1, c.k);
      const double diff = std::fabs(got - dot.value);
      if (!(diff <= 1e-6 * dot.size + 1e-6) && ++failures <= 3) {
        ADD_FAILURE() << what << ": (" << r << ", " << col << ") = " << got << ", float64 "
                      << dot.value << ", |diff| " << diff;
      }
    }
  }
}

// y = x W^T for W (n x k, row stride ldw) given as float32 values `wf`
// (bfloat16 ones when `bf16`, passed as their bits): checked against
// float64 sums within 1e-6 of sum |x w| (fails on NaN), and the padding
// columns of y left as they were.
void Check(const Case& c, bool bf16, uint32_t seed) {
  const int64_t ldx = c.k + 3, ldw = c.k + 5, ldy = c.n + 2;
  const std::vector<float> x = Random(c.m * ldx, seed);
  std::vector<float> wf = Random(c.n * ldw, seed + 1);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = Bf16Bits(wf[i]);
    if (bf16) wf[i] = Widen(wb[i]);
  }
  std::vector<float> y(c.m * ldy, 7.0f);
  if (bf16) {
    PanelGemm(x.data(), c.m, ldx, wb.data(), PanelWeights::kBfloat16, c.n, c.k, ldw, y.data(), ldy);
  } else {
    PanelGemm(x.data(), c.m, ldx, wf.data(), PanelWeights::kFloat32, c.n, c.k, ldw, y.data(), ldy);
  }
  const std::string what = std::string(bf16 ? "bf16" : "f32") + " m=" + std::to_string(c.m) +
                           " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
  ExpectFloat64Sums(what, c, x.data(), ldx, wf.data(), ldw, y, ldy);
}

TEST(PanelGemm, MatchesFloat64SumsAtEveryEdgeOfTilesAndBlocks) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  // Rows around the 6-row tile and the 72-row block, columns around the
  // 16-column tile, k around the 8-column transposes and the 512 block.
  const std::vector<Case> cases = {
      {1, 1, 1},     {1, 16, 8},    {5, 15, 7},    {6, 16, 8},    {7, 17, 9},
      {13, 40, 300}, {72, 33, 64},  {73, 48, 513}, {150, 529, 37}, {11, 600, 1030},
      {2, 3, 1100},  {97, 1031, 17}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    Check(c, /*bf16=*/false, seed);
    Check(c, /*bf16=*/true, seed + 7);
    seed += 20;
  }
}

// W packed ahead (PackBf16Panels, 32-byte aligned) for PanelGemm's
// kBfloat16Panels.
struct Panels {
  Panels(const std::vector<uint16_t>& w, int64_t ldw, int64_t n, int64_t k)
      : bits(static_cast<size_t>(Bf16PanelElements(n, k)) + 16, 0xFFFF) {
    const auto at = reinterpret_cast<uintptr_t>(bits.data());
    data = bits.data() + ((32 - at % 32) % 32) / sizeof(uint16_t);
    PackBf16Panels(w.data(), ldw, n, k, data);
  }
  std::vector<uint16_t> bits;
  uint16_t* data;
};

// A case's operands: x (x_rows x k, row stride k + 3, random), W (n x k,
// row stride ldw) as random float32 values, their bfloat16 bits and those
// bits packed ahead; Weights(type) and Stride(type) as PanelGemm takes them.
struct Operands {
  Operands(const Case& c, int64_t x_rows, int64_t w_stride, uint32_t seed)
      : k(c.k),
        ldx(c.k + 3),
        ldw(w_stride),
        x(Random(x_rows * ldx, seed)),
        wf(Random(c.n * w_stride, seed + 1)),
        wb(Bits(wf)),
        panels(wb, ldw, c.n, c.k) {}
  static std::vector<uint16_t> Bits(const std::vector<float>& v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = Bf16Bits(v[i]);
    return bits;
  }
  const void* Weights(PanelWeights type) const {
    return type == PanelWeights::kFloat32    ? static_cast<const void*>(wf.data())
           : type == PanelWeights::kBfloat16 ? static_cast<const void*>(wb.data())
                                             : static_cast<const void*>(panels.data);
  }
  int64_t Stride(PanelWeights type) const { return type == PanelWeights::kBfloat16Panels ? k : ldw; }
  int64_t k, ldx, ldw;
  std::vector<float> x, wf;
  std::vector<uint16_t> wb;
  Panels panels;
};

// Weights packed ahead give the bits of the same weights packed block by
// block in each product (which MatchesFloat64SumsAtEveryEdgeOfTilesAndBlocks
// checks against float64 sums), at every edge, on strided x and W; the
// panels hold every value (Bf16PanelValue) and zeros past the last row.
TEST(PanelGemm, Bfloat16PanelsPackedAheadGiveTheBitsOfTheRows) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const std::vector<Case> cases = {
      {1, 1, 1},    {1, 16, 8},   {5, 15, 7},    {6, 16, 8},     {7, 17, 9},   {13, 40, 300},
      {72, 33, 64}, {73, 48, 513}, {150, 529, 37}, {11, 600, 1030}, {2, 3, 1100}, {97, 1031, 17}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    const std::string what =
        "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
    const int64_t ldx = c.k + 3, ldw = c.k + 5, ldy = c.n + 2;
    const std::vector<float> x = Random(c.m * ldx, seed);
    const std::vector<float> wf = Random(c.n * ldw, seed + 1);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = Bf16Bits(wf[i]);
    const Panels panels(w, ldw, c.n, c.k);
    int wrong = 0;
    for (int64_t row = 0; row < c.n; ++row) {
      for (int64_t p = 0; p < c.k; ++p) {
        wrong += Bf16PanelValue(panels.data, c.k, row, p) != w[row * ldw + p];
      }
    }
    EXPECT_EQ(wrong, 0) << what << ": values not where Bf16PanelValue reads them";
    const int64_t padded = Bf16PanelElements(c.n, c.k);
    int64_t zeros = 0;
    for (int64_t i = 0; i < padded; ++i) zeros += panels.data[i] == 0;
    int64_t zero_values = 0;
    for (int64_t row = 0; row < c.n; ++row) {
      for (int64_t p = 0; p < c.k; ++p) zero_values += w[row * ldw + p] == 0;
    }
    EXPECT_EQ(zeros, padded - c.n * c.k + zero_values) << what << ": padding rows not zero";
    std::vector<float> rows(c.m * ldy, 7.0f), ahead(c.m * ldy, 7.0f);
    PanelGemm(x.data(), c.m, ldx, w.data(), PanelWeights::kBfloat16, c.n, c.k, ldw, rows.data(),
              ldy);
    PanelGemm(x.data(), c.m, ldx, panels.data, PanelWeights::kBfloat16Panels, c.n, c.k, c.k,
              ahead.data(), ldy);
    EXPECT_EQ(0, std::memcmp(rows.data(), ahead.data(), rows.size() * sizeof(float))) << what;
    seed += 20;
  }
}

// Fewer rows than a tile (a decoding step) are read in place in a tile of
// their own rows: each gives the bits it has as one row of a packed block
// (the same rows followed by six more), for every kind of weights, at the
// edges of the 16-column tile and of the 512 block of k.
TEST(PanelGemm, FewRowsReadInPlaceGiveTheBitsOfPackedRows) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const std::vector<Case> cases = {{1, 1, 1}, {1, 37, 513}, {2, 16, 9}, {3, 600, 1030},
                                   {4, 33, 64}, {5, 1031, 17}};
  uint32_t seed = 90;
  for (const Case& c : cases) {
    const int64_t more = c.m + 6, ldy = c.n + 2;
    const Operands o(c, more, c.k + 5, seed);
    const auto product = [&](int64_t m, PanelWeights type) {
      std::vector<float> y(m * ldy, 7.0f);
      PanelGemm(o.x.data(), m, o.ldx, o.Weights(type), type, c.n, c.k, o.Stride(type), y.data(),
                ldy);
      return y;
    };
    for (PanelWeights type :
         {PanelWeights::kFloat32, PanelWeights::kBfloat16, PanelWeights::kBfloat16Panels}) {
      const std::vector<float> few = product(c.m, type), packed = product(more, type);
      EXPECT_EQ(0, std::memcmp(few.data(), packed.data(), few.size() * sizeof(float)))
          << "m=" << c.m << " n=" << c.n << " k=" << c.k << " type " << static_cast<int>(type);
    }
    seed += 20;
  }
}

// AVX-512's 12 x 32 tiles (with AVX2 tiles at their edges) give the bits
// of AVX2's 6 x 16 tiles alone, for every kind of weights, at the edges of
// both tiles, of the 72-row block and of the 512 block of k, on strided
// operands, on a pool of three threads. (MatchesFloat64SumsAtEveryEdge...
// checks the chosen tiles against float64 sums.)
TEST(PanelGemm, Avx512TilesGiveTheBitsOfAvx2Tiles) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  if (ChosenPanelIsa() != PanelIsa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512F and BW";
  Pool pool(3);
  const std::vector<Case> cases = {{12, 32, 8},   {12, 32, 513}, {11, 31, 64},  {13, 33, 9},
                                   {24, 64, 300}, {25, 48, 1030}, {72, 96, 37}, {73, 529, 600},
                                   {150, 1031, 17}, {36, 16, 100}, {6, 1152, 896},
                                   {20, 64, 100},  {128, 96, 896}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const int64_t ldy = c.n + 2;
    const Operands o(c, c.m, c.k + 5, seed);
    for (PanelWeights type :
         {PanelWeights::kFloat32, PanelWeights::kBfloat16, PanelWeights::kBfloat16Panels}) {
      const void* w = o.Weights(type);
      const int64_t ld = o.Stride(type);
      std::vector<float> narrow(c.m * ldy, 7.0f), wide(c.m * ldy, 7.0f);
      PanelGemmOn(PanelIsa::kAvx2, o.x.data(), c.m, o.ldx, w, type, c.n, c.k, ld, narrow.data(),
                  ldy);
      PanelGemmOn(PanelIsa::kAvx512, o.x.data(), c.m, o.ldx, w, type, c.n, c.k, ld, wide.data(),
                  ldy);
      int differ = 0;
      for (size_t i = 0; i < wide.size(); ++i) {
        differ += std::memcmp(&wide[i], &narrow[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(differ, 0) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " type "
                           << static_cast<int>(type);
    }
    seed += 20;
  }
}

// Bfloat16 products (PanelGemmBf16): x rounded to bfloat16, against
// float64 sums of the rounded operands within 1e-6 of sum |x w| (fails on
// NaN), on rows and on panels packed ahead, at every edge of the wide tile
// and of the blocks, strided, on three threads; with AVX-512 BF16 these
// take its dot products (12 rows or more, even k), elsewhere and for the
// other shapes float32 products. The padding columns of y are left alone.
TEST(PanelGemm, Bfloat16ProductsMatchFloat64SumsOfRoundedOperands) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  Pool pool(3);
  const std::vector<Case> cases = {{12, 32, 2},    {12, 32, 512},  {13, 31, 8},   {25, 33, 300},
                                   {72, 48, 1030}, {73, 529, 64},  {150, 96, 514}, {36, 16, 1026},
                                   {5, 40, 100},   {20, 17, 33},   {64, 1152, 896}};
  uint32_t seed = 500;
  for (const Case& c : cases) {
    const int64_t ldy = c.n + 2;
    const Operands o(c, c.m, c.k + (c.k % 2 == 0 ? 6 : 5), seed);
    // The rounded operands, as float32.
    std::vector<float> xr(o.x.size()), wr(o.wb.size());
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = Widen(Bf16Bits(o.x[i]));
    for (size_t i = 0; i < wr.size(); ++i) wr[i] = Widen(o.wb[i]);
    for (PanelWeights type : {PanelWeights::kBfloat16, PanelWeights::kBfloat16Panels}) {
      const std::string what = "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                               " k=" + std::to_string(c.k) + " type " +
                               std::to_string(static_cast<int>(type));
      std::vector<float> y(c.m * ldy, 7.0f);
      PanelGemmBf16(o.x.data(), c.m, o.ldx, o.Weights(type), type, c.n, c.k, o.Stride(type),
                    y.data(), ldy);
      ExpectFloat64Sums(what, c, xr.data(), o.ldx, wr.data(), o.ldw, y, ldy);
    }
    seed += 20;
  }
}

TEST(PanelGemm, ModelShapedProductOnThreeThreads) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  Pool pool(3);
  Check({64, 1152, 896}, /*bf16=*/true, 3);  // a Qwen2.5-0.5B q|k|v
  Check({40, 896, 4864}, /*bf16=*/true, 4);  // its down projection
}

TEST(PanelGemm, Bfloat16WeightsGiveTheBitsOfTheirFloat32Values) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const int64_t m = 50, n = 300, k = 700;
  const std::vector<float> x = Random(m * k, 1), w = Random(n * k, 2);
  std::vector<uint16_t> wb(w.size());
  std::vector<float> wide(w.size());
  for (size_t i = 0; i < w.size(); ++i) wide[i] = Widen(wb[i] = Bf16Bits(w[i]));
  std::vector<float> a(m * n), b(m * n);
  PanelGemm(x.data(), m, k, wb.data(), PanelWeights::kBfloat16, n, k, k, a.data(), n);
  PanelGemm(x.data(), m, k, wide.data(), PanelWeights::kFloat32, n, k, k, b.data(), n);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(PanelGemm, NanStaysInItsRowAndColumn) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const int64_t m = 20, n = 40, k = 600;
  std::vector<float> x = Random(m * k, 5);
  std::vector<uint16_t> w(n * k);
  const std::vector<float> wf = Random(n * k, 6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = Bf16Bits(wf[i]);
  x[7 * k + 555] = std::numeric_limits<float>::quiet_NaN();
  w[33 * k + 3] = 0x7fc0;  // a bfloat16 NaN
  std::vector<float> y(m * n);
  PanelGemm(x.data(), m, k, w.data(), PanelWeights::kBfloat16, n, k, k, y.data(), n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_EQ(r == 7 || c == 33, std::isnan(y[r * n + c])) << r << ", " << c;
    }
  }
}

// A 32-byte aligned buffer of n floats.
struct Aligned {
  explicit Aligned(int64_t n) : data(static_cast<size_t>(n) + 8) {}
  float* get() {
    const auto at = reinterpret_cast<uintptr_t>(data.data());
    return data.data() + ((32 - at % 32) % 32) / sizeof(float);
  }
  std::vector<float> data;
};

struct AttentionCase {
  int64_t rows, keys, d, first, last;
};

// Scores s = scale q K^T over keys [first, last) and weighted values
// out = P V over the same keys, against float64 sums within 1e-6 of
// sum |terms| (fails on NaN); every column of s outside [first, last) and
// every padding column of out left as it was.
void CheckAttention(const AttentionCase& c, uint32_t seed) {
  const int64_t ldq = c.d + 3, ldk = c.d + 1, ldv = c.d + 5, lds = c.keys + 4, ldo = c.d + 2;
  const std::vector<float> q = Random(c.rows * ldq, seed), k = Random(c.keys * ldk, seed + 1),
                           v = Random(c.keys * ldv, seed + 2), p = Random(c.rows * lds, seed + 3);
  Aligned key_panels(PanelFloats(c.keys, c.d)), value_panels(PanelFloats(c.d, c.keys));
  PackKeyPanels(k.data(), ldk, c.keys, c.d, key_panels.get());
  PackValuePanels(v.data(), ldv, c.keys, c.d, value_panels.get());
  const float scale = 0.125f;
  std::vector<float> s(c.rows * lds, 7.0f), out(c.rows * ldo, 7.0f);
  PanelScores(q.data(), c.rows, ldq, key_panels.get(), c.d, c.first, c.last, scale, s.data(), lds);
  PanelWeightedValues(p.data(), c.rows, lds, value_panels.get(), c.keys, c.d, c.first, c.last,
                      out.data(), ldo);
  const std::string what = "rows=" + std::to_string(c.rows) + " keys=" + std::to_string(c.keys) +
                           " d=" + std::to_string(c.d) + " [" + std::to_string(c.first) + ", " +
                           std::to_string(c.last) + ")";
  int failures = 0;
  const auto expect = [&](float got, double sum, double size, const std::string& where) {
    const double diff = std::fabs(got - sum);
    if (!(diff <= 1e-6 * size + 1e-6) && ++failures <= 3) {
      ADD_FAILURE() << what << ": " << where << " = " << got << ", float64 " << sum;
    }
  };
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < lds; ++j) {
      const float got = s[r * lds + j];
      if (j < c.first || j >= c.last) {
        if (!(got == 7.0f) && ++failures <= 3) ADD_FAILURE() << what << ": score " << j << " written";
        continue;
      }
      const Sum dot = Float64Dot(&q[r * ldq], 1, &k[j * ldk], 1, c.d);
      expect(got, dot.value * scale, dot.size * scale, "s(" + std::to_string(r) + ", " + std::to_string(j) + ")");
    }
    for (int64_t e = 0; e < ldo; ++e) {
      const float got = out[r * ldo + e];
      if (e >= c.d) {
        if (!(got == 7.0f) && ++failures <= 3) ADD_FAILURE() << what << ": out padding written";
        continue;
      }
      const Sum dot = Float64Dot(&p[r * lds + c.first], 1, &v[c.first * ldv + e], ldv,
                                 c.last - c.first);
      expect(got, dot.value, dot.size, "out(" + std::to_string(r) + ", " + std::to_string(e) + ")");
    }
  }
}

TEST(PanelAttention, MatchesFloat64SumsAtEveryEdge) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  // Rows around the 6-row tile (every remainder 1 .. 5), keys around the
  // 16-key panel, the 256-key blocks of the weighted values and the blocks
  // of keys the scores take (512 keys at d = 64, 448 at 72, 128 at 256),
  // head dims that are and are not multiples of 16, ranges that start past
  // 0 (a sliding window) and end before the last key (a block's causal end).
  const std::vector<AttentionCase> cases = {
      {1, 1, 1, 0, 1},        {6, 16, 16, 0, 16},     {7, 17, 64, 0, 17},
      {5, 40, 5, 16, 33},     {64, 300, 64, 0, 300},  {13, 520, 72, 32, 515},
      {11, 257, 80, 0, 257},  {4, 700, 256, 256, 700}, {9, 50, 64, 48, 50},
      {3, 20, 64, 0, 0},      {8, 1100, 64, 16, 1090}, {2, 1030, 64, 0, 1030}};
  uint32_t seed = 40;
  for (const AttentionCase& c : cases) {
    CheckAttention(c, seed);
    seed += 10;
  }
}

TEST(PanelAttention, NanStaysInItsRowAndKey) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const int64_t rows = 14, keys = 70, d = 64;
  std::vector<float> q = Random(rows * d, 1), k = Random(keys * d, 2), v = Random(keys * d, 3);
  q[5 * d + 9] = std::numeric_limits<float>::quiet_NaN();
  k[41 * d + 60] = std::numeric_limits<float>::quiet_NaN();
  Aligned kp(PanelFloats(keys, d)), vp(PanelFloats(d, keys));
  PackKeyPanels(k.data(), d, keys, d, kp.get());
  std::vector<float> s(rows * keys);
  PanelScores(q.data(), rows, d, kp.get(), d, 0, keys, 1.0f, s.data(), keys);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < keys; ++j) {
      EXPECT_EQ(r == 5 || j == 41, std::isnan(s[r * keys + j])) << r << ", " << j;
    }
  }
  v[23 * d + 17] = std::numeric_limits<float>::quiet_NaN();
  PackValuePanels(v.data(), d, keys, d, vp.get());
  const std::vector<float> p = Random(rows * keys, 4);
  std::vector<float> out(rows * d);
  PanelWeightedValues(p.data(), rows, keys, vp.get(), keys, d, 0, keys, out.data(), d);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < d; ++e) EXPECT_EQ(e == 17, std::isnan(out[r * d + e])) << r << ", " << e;
  }
}

TEST(PanelGemm, ThreadsGiveTheBitsOfOneThread) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const int64_t m = 77, n = 2000, k = 900;
  const std::vector<float> x = Random(m * k, 7);
  std::vector<uint16_t> w(n * k);
  const std::vector<float> wf = Random(n * k, 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = Bf16Bits(wf[i]);
  const auto product = [&] {
    std::vector<float> y(m * n);
    PanelGemm(x.data(), m, k, w.data(), PanelWeights::kBfloat16, n, k, k, y.data(), n);
    return y;
  };
  const Panels panels(w, k, n, k);
  const auto packed_ahead = [&] {
    std::vector<float> y(m * n);
    PanelGemm(x.data(), m, k, panels.data, PanelWeights::kBfloat16Panels, n, k, k, y.data(), n);
    return y;
  };
  const std::vector<float> one = product();
  EXPECT_EQ(one, packed_ahead());
  Pool pool(3);
  EXPECT_EQ(one, product());
  EXPECT_EQ(one, packed_ahead());
  // Several callers at once, each with the pool of three.
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> callers;
  for (auto& g : got) callers.emplace_back([&] { g = product(); });
  for (std::thread& t : callers) t.join();
  for (const auto& g : got) EXPECT_EQ(one, g);
}

}  // namespace
}  // namespace attnscope::model
