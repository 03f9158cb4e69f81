// The CPU matrix products (service/model/gemm.h) against float64 sums, on
// whichever backend this process chose (ctest also runs this binary with
// ATTNSCOPE_GEMM=blas and =onednn): Sgemm as the attention kernel calls it,
// oneDNN's packed matrices in float32 and bfloat16, their row lookup, NaN,
// threads, the primitive cache's eviction, and that model-shaped products
// take oneDNN's fast kernels where the CPU has AVX-512; and bfloat16
// matrices packed for the project's AVX2 kernel.
#include "service/model/gemm.h"

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // nearest, ties to even
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// Checks got (m x n, ldc) against sum_j a(r, j) b(j, c) in float64, within
// tol * sum_j |a(r, j) b(j, c)| (+ 1e-6): fails on NaN.
template <typename A, typename B>
void ExpectProduct(const float* got, int64_t ldc, int64_t m, int64_t n, int64_t k, A a, B b,
                   const float* bias, double tol, const std::string& what) {
  int failures = 0;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = bias != nullptr ? bias[c] : 0.0, size = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const double p = static_cast<double>(a(r, j)) * static_cast<double>(b(j, c));
        sum += p;
        size += std::fabs(p);
      }
      const double diff = std::fabs(got[r * ldc + c] - sum);
      if (!(diff <= tol * size + 1e-6) && ++failures <= 3) {
        ADD_FAILURE() << what << ": (" << r << ", " << c << ") = " << got[r * ldc + c]
                      << ", float64 sum " << sum << ", |diff| " << diff;
      }
    }
  }
}

TEST(Sgemm, MatchesFloat64SumsOnStridedOperands) {
  for (bool transposed : {false, true}) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                           {7, 5, 3},
                           {128, 130, 64},
                           {33, 1000, 64},
                           {64, 64, 517}}) {
      const int64_t lda = k + 3, ldb = (transposed ? k : n) + 5, ldc = n + 2;
      const std::vector<float> a = Random(m * lda, 1), b = Random((transposed ? n : k) * ldb, 2);
      std::vector<float> c(m * ldc, 7.0f);
      Sgemm(transposed, m, n, k, 0.125f, a.data(), lda, b.data(), ldb, c.data(), ldc);
      ExpectProduct(
          c.data(), ldc, m, n, k, [&](int64_t r, int64_t j) { return 0.125f * a[r * lda + j]; },
          [&](int64_t j, int64_t col) {
            return transposed ? b[col * ldb + j] : b[j * ldb + col];
          },
          nullptr, 1e-5,
          "sgemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
              (transposed ? " B^T" : ""));
      for (int64_t r = 0; r < m; ++r) {  // the padding between rows is left alone
        for (int64_t col = n; col < ldc; ++col) EXPECT_EQ(c[r * ldc + col], 7.0f);
      }
    }
  }
}

struct Matrix {
  int64_t n, k;
  std::vector<float> w;  // (n, k) row-major, or (k, n) when stored transposed
  bool stored_transposed;
  float at(int64_t i, int64_t j) const {
    return stored_transposed ? w[j * n + i] : w[i * k + j];
  }
  std::shared_ptr<const PackedMatrix> Pack(PackedType type) const {
    return stored_transposed ? PackedMatrix::Pack(w.data(), n, k, 1, n, type)
                             : PackedMatrix::Pack(w.data(), n, k, k, 1, type);
  }
};

Matrix MakeMatrix(int64_t n, int64_t k, bool stored_transposed, uint32_t seed) {
  return {n, k, Random(n * k, seed), stored_transposed};
}

TEST(PackedMatrix, Float32ProductsMatchFloat64Sums) {
  for (bool stored_transposed : {false, true}) {  // GPT-2's Conv1D stores (in, out)
    const Matrix w = MakeMatrix(77, 96, stored_transposed, 3);
    const auto packed = w.Pack(PackedType::kFloat32);
    EXPECT_EQ(packed->n(), 77);
    EXPECT_EQ(packed->k(), 96);
    EXPECT_GE(packed->bytes(), 77u * 96u * sizeof(float));
    const std::vector<float> bias = Random(77, 4);
    for (int64_t m : {1, 7, 64, 128, 333}) {
      for (bool with_bias : {false, true}) {
        for (int64_t ldx : {int64_t{96}, int64_t{101}}) {  // dense, and strided rows
          const std::vector<float> x = Random(m * ldx, 5);
          std::vector<float> y(m * 77, -1.0f);
          packed->Multiply(x.data(), m, ldx, with_bias ? bias.data() : nullptr, y.data(), 77);
          ExpectProduct(
              y.data(), 77, m, 77, 96, [&](int64_t r, int64_t j) { return x[r * ldx + j]; },
              [&](int64_t j, int64_t c) { return w.at(c, j); }, with_bias ? bias.data() : nullptr,
              1e-5,
              "float32 m=" + std::to_string(m) + " ldx=" + std::to_string(ldx) +
                  (with_bias ? " +bias" : "") + (stored_transposed ? " (in, out)" : ""));
        }
      }
    }
  }
}

TEST(PackedMatrix, Bfloat16ProductsAreFloat32SumsOfRoundedOperands) {
  const Matrix w = MakeMatrix(130, 200, false, 6);
  const auto packed = w.Pack(PackedType::kBfloat16);
  const auto f32 = w.Pack(PackedType::kFloat32);
  const auto converted = f32->Converted(PackedType::kBfloat16);
  EXPECT_EQ(packed->type(), PackedType::kBfloat16);
  EXPECT_LT(packed->bytes(), f32->bytes());
  const int64_t m = 70, ldx = 203;
  const std::vector<float> x = Random(m * ldx, 7), bias = Random(130, 8);
  std::vector<float> y(m * 130), y_converted(m * 130), y_f32(m * 130);
  packed->Multiply(x.data(), m, ldx, bias.data(), y.data(), 130);
  converted->Multiply(x.data(), m, ldx, bias.data(), y_converted.data(), 130);
  f32->Multiply(x.data(), m, ldx, bias.data(), y_f32.data(), 130);
  // Every product of two bfloat16 values is exact in float32: the sums
  // differ from float64's by float32 rounding only.
  ExpectProduct(
      y.data(), 130, m, 130, 200, [&](int64_t r, int64_t j) { return RoundBf16(x[r * ldx + j]); },
      [&](int64_t j, int64_t c) { return RoundBf16(w.at(c, j)); }, bias.data(), 1e-5, "bf16");
  double max_from_f32 = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], y_converted[i]) << "packed from the float32 packing differs at " << i;
    max_from_f32 = std::max(max_from_f32, std::fabs(static_cast<double>(y[i]) - y_f32[i]));
  }
  EXPECT_GT(max_from_f32, 1e-3) << "bfloat16 products equal float32's: nothing was rounded";
}

TEST(PackedMatrix, EpiloguesApplyTheActivationToTheProduct) {
  const Matrix w = MakeMatrix(50, 64, false, 18);
  const auto packed = w.Pack(PackedType::kFloat32);
  const int64_t m = 9;
  const std::vector<float> x = Random(m * 64, 19), bias = Random(50, 20);
  std::vector<float> plain(m * 50);
  packed->Multiply(x.data(), m, 64, bias.data(), plain.data(), 50);
  const struct {
    Epilogue epilogue;
    const char* name;
    double (*f)(double);
  } cases[] = {
      {Epilogue::kGeluTanh, "gelu tanh",
       [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }},
      {Epilogue::kGeluErf, "gelu erf",
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {Epilogue::kRelu, "relu", [](double v) { return v > 0 ? v : 0.0; }},
      {Epilogue::kSilu, "silu", [](double v) { return v / (1 + std::exp(-v)); }},
  };
  for (const auto& c : cases) {
    std::vector<float> y(m * 50);
    packed->Multiply(x.data(), m, 64, bias.data(), y.data(), 50, c.epilogue);
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double want = c.f(plain[i]);
      const double diff = std::fabs(y[i] - want);
      if (!(diff <= 1e-5 + 1e-5 * std::fabs(want))) {
        ADD_FAILURE() << c.name << " at " << i << ": " << y[i] << ", want " << want;
        break;
      }
      worst = std::max(worst, diff);
    }
    std::printf("%s: max |diff| %.3g\n", c.name, worst);
  }
}

TEST(PackedMatrix, NanInOneRowStaysInThatRow) {
  const Matrix w = MakeMatrix(40, 48, false, 9);
  for (PackedType type : {PackedType::kFloat32, PackedType::kBfloat16}) {
    const auto packed = w.Pack(type);
    std::vector<float> x = Random(5 * 48, 10);
    x[2 * 48 + 17] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(5 * 40);
    packed->Multiply(x.data(), 5, 48, nullptr, y.data(), 40);
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t c = 0; c < 40; ++c) {
        EXPECT_EQ(std::isnan(y[r * 40 + c]), r == 2) << "row " << r << " column " << c;
      }
    }
  }
}

TEST(PackedMatrix, GatherRowsReturnsTheRowsExactly) {
  for (bool stored_transposed : {false, true}) {
    const Matrix w = MakeMatrix(1000, 96, stored_transposed, 11);
    const auto packed = w.Pack(PackedType::kFloat32);
    const std::vector<int64_t> ids = {0, 999, 17, 17, 64, 63, 500};
    std::vector<float> rows(ids.size() * 96, -1.0f);
    packed->GatherRows(ids.data(), static_cast<int64_t>(ids.size()), rows.data());
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t j = 0; j < 96; ++j) {
        ASSERT_EQ(rows[r * 96 + j], w.at(ids[r], j)) << "row " << ids[r] << " column " << j;
      }
    }
    const int64_t bad[] = {1000};
    EXPECT_THROW(packed->GatherRows(bad, 1, rows.data()), std::out_of_range);
  }
  // A bfloat16 matrix gives its rows widened: the rounded values, exactly.
  const Matrix small = MakeMatrix(10, 16, false, 12);
  const auto bf16 = small.Pack(PackedType::kBfloat16);
  const int64_t one[] = {1};
  std::vector<float> row(16);
  bf16->GatherRows(one, 1, row.data());
  for (int64_t j = 0; j < 16; ++j) EXPECT_EQ(row[j], RoundBf16(small.at(1, j))) << j;
}

// A bfloat16 source (a checkpoint's BF16 matrix, possibly transposed) of
// `rows` x `k`, and the same values widened to float32.
struct Bf16Source {
  std::vector<uint16_t> bits;
  Matrix widened;
};
Bf16Source MakeBf16Source(int64_t n, int64_t k, bool stored_transposed, uint32_t seed) {
  Bf16Source s{{}, MakeMatrix(n, k, stored_transposed, seed)};
  s.bits.resize(s.widened.w.size());
  for (size_t i = 0; i < s.bits.size(); ++i) {
    s.widened.w[i] = RoundBf16(s.widened.w[i]);
    uint32_t u;
    std::memcpy(&u, &s.widened.w[i], sizeof u);
    s.bits[i] = static_cast<uint16_t>(u >> 16);
  }
  return s;
}

// A bfloat16 matrix larger than one chunk (a real model's head or MLP) is
// stored once, in chunks of rows; its float32 products widen one chunk at a
// time and equal the products of a float32 packing of the same values (bit
// for bit on AVX-512); its bfloat16 products equal those of the float32
// packing converted.
TEST(PackedMatrix, ChunkedBfloat16StorageComputesExactlyAsFloat32) {
  const int64_t k = 2048;
  const int64_t n = 2 * (PackedMatrix::kChunkFloatBytes / (4 * k)) + 33;  // three chunks
  for (bool stored_transposed : {false, true}) {
    SCOPED_TRACE(stored_transposed ? "stored (k, n)" : "stored (n, k)");
    const Bf16Source source = MakeBf16Source(n, k, stored_transposed, 21);
    const auto stored =
        stored_transposed
            ? PackedMatrix::Pack(source.bits.data(), PackedType::kBfloat16, n, k, 1, n,
                                 PackedType::kBfloat16)
            : PackedMatrix::Pack(source.bits.data(), PackedType::kBfloat16, n, k, k, 1,
                                 PackedType::kBfloat16);
    const auto f32 = source.widened.Pack(PackedType::kFloat32);
    EXPECT_EQ(stored->type(), PackedType::kBfloat16);
    EXPECT_EQ(stored->chunks(), 3);
    EXPECT_EQ(f32->chunks(), 1);
    // Stored once, at two bytes a weight (oneDNN pads each chunk's rows to
    // its block of 64).
    EXPECT_LE(stored->bytes(), static_cast<size_t>((n + 64 * stored->chunks()) * k * 2));
    // oneDNN's AVX-512 kernels sum each output in an order that does not
    // depend on how many columns a product has: the chunked products equal
    // the whole one exactly. Its AVX2 kernels block the sums by the shape, so
    // there they agree to float32 rounding: within 1e-6 of the sum of the
    // terms' magnitudes (the activation's slope is at most 1.1).
    const bool exact_kernels = OneDnnHasAvx512();
    for (int64_t m : {1, 37}) {
      const int64_t ldx = k + 5;
      const std::vector<float> x = Random(m * ldx, 22), bias = Random(n, 23);
      auto same = [&](float a, float b, size_t i) {
        if (exact_kernels) return a == b;
        const int64_t r = static_cast<int64_t>(i) / n, c = static_cast<int64_t>(i) % n;
        double size = std::fabs(bias[c]);
        for (int64_t j = 0; j < k; ++j) size += std::fabs(x[r * ldx + j] * source.widened.at(c, j));
        return std::fabs(static_cast<double>(a) - b) <= 1e-6 * size + 1e-6;
      };
      std::vector<float> wide(m * n, -1), exact(m * n, -2);
      stored->Multiply(x.data(), m, ldx, bias.data(), wide.data(), n, Epilogue::kSilu,
                       Operands::kFloat32);
      f32->Multiply(x.data(), m, ldx, bias.data(), exact.data(), n, Epilogue::kSilu);
      int mismatches = 0;
      for (size_t i = 0; i < wide.size(); ++i) {
        if (!same(wide[i], exact[i], i) && ++mismatches <= 3) {
          ADD_FAILURE() << "m = " << m << ", entry " << i << ": " << wide[i] << " widened, "
                        << exact[i] << " from float32";
        }
      }
      std::vector<float> low(m * n, -1), converted(m * n, -2);
      stored->Multiply(x.data(), m, ldx, bias.data(), low.data(), n);
      f32->Converted(PackedType::kBfloat16)
          ->Multiply(x.data(), m, ldx, bias.data(), converted.data(), n);
      mismatches = 0;
      for (size_t i = 0; i < low.size(); ++i) {
        if (!same(low[i], converted[i], i) && ++mismatches <= 3) {
          ADD_FAILURE() << "m = " << m << ", entry " << i << ": " << low[i] << " stored, "
                        << converted[i] << " converted";
        }
      }
    }
    // Rows from every chunk, widened exactly; and back to one float32 packing.
    const std::vector<int64_t> ids = {0, n - 1, n / 3, n / 2, 2 * n / 3 + 1};
    std::vector<float> rows(ids.size() * k);
    stored->GatherRows(ids.data(), static_cast<int64_t>(ids.size()), rows.data());
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(rows[r * k + j], source.widened.at(ids[r], j)) << "row " << ids[r];
      }
    }
    const auto back = stored->Converted(PackedType::kFloat32);
    EXPECT_EQ(back->chunks(), 1);
    back->GatherRows(ids.data(), static_cast<int64_t>(ids.size()), rows.data());
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(rows[r * k + j], source.widened.at(ids[r], j)) << "row " << ids[r];
      }
    }
  }
}

TEST(PackedMatrix, RefusesAStridedOutput) {
  const auto packed = MakeMatrix(8, 8, false, 13).Pack(PackedType::kFloat32);
  const std::vector<float> x = Random(2 * 8, 14);
  std::vector<float> y(2 * 9);
  EXPECT_THROW(packed->Multiply(x.data(), 2, 8, nullptr, y.data(), 9), std::invalid_argument);
}

TEST(PackedMatrix, ThreadsAtOnceGetTheirOwnProducts) {
  const Matrix w = MakeMatrix(300, 64, false, 15);
  const auto packed = w.Pack(PackedType::kFloat32);
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> xs(kThreads), ys(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const int64_t m = 20 + 31 * t;  // a primitive each, made concurrently
    xs[t] = Random(m * 64, 100 + t);
    ys[t].assign(m * 300, 0.0f);
    threads.emplace_back([&, t, m] {
      for (int round = 0; round < 20; ++round) {
        packed->Multiply(xs[t].data(), m, 64, nullptr, ys[t].data(), 300);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    const int64_t m = 20 + 31 * t;
    ExpectProduct(
        ys[t].data(), 300, m, 300, 64, [&](int64_t r, int64_t j) { return xs[t][r * 64 + j]; },
        [&](int64_t j, int64_t c) { return w.at(c, j); }, nullptr, 1e-5,
        "thread " + std::to_string(t));
  }
}

TEST(PackedMatrix, ManyShapesOutliveThePrimitiveCache) {
  const Matrix w = MakeMatrix(24, 16, false, 16);
  const auto packed = w.Pack(PackedType::kFloat32);
  for (int64_t m = 1; m <= 130; ++m) {  // more shapes than the cache keeps
    const std::vector<float> x = Random(m * 16, static_cast<uint32_t>(m));
    std::vector<float> y(m * 24);
    packed->Multiply(x.data(), m, 16, nullptr, y.data(), 24);
    ExpectProduct(
        y.data(), 24, m, 24, 16, [&](int64_t r, int64_t j) { return x[r * 16 + j]; },
        [&](int64_t j, int64_t c) { return w.at(c, j); }, nullptr, 1e-5,
        "m=" + std::to_string(m));
  }
}

// Where oneDNN multiplies on an AVX-512 CPU, every product shape of a
// forward pass must take its brgemm kernels: its reference kernel is
// ~100x slower (a strided input took it once, in a gated MLP).
// (Without AVX-512, where auto multiplies through the BLAS, the names are
// printed and must only exist.)
TEST(PackedMatrix, ModelShapesTakeTheFastKernels) {
  const bool avx512 = OneDnnHasAvx512();
  // (n, k): GPT-2's q|k|v, output, MLP up and down, a gated MLP's down
  // projection, a head.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2304, 768},
                      {768, 768},
                      {3072, 768},
                      {768, 3072},
                      {512, 1024},
                      {2048, 512}}) {
    for (PackedType type : {PackedType::kFloat32, PackedType::kBfloat16}) {
      const auto packed = MakeMatrix(n, k, false, 17).Pack(type);
      for (int64_t m : {1, 64, 128, 1000}) {
        const std::string impl = packed->Implementation(m);
        if (avx512) {
          EXPECT_EQ(impl.rfind("brg", 0), 0u)
              << "n=" << n << " k=" << k << " m=" << m << " type=" << static_cast<int>(type)
              << ": " << impl;
        } else {
          EXPECT_FALSE(impl.empty());
          std::printf("n=%ld k=%ld m=%ld type=%d: %s\n", static_cast<long>(n),
                      static_cast<long>(k), static_cast<long>(m), static_cast<int>(type),
                      impl.c_str());
        }
      }
    }
  }
}

// A bfloat16 matrix packed for the AVX2 kernel (what a BF16 checkpoint's
// matrices become on CPUs without AVX-512): float32 products on its values,
// bfloat16 ones on x rounded too, bias, strided x, its rows exactly, and
// what it refuses (an activation to fuse, conversion, a row outside it).
TEST(PackedMatrix, PanelsForTheAvx2KernelMultiplyAndGatherTheirBfloat16Values) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const int64_t n = 133, k = 200, ldw = 203;
  const std::vector<float> source = Random(n * ldw, 21);
  std::vector<uint16_t> bits(source.size());
  std::vector<float> w(source.size());  // the bfloat16 values, widened
  for (size_t i = 0; i < bits.size(); ++i) {
    w[i] = RoundBf16(source[i]);
    uint32_t u;
    std::memcpy(&u, &w[i], sizeof u);
    bits[i] = static_cast<uint16_t>(u >> 16);
  }
  auto memory = std::make_shared<std::vector<uint64_t>>(
      static_cast<size_t>(PackedMatrix::PanelBytes(n, k)) / sizeof(uint64_t) + 4);
  const auto at = reinterpret_cast<uintptr_t>(memory->data());
  void* out = reinterpret_cast<char*>(memory->data()) + (32 - at % 32) % 32;
  const auto packed = PackedMatrix::PackPanels(bits.data(), n, k, ldw, out, memory);
  EXPECT_EQ(packed->n(), n);
  EXPECT_EQ(packed->k(), k);
  EXPECT_EQ(packed->type(), PackedType::kBfloat16);
  EXPECT_FALSE(packed->FusesEpilogue());
  EXPECT_GE(packed->bytes(), static_cast<size_t>(n * k) * sizeof(uint16_t));
  EXPECT_LT(packed->bytes(), static_cast<size_t>(n + 16) * k * sizeof(uint16_t));
  EXPECT_EQ(packed->Implementation(64), "panel:avx2_bf16");
  const std::vector<float> bias = Random(n, 22);
  for (int64_t m : {1, 7, 64, 333}) {
    for (int64_t ldx : {k, k + 5}) {
      const std::vector<float> x = Random(m * ldx, 23 + static_cast<uint32_t>(m));
      std::vector<float> y(m * n, -1.0f), y16(m * n, -1.0f);
      packed->Multiply(x.data(), m, ldx, bias.data(), y.data(), n, Epilogue::kNone,
                       Operands::kFloat32);
      packed->Multiply(x.data(), m, ldx, nullptr, y16.data(), n, Epilogue::kNone,
                       Operands::kStored);
      const std::string what = "m=" + std::to_string(m) + " ldx=" + std::to_string(ldx);
      ExpectProduct(
          y.data(), n, m, n, k, [&](int64_t r, int64_t j) { return x[r * ldx + j]; },
          [&](int64_t j, int64_t c) { return w[c * ldw + j]; }, bias.data(), 1e-5,
          "float32 operands " + what);
      ExpectProduct(
          y16.data(), n, m, n, k, [&](int64_t r, int64_t j) { return RoundBf16(x[r * ldx + j]); },
          [&](int64_t j, int64_t c) { return w[c * ldw + j]; }, nullptr, 1e-5,
          "stored (bfloat16) operands " + what);
    }
  }
  const std::vector<int64_t> ids = {0, n - 1, 17, 17, 15, 16};
  std::vector<float> rows(ids.size() * k, -1.0f);
  packed->GatherRows(ids.data(), static_cast<int64_t>(ids.size()), rows.data());
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(rows[r * k + j], w[ids[r] * ldw + j]) << "row " << ids[r] << " column " << j;
    }
  }
  const int64_t bad[] = {n};
  EXPECT_THROW(packed->GatherRows(bad, 1, rows.data()), std::out_of_range);
  std::vector<float> x(k, 1.0f), y(n);
  EXPECT_THROW(packed->Multiply(x.data(), 1, k, nullptr, y.data(), n, Epilogue::kSilu),
               std::invalid_argument);
  EXPECT_THROW(packed->Converted(PackedType::kFloat32), std::invalid_argument);
}

TEST(Gemm, DescriptionNamesTheBackend) {
  const std::string d = GemmDescription();
  if (ChosenGemmBackend() == GemmBackend::kOneDnn) {
    EXPECT_EQ(d.rfind("oneDNN ", 0), 0u) << d;
  } else if (PanelProducts()) {
    EXPECT_EQ(d.rfind("own kernel (", 0), 0u) << d;
  } else {
    EXPECT_EQ(d.rfind("BLAS", 0), 0u) << d;
  }
}

}  // namespace
}  // namespace attnscope::model
