// vmath's kernels against double-precision libm on the lengths that exercise
// their vector bodies, partial tails and 64-element flushes, and on the
// edge values (0, masked, NaN, ties) the statistics rely on.
#include "service/core/vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/float_compare.h"

namespace attnscope::vmath {
namespace {

using test::MaxAbsDiff;

const std::vector<int64_t> kLengths = {1, 3, 8, 9, 63, 64, 65, 127, 1000, 50257};

std::vector<float> Normal(int64_t n, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

// softmax in double.
std::vector<double> ReferenceSoftmax(const std::vector<float>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (float v : z) s += std::exp(v - m);
  std::vector<double> p;
  for (float v : z) p.push_back(std::exp(v - m) / s);
  return p;
}

// ctest runs these tests again with ATTNSCOPE_VMATH=avx2 and =base (names
// ending .avx2, .base), so every instantiation is checked on one machine.
TEST(VectorMathTest, KernelSetIsTheAskedOneOrTheWidestTheCpuHas) {
  const std::string set = KernelSet();
  const char* asked = std::getenv("ATTNSCOPE_VMATH");
  if (asked != nullptr && std::string(asked) == "base") {
    EXPECT_EQ(set, "base");
  } else if (asked != nullptr && std::string(asked) == "avx2") {
    EXPECT_TRUE(set == "avx2" || set == "base") << set;
  } else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("fma")) {
    EXPECT_EQ(set, "avx512");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(set, "avx2");
  } else {
    EXPECT_EQ(set, "base");
  }
}

TEST(VectorMathTest, ExpAndLogAreWithinAFewUlp) {
  double worst_exp = 0, worst_log = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    worst_exp = test::Worse(worst_exp, std::fabs(Exp(x) - want) / want);
  }
  for (float x = 1e-37f; x < 1e37f; x *= 1.0123f) {
    const double want = std::log(static_cast<double>(x));
    worst_log = test::Worse(worst_log, std::fabs(Log(x) - want) / std::max(1.0, std::fabs(want)));
  }
  EXPECT_LE(worst_exp, 3e-7);
  EXPECT_LE(worst_log, 3e-7);
  EXPECT_EQ(Exp(-88.0f), 0.0f);  // masked scores give exact zeros
  EXPECT_EQ(Exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(Exp(std::nanf(""))));
  EXPECT_EQ(Exp(0.0f), 1.0f);
}

TEST(VectorMathTest, SoftmaxMatchesDoubleAndWorksInPlace) {
  for (int64_t n : kLengths) {
    std::vector<float> z = Normal(n, 4.0f, 1);
    const std::vector<double> want = ReferenceSoftmax(z);
    std::vector<float> p(z.size());
    Softmax(z.data(), n, p.data());
    EXPECT_LE(MaxAbsDiff(p, want), 1e-6) << n;
    Softmax(z.data(), n, z.data());
    EXPECT_EQ(z, p) << n;
  }
}

// The softmax that also gives the row's entropy writes the same
// probabilities, bit for bit, and an entropy within ~1e-7 relative of
// -sum p log p in double, also where entries underflow to exact zeros.
TEST(VectorMathTest, SoftmaxEntropyIsSoftmaxPlusTheRowsEntropy) {
  for (float stddev : {0.1f, 4.0f, 60.0f}) {
    for (int64_t n : kLengths) {
      std::vector<float> z = Normal(n, stddev, 7);
      if (n > 3) z[2] = -1e30f;  // exp underflows: p = 0 exactly, 0 log 0 = 0
      const std::vector<double> want = ReferenceSoftmax(z);
      double want_entropy = 0;
      for (double p : want) {
        if (p > 0) want_entropy -= p * std::log(p);
      }
      std::vector<float> plain(z.size()), fused(z.size());
      Softmax(z.data(), n, plain.data());
      const double entropy = SoftmaxEntropy(z.data(), n, fused.data());
      EXPECT_EQ(fused, plain) << n;
      EXPECT_TRUE(std::fabs(entropy - want_entropy) <= 1e-6 * std::max(1.0, want_entropy))
          << n << " stddev " << stddev << ": " << entropy << " vs " << want_entropy;
      // In place, too.
      EXPECT_EQ(SoftmaxEntropy(z.data(), n, z.data()), entropy);
      EXPECT_EQ(z, plain) << n;
    }
  }
  const std::vector<float> one = {3.0f};
  float out = 0;
  EXPECT_EQ(SoftmaxEntropy(one.data(), 1, &out), 0.0);
  EXPECT_EQ(out, 1.0f);
  std::vector<float> nan = {1.0f, std::nanf(""), 2.0f};
  EXPECT_TRUE(std::isnan(SoftmaxEntropy(nan.data(), 3, nan.data())));
}

TEST(VectorMathTest, SoftmaxOfANanRowIsNan) {
  std::vector<float> z = {1.0f, std::nanf(""), 2.0f};
  Softmax(z.data(), 3, z.data());
  EXPECT_TRUE(std::isnan(z[0]));
}

TEST(VectorMathTest, AttentionRowSumsEntropyWeightsAndColumns) {
  for (int64_t n : kLengths) {
    std::vector<float> p(static_cast<size_t>(n));
    const std::vector<double> soft = ReferenceSoftmax(Normal(n, 2.0f, 2));
    for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<float>(soft[j]);
    p[0] = 0.0f;  // 0 log 0 = 0
    const std::vector<float> w = Normal(n, 1.0f, 3);
    double entropy = 0, weighted = 0;
    for (size_t j = 0; j < p.size(); ++j) {
      if (p[j] > 0) entropy -= p[j] * std::log(static_cast<double>(p[j]));
      weighted += static_cast<double>(p[j]) * w[j];
    }
    std::vector<double> columns(p.size(), 0.5);
    const AttentionRowSums got = AttentionRow(p.data(), w.data(), n, columns.data());
    EXPECT_NEAR(got.entropy, entropy, 1e-6 * std::max(1.0, entropy)) << n;
    EXPECT_NEAR(got.weighted, weighted, 1e-6) << n;
    std::vector<double> want_columns(p.size());
    for (size_t j = 0; j < p.size(); ++j) want_columns[j] = 0.5 + p[j];
    EXPECT_LE(MaxAbsDiff(columns, want_columns), 0.0) << n;  // exact: float to double adds
    const AttentionRowSums bare = AttentionRow(p.data(), nullptr, n, nullptr);
    EXPECT_EQ(bare.entropy, got.entropy);
    EXPECT_EQ(bare.weighted, 0.0);
  }
}

// Without the entropy (the softmax gave it), the same weighted sum and
// columns, and an entropy of 0.
TEST(VectorMathTest, AttentionRowWithoutEntropyKeepsTheOtherSums) {
  for (int64_t n : kLengths) {
    std::vector<float> p(static_cast<size_t>(n));
    Softmax(Normal(n, 2.0f, 4).data(), n, p.data());
    const std::vector<float> w = Normal(n, 1.0f, 5);
    std::vector<double> columns(p.size(), 0.25), columns_without(p.size(), 0.25);
    const AttentionRowSums with = AttentionRow(p.data(), w.data(), n, columns.data());
    const AttentionRowSums without =
        AttentionRow(p.data(), w.data(), n, columns_without.data(), /*with_entropy=*/false);
    EXPECT_EQ(without.entropy, 0.0);
    EXPECT_EQ(without.weighted, with.weighted) << n;
    EXPECT_EQ(columns_without, columns) << n;
    EXPECT_GT(with.entropy, n > 1 ? 0.0 : -1.0);
  }
}

TEST(VectorMathTest, NegativeAttentionEntriesCountAsZero) {
  const std::vector<float> p = {-0.5f, 0.5f, 0.5f};
  EXPECT_NEAR(AttentionRow(p.data(), nullptr, 3, nullptr).entropy, std::log(2.0), 1e-7);
}

TEST(VectorMathTest, LogitRowMatchesLogSoftmaxInDouble) {
  for (int64_t n : kLengths) {
    const std::vector<float> z = Normal(n, 3.0f, 4);
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (float v : z) s += std::exp(v - m);
    const double log_z = m + std::log(s);
    double entropy = 0;
    for (float v : z) entropy -= std::exp(v - log_z) * (v - log_z);
    const LogitRowStats got = LogitRow(z.data(), n);
    EXPECT_EQ(got.max, m) << n;
    EXPECT_NEAR(got.log_z, log_z, 1e-6) << n;
    EXPECT_NEAR(got.entropy, entropy, 1e-6) << n;
  }
  const std::vector<float> peaked = {0.0f, 1000.0f, 0.0f};  // one-hot: entropy 0
  EXPECT_NEAR(LogitRow(peaked.data(), 3).entropy, 0.0, 1e-12);
}

TEST(VectorMathTest, SumSquaresInDouble) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = Normal(n, 3000.0f, 5);
    double want = 0;
    for (float v : x) want += static_cast<double>(v) * v;
    EXPECT_NEAR(SumSquares(x.data(), n), want, 1e-12 * want) << n;
  }
}

// The bits of the bfloat16 nearest below |v| (any bfloat16 value will do).
uint16_t Bf16Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16Value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(VectorMathTest, Bf16RowDotsMatchDoubleForEveryRowCountAndTail) {
  for (int64_t k : {1, 7, 16, 17, 63, 896, 4864}) {
    for (int64_t m : {1, 2, 4, 5, 9}) {
      const int64_t ldx = k + 3, ldy = 2;  // strided rows in and out
      const std::vector<float> x = Normal(m * ldx, 1.0f, 11);
      std::vector<uint16_t> w;
      for (float v : Normal(k, 0.05f, 12)) w.push_back(Bf16Bits(v));
      std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
      Bf16RowDots(x.data(), ldx, m, w.data(), k, 1, k, y.data(), ldy);
      for (int64_t i = 0; i < m; ++i) {
        double want = 0, magnitude = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double term = static_cast<double>(x[i * ldx + j]) * Bf16Value(w[j]);
          want += term;
          magnitude += std::fabs(term);
        }
        // Float sums of about k / 8 terms a lane.
        const double tol = (static_cast<double>(k) / 8 + 8) * 6e-8 * magnitude;
        const double got = y[i * ldy];
        if (!(std::fabs(got - want) <= tol)) {
          ADD_FAILURE() << "k " << k << " m " << m << " row " << i << ": " << got << " vs " << want;
        }
        EXPECT_EQ(y[i * ldy + 1], -7.0f) << "wrote between the rows";
      }
    }
  }
  // A NaN weight makes every row's product NaN.
  const std::vector<float> x = Normal(2 * 40, 1.0f, 13);
  std::vector<uint16_t> w(40, Bf16Bits(0.5f));
  w[37] = 0x7fc0;  // a bfloat16 NaN, in the tail after the vector body
  float y[2] = {0.0f, 0.0f};
  Bf16RowDots(x.data(), 40, 2, w.data(), 40, 1, 40, y, 1);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
}

// Several rows of w at once (one row of x: four rows of w a step) give each
// row's product the bits it has alone, whatever the count of rows and
// where the groups of four fall; a NaN stays in its row.
TEST(VectorMathTest, Bf16RowDotsOfManyRowsGiveEachRowsBitsAlone) {
  for (int64_t k : {1, 15, 16, 17, 896, 4864}) {
    for (int64_t m : {1, 2}) {
      for (int64_t n : {1, 3, 4, 5, 8, 9, 13}) {
        const int64_t ldw = k + 5, ldy = n + 2;
        const std::vector<float> x = Normal(m * k, 1.0f, 21);
        std::vector<uint16_t> w;
        for (float v : Normal(n * ldw, 0.05f, 22)) w.push_back(Bf16Bits(v));
        if (n == 9) w[6 * ldw + k / 2] = 0x7fc0;  // NaN in row 6
        std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
        Bf16RowDots(x.data(), k, m, w.data(), ldw, n, k, y.data(), ldy);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < n; ++r) {
            float alone = 0.0f;
            Bf16RowDots(x.data() + i * k, k, 1, w.data() + r * ldw, ldw, 1, k, &alone, 1);
            const float got = y[i * ldy + r];
            EXPECT_EQ(n == 9 && r == 6, std::isnan(got)) << "k " << k << " n " << n << " row " << r;
            uint32_t got_bits, alone_bits;
            std::memcpy(&got_bits, &got, sizeof got);
            std::memcpy(&alone_bits, &alone, sizeof alone);
            EXPECT_EQ(got_bits, alone_bits) << "k " << k << " m " << m << " n " << n << " row " << r;
          }
          EXPECT_EQ(y[i * ldy + n], -7.0f) << "wrote past the rows";
          EXPECT_EQ(y[i * ldy + n + 1], -7.0f) << "wrote past the rows";
        }
      }
    }
  }
}

TEST(VectorMathTest, TopKIsPartialSortWithLowerIndexFirstOnTies) {
  for (int64_t n : kLengths) {
    std::vector<float> x = Normal(n, 1.0f, 6);
    for (size_t j = 0; j < x.size(); j += 7) x[j] = 0.25f;  // many ties
    for (int64_t k : {1, 5, 70}) {
      std::vector<int64_t> order(x.size());
      for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
      const auto keep = static_cast<size_t>(std::min(k, n));
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep),
                        order.end(), [&](int64_t a, int64_t b) {
                          return x[a] > x[b] || (x[a] == x[b] && a < b);
                        });
      order.resize(keep);
      std::vector<int64_t> got(keep);
      ASSERT_EQ(TopK(x.data(), n, k, got.data()), static_cast<int64_t>(keep));
      EXPECT_EQ(got, order) << "n " << n << " k " << k;
    }
  }
}

TEST(VectorMathTest, TopKRanksNanLast) {
  const std::vector<float> x = {std::nanf(""), 1.0f, std::nanf(""), 3.0f};
  std::vector<int64_t> got(3);
  ASSERT_EQ(TopK(x.data(), 4, 3, got.data()), 3);
  EXPECT_EQ(got[0], 3);
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(TopK(x.data(), 4, 0, got.data()), 0);
}

// TopK skips a block of values none of which beats the k-th kept one; NaNs
// in the block must not hide a larger number in the same vector lane.
TEST(VectorMathTest, TopKFindsNumbersAmongNans) {
  std::vector<float> x(256, 0.0f);
  x[0] = 1.0f;
  x[1] = 2.0f;
  for (size_t j = 128; j < x.size(); ++j) x[j] = std::nanf("");
  x[130] = 50.0f;
  x[250] = 100.0f;  // after a NaN in its lane, whether 8 or 16 lanes wide
  x[212] = 75.0f;
  std::vector<int64_t> got(4);
  ASSERT_EQ(TopK(x.data(), static_cast<int64_t>(x.size()), 4, got.data()), 4);
  EXPECT_EQ(got, (std::vector<int64_t>{250, 212, 130, 1}));
}

}  // namespace
}  // namespace attnscope::vmath
