// The matrix products of a real model shape, one by one: each product of a
// Qwen2.5-0.5B- or Llama-3.2-1B-shaped layer and the vocabulary head at T
// rows, on bfloat16 weights as a checkpoint stores them, through the
// forward pass's own WidenedLinear (the project's kernel, widening while it
// packs, where gemm.h's PanelProducts(); else widened chunks through BLAS),
// beside BLAS's product on the same values as float32 weights (at::linear),
// and the FLOP rate of each against the machine's float32 FMA peak.
//
// Usage: linear_bench [--tokens 512] [--threads 2] [--model qwen|llama]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/sgemm_floor.h"
#include "service/model/decoder_weights.h"
#include "service/model/gemm.h"
#include "service/model/language_model.h"

namespace {

struct Shape {
  const char* what;
  int64_t n, k;
  int64_t count;  // per forward pass
};

template <typename Op>
double Best(Op op) {
  op();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 512;
  int threads = 2;
  std::string model = "qwen";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
  }
  std::string isa;
  const double peak = attnscope::bench::MeasureFmaPeak(threads, &isa);
  attnscope::model::SetComputeThreads(threads);
  const std::vector<Shape> shapes = model == "llama" ? std::vector<Shape>{{"q", 2048, 2048, 16},         {"k|v", 2 * 512, 2048, 16},
              {"o", 2048, 2048, 16},         {"gate|up", 2 * 8192, 2048, 16},
              {"down", 2048, 8192, 16},      {"head", 128256, 2048, 1}}
                                                      : std::vector<Shape>{{"q|k|v", 896 + 2 * 128, 896, 24}, {"o", 896, 896, 24},
              {"gate|up", 2 * 4864, 896, 24},    {"down", 896, 4864, 24},
              {"head", 151936, 896, 1}};
  std::printf("linear_bench %s, T = %ld, %d threads on %s; %s; FMA peak %.0f GFLOP/s (%s)\n",
              model.c_str(), static_cast<long>(tokens), threads,
              attnscope::bench::CpuName().c_str(), attnscope::model::GemmDescription().c_str(),
              peak, isa.c_str());
  std::printf("%-8s %7s %6s | %9s %7s | %9s %7s | %s\n", "product", "n", "k", "bf16 ms",
              "%peak", "BLAS f32", "%peak", "bf16/BLAS");
  double total16 = 0, total32 = 0, flop_total = 0;
  for (const Shape& s : shapes) {
    const at::Tensor a = at::randn({tokens, s.k});
    const at::Tensor w32 = at::randn({s.n, s.k}) * 0.02;
    const at::Tensor w16 = w32.to(at::kBFloat16);
    const at::Tensor w16f = w16.to(at::kFloat);
    const double t16 = Best([&] { attnscope::model::WidenedLinear(a, w16, {}); });
    const double t32 = Best([&] { at::linear(a, w16f); });
    const double flop = 2.0 * tokens * s.n * s.k;
    total16 += t16 * s.count;
    total32 += t32 * s.count;
    flop_total += flop * s.count;
    std::printf("%-8s %7ld %6ld | %9.2f %6.0f%% | %9.2f %6.0f%% | %.3f\n", s.what,
                static_cast<long>(s.n), static_cast<long>(s.k), t16 * 1e3,
                100 * flop / t16 / 1e9 / peak, t32 * 1e3, 100 * flop / t32 / 1e9 / peak, t16 / t32);
  }
  std::printf("one pass's products: bf16 %.2f s (%.0f%% of peak), BLAS f32 %.2f s (%.0f%%); bound %.2f s\n",
              total16, 100 * flop_total / total16 / 1e9 / peak, total32,
              100 * flop_total / total32 / 1e9 / peak, flop_total / peak / 1e9);
  return 0;
}
