// The matrix products of a real model shape, one by one: each product of a
// Qwen2.5-0.5B- or Llama-3.2-1B-shaped layer and the vocabulary head at T
// rows, on bfloat16 weights as a checkpoint stores them, through the
// forward pass's own WidenedLinear (the project's kernel, widening while it
// packs, where gemm.h's PanelProducts(); else widened chunks through BLAS),
// beside BLAS's product on the same values as float32 weights (at::linear),
// and the FLOP rate of each against the machine's float32 FMA peak; then
// the head as the forward runs it on the project's kernel (BF16 panels laid
// out once, multiplied per block of logit rows, as DecoderModel's
// PublishLogits does, into one reused block).
// With --attention, instead: attention's two products for one head (scores
// and the weighted sum of the values, causal, over every block of query
// rows of the automatic size) on one thread, as each head runs inside the
// forward's parallel region: the project's kernel on keys and values packed
// once (where PanelGemmAvailable()) beside BLAS per block (at::matmul),
// against one thread's FMA peak.
//
// Usage: linear_bench [--tokens 512] [--threads 2] [--model qwen|llama] [--attention]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/sgemm_floor.h"
#include "service/model/attention_blocks.h"
#include "service/model/decoder_model.h"
#include "service/model/decoder_weights.h"
#include "service/model/gemm.h"
#include "service/model/language_model.h"
#include "service/model/panel_gemm.h"

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

// One head's attention products over a T-token prompt in causal blocks of
// query rows; prints the kernel's and BLAS's times.
int RunAttention(int64_t tokens, int64_t heads, int64_t d) {
  namespace m = attnscope::model;
  std::string isa;
  const double peak = attnscope::bench::MeasureFmaPeak(1, &isa);
  at::set_num_threads(1);
  const int64_t block = m::QueryBlockRows(0, heads, tokens, tokens);
  const at::Tensor q = at::randn({tokens, d}), k = at::randn({tokens, d}), v = at::randn({tokens, d});
  const at::Tensor probs = at::rand({block, tokens});
  at::Tensor out = at::empty({tokens, d});
  double flop = 0;
  for (int64_t begin = 0; begin < tokens; begin += block) {
    flop += 2.0 * 2.0 * std::min(block, tokens - begin) * d * std::min(tokens, begin + block);
  }
  std::printf("linear_bench --attention: one head, T = %ld, d = %ld, blocks of %ld query rows "
              "(%ld heads), 1 thread on %s; FMA peak %.0f GFLOP/s (%s)\n",
              static_cast<long>(tokens), static_cast<long>(d), static_cast<long>(block),
              static_cast<long>(heads), attnscope::bench::CpuName().c_str(), peak, isa.c_str());
  const auto report = [&](const char* what, double seconds) {
    std::printf("%-34s %9.2f ms %6.0f%% of peak\n", what, seconds * 1e3,
                100 * flop / seconds / 1e9 / peak);
    return seconds;
  };
  const double blas = report("BLAS per block (at::matmul)", Best([&] {
    for (int64_t begin = 0; begin < tokens; begin += block) {
      const int64_t rows = std::min(block, tokens - begin), keys = std::min(tokens, begin + block);
      at::Tensor s = at::matmul(q.narrow(0, begin, rows), k.narrow(0, 0, keys).t());
      out.narrow(0, begin, rows).copy_(at::matmul(probs.narrow(0, 0, rows).narrow(1, 0, keys), v.narrow(0, 0, keys)));
    }
  }));
  if (!m::PanelGemmAvailable()) {
    std::printf("the project's kernel: this CPU has no AVX2 and FMA\n");
    return 0;
  }
  const at::Tensor kp = at::empty({m::PanelFloats(tokens, d)}), vp = at::empty({m::PanelFloats(d, tokens)});
  at::Tensor scores = at::empty({block, tokens});
  const double own = report("own kernel, keys and values packed", Best([&] {
    m::PackKeyPanels(k.data_ptr<float>(), d, tokens, d, kp.data_ptr<float>());
    m::PackValuePanels(v.data_ptr<float>(), d, tokens, d, vp.data_ptr<float>());
    for (int64_t begin = 0; begin < tokens; begin += block) {
      const int64_t rows = std::min(block, tokens - begin), keys = std::min(tokens, begin + block);
      m::PanelScores(q.data_ptr<float>() + begin * d, rows, d, kp.data_ptr<float>(), d, 0, keys,
                     1.0f, scores.data_ptr<float>(), tokens);
      m::PanelWeightedValues(probs.data_ptr<float>(), rows, tokens, vp.data_ptr<float>(), tokens,
                             d, 0, keys, out.data_ptr<float>() + begin * d, d);
    }
  }));
  std::printf("own / BLAS %.3f\n", own / blas);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 512;
  int threads = 2;
  std::string model = "qwen";
  bool attention = false;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--attention")) attention = true;
    else if (has_value && !std::strcmp(argv[i], "--tokens")) tokens = std::stoll(argv[++i]);
    else if (has_value && !std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[++i]);
    else if (has_value && !std::strcmp(argv[i], "--model")) model = argv[++i];
  }
  if (attention) return model == "llama" ? RunAttention(tokens, 32, 64) : RunAttention(tokens, 14, 64);
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
  // The head as the forward multiplies a BF16 checkpoint's head with the
  // project's kernel: laid out once as panels (PackBf16Panels), then
  // multiplied once per block of logit rows (LogitRowsPerBlock) into one
  // reused block.
  if (attnscope::model::PanelProducts()) {
    namespace m = attnscope::model;
    const Shape& head = shapes.back();
    const int64_t block = std::min<int64_t>(m::LogitRowsPerBlock(head.n), tokens);
    const at::Tensor a = at::randn({tokens, head.k});
    const at::Tensor w16 = (at::randn({head.n, head.k}) * 0.02).to(at::kBFloat16);
    std::vector<uint16_t> panels(static_cast<size_t>(m::Bf16PanelElements(head.n, head.k)) + 16);
    uint16_t* aligned = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(panels.data()) + 31) / 32 * 32);
    m::PackBf16Panels(static_cast<const uint16_t*>(w16.data_ptr()), head.k, head.n, head.k, aligned);
    at::Tensor y = at::empty({block, head.n});
    const double t = Best([&] {
      for (int64_t begin = 0; begin < tokens; begin += block) {
        m::PanelGemm(a.data_ptr<float>() + begin * head.k, std::min(block, tokens - begin), head.k,
                     aligned, m::PanelWeights::kBfloat16Panels, head.n, head.k, 0,
                     y.data_ptr<float>(), head.n);
      }
    });
    const double flop = 2.0 * tokens * head.n * head.k;
    std::printf("head as the forward runs it (BF16 panels, blocks of %ld rows): %.2f ms, %.0f%% of peak\n",
                static_cast<long>(block), t * 1e3, 100 * flop / t / 1e9 / peak);
  }
  return 0;
}
