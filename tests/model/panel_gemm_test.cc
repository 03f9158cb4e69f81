// The project's own product for bfloat16 and float32 weights
// (service/model/panel_gemm.h) against float64 sums: every edge of its
// 6 x 16 tiles and of its blocks, strided operands, bfloat16 weights equal
// to float32 weights of the same values bit for bit, NaN, and threads
// (blocks handed out to a pool of three, calls from several threads at
// once) giving the same bits as one thread.
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

struct Case {
  int64_t m, n, k;
};

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
  int failures = 0;
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t col = 0; col < ldy; ++col) {
      const float got = y[r * ldy + col];
      if (col >= c.n) {
        if (!(got == 7.0f) && ++failures <= 3) ADD_FAILURE() << what << ": padding changed";
        continue;
      }
      double sum = 0.0, size = 0.0;
      for (int64_t j = 0; j < c.k; ++j) {
        const double p = static_cast<double>(x[r * ldx + j]) * wf[col * ldw + j];
        sum += p;
        size += std::fabs(p);
      }
      const double diff = std::fabs(got - sum);
      if (!(diff <= 1e-6 * size + 1e-6) && ++failures <= 3) {
        ADD_FAILURE() << what << ": (" << r << ", " << col << ") = " << got << ", float64 "
                      << sum << ", |diff| " << diff;
      }
    }
  }
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
  const std::vector<float> one = product();
  Pool pool(3);
  EXPECT_EQ(one, product());
  // Several callers at once, each with the pool of three.
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> callers;
  for (auto& g : got) callers.emplace_back([&] { g = product(); });
  for (std::thread& t : callers) t.join();
  for (const auto& g : got) EXPECT_EQ(one, g);
}

}  // namespace
}  // namespace attnscope::model
