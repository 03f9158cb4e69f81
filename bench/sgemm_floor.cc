#include "bench/sgemm_floor.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "service/model/gemm.h"

namespace attnscope::bench {
namespace {

struct Product {
  const char* what;
  int64_t batch, m, k, n;  // batch x (m x k . k x n)
  int64_t count;           // how many times one forward pass does it
  bool b_transposed;       // b stored (n, k), as the head's (V, E) matrix
};

// Best seconds of `op` over runs totalling at least ~0.3 s (at least 3).
template <typename Op>
double BestSeconds(Op op) {
  op();  // warm-up: BLAS buffers, page faults
  double best = 1e30, total = 0;
  for (int i = 0; i < 3 || (total < 0.3 && i < 50); ++i) {
    const auto start = std::chrono::steady_clock::now();
    op();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

// The product's best time over the ways this machine can multiply it:
// libtorch's BLAS (mm / bmm), and where oneDNN is the chosen backend also
// oneDNN's matmul on packed weights (the projections and the head, as the
// model runs them) and oneDNN's sgemm per head, the heads split over the
// threads or one after the other on all of them (scores, weighted sums).
double TimeProduct(const Product& p, std::string* library) {
  const at::Tensor a = at::randn({p.batch, p.m, p.k});
  const at::Tensor b = p.b_transposed ? at::randn({p.batch, p.n, p.k}).transpose(1, 2)
                                      : at::randn({p.batch, p.k, p.n});
  at::Tensor out = at::empty({p.batch, p.m, p.n});
  double best;
  if (p.batch == 1) {
    at::Tensor o = out[0];
    best = BestSeconds([&] { at::mm_out(o, a[0], b[0]); });
  } else {
    best = BestSeconds([&] { at::bmm_out(out, a, b); });
  }
  *library = "BLAS";
  if (model::ChosenGemmBackend() != model::GemmBackend::kOneDnn) return best;
  auto keep = [&](double s, const char* what) {
    if (s < best) {
      best = s;
      *library = what;
    }
  };
  const float* ap = a.data_ptr<float>();
  float* op = out.data_ptr<float>();
  if (p.batch == 1) {  // a weight: (k, n) here, (n, k) as the model holds it
    const at::Tensor w = b[0].t().contiguous();  // (n, k)
    const auto packed = model::PackedMatrix::Pack(w.data_ptr<float>(), p.n, p.k, p.k, 1,
                                                  model::PackedType::kFloat32);
    keep(BestSeconds([&] { packed->Multiply(ap, p.m, p.k, nullptr, op, p.n); }),
         "oneDNN packed");
    return best;
  }
  const at::Tensor bc = p.b_transposed ? b.transpose(1, 2).contiguous() : b.contiguous();
  const float* bp = bc.data_ptr<float>();
  const int64_t ldb = p.b_transposed ? p.k : p.n;
  auto head = [&](int64_t h) {
    model::Sgemm(p.b_transposed, p.m, p.n, p.k, 1.0f, ap + h * p.m * p.k, p.k,
                 bp + h * p.k * p.n, ldb, op + h * p.m * p.n, p.n);
  };
  keep(BestSeconds([&] {
         at::parallel_for(0, p.batch, 1, [&](int64_t begin, int64_t end) {
           for (int64_t h = begin; h < end; ++h) head(h);
         });
       }),
       "oneDNN sgemm, heads in parallel");
  keep(BestSeconds([&] {
         for (int64_t h = 0; h < p.batch; ++h) head(h);
       }),
       "oneDNN sgemm");
  return best;
}

// kChains independent FMA chains of N floats, `iterations` times: enough
// chains to cover the FMA latency on every port, operands in registers.
// Returns a value so that nothing is optimised away. Inlined into the
// wrappers below, whose target makes a * b + c one vfmadd of N lanes.
constexpr int kChains = 12;

template <int N>
struct Floats {
  typedef float V __attribute__((vector_size(N * 4)));
};

template <int N>
[[gnu::always_inline]] inline float FmaChains(int64_t iterations) {
  using V = typename Floats<N>::V;
  V acc[kChains];
  const V b = V{} + 0.999999f, c = V{} + 1e-7f;
  for (int i = 0; i < kChains; ++i) acc[i] = V{} + static_cast<float>(i);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * b + c;
  }
  V sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum += acc[i];
  return sum[0];
}

__attribute__((target("avx512f,fma"))) float FmaChains512(int64_t iterations) {
  return FmaChains<16>(iterations);
}

__attribute__((target("avx2,fma"))) float FmaChains256(int64_t iterations) {
  return FmaChains<8>(iterations);
}

// The FMA peak in GFLOP/s with `threads` threads: this thread and
// threads - 1 helpers run their chains together, 40 times (~5 ms each, short
// runs as the products' best times are, so that both see this noisy machine
// at its best); the best run's total rate. The helpers are started once and
// spin between runs; each run is timed from its start signal to the last
// thread's finish.
double FmaPeak(int threads, std::string* isa) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
  *isa = avx512 ? "AVX-512" : "AVX2";
  const int lanes = avx512 ? 16 : 8;
  const int64_t iterations = avx512 ? 3'000'000 : 6'000'000;
  const auto chains = [&] { return avx512 ? FmaChains512(iterations) : FmaChains256(iterations); };
  constexpr int kRuns = 40;
  std::atomic<int> run{-1}, finished{0};
  std::atomic<float> sink{0};
  std::vector<std::thread> helpers;
  for (int i = 1; i < threads; ++i) {
    helpers.emplace_back([&] {
      for (int r = 0; r < kRuns; ++r) {
        while (run.load(std::memory_order_acquire) < r) {
        }
        sink.store(chains(), std::memory_order_relaxed);
        finished.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
  const double flop = 2.0 * lanes * kChains * static_cast<double>(iterations) * threads;
  double best = 0;
  for (int r = 0; r < kRuns; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run.store(r, std::memory_order_release);
    sink.store(chains(), std::memory_order_relaxed);
    while (finished.load(std::memory_order_acquire) < (r + 1) * (threads - 1)) {
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, flop / seconds / 1e9);
  }
  for (std::thread& helper : helpers) helper.join();
  if (sink.load() == 1.2345f) std::printf(" ");  // keeps the chains' results live
  return best;
}

FloorResult Measure(const ModelShape& s, int64_t t) {
  const int64_t d = s.width, head_dim = s.width / s.heads;
  const std::vector<Product> products = {
      {"q|k|v", 1, t, d, 3 * d, s.layers, false},
      {"attention output", 1, t, d, d, s.layers, false},
      {"MLP up", 1, t, d, s.inner, s.layers, false},
      {"MLP down", 1, t, s.inner, d, s.layers, false},
      {"head", 1, t, d, s.vocab, 1, true},
      {"scores", s.heads, t, head_dim, t, s.layers, false},
      {"weighted sum", s.heads, t, t, head_dim, s.layers, false},
  };
  FloorResult r;
  for (const Product& p : products) {
    const double flop = 2.0 * static_cast<double>(p.batch * p.m * p.k * p.n);
    std::string library;
    const double seconds = TimeProduct(p, &library);
    const double gflops = flop / seconds / 1e9;
    r.model_gflop += flop * static_cast<double>(p.count) / 1e9;
    r.by_shape_seconds += seconds * static_cast<double>(p.count);
    if (gflops > r.best_gflops) {
      r.best_gflops = gflops;
      char shape[160];
      std::snprintf(shape, sizeof shape, "%s %ldx%ld . %ldx%ld (%s)", p.what,
                    static_cast<long>(p.m), static_cast<long>(p.k), static_cast<long>(p.k),
                    static_cast<long>(p.n), library.c_str());
      r.best_shape = shape;
    }
  }
  r.floor_seconds = r.model_gflop / r.best_gflops;
  r.ok = true;
  return r;
}

// Plain bytes to cross the pipe.
struct Wire {
  bool ok;
  double model_gflop, best_gflops, floor_seconds, by_shape_seconds, peak_gflops;
  char best_shape[160];
  char peak_isa[16];
};

}  // namespace

FloorResult MeasureSgemmFloor(const ModelShape& shape, int64_t tokens, int threads) {
  int fds[2];
  FloorResult result;
  if (pipe(fds) != 0) return result;
  if (fork() == 0) {
    close(fds[0]);
    at::set_num_threads(threads);
    const FloorResult r = Measure(shape, tokens);
    std::string isa;
    const double peak = FmaPeak(threads, &isa);
    Wire w{r.ok, r.model_gflop, r.best_gflops, r.floor_seconds, r.by_shape_seconds, peak, {}, {}};
    std::snprintf(w.best_shape, sizeof w.best_shape, "%s", r.best_shape.c_str());
    std::snprintf(w.peak_isa, sizeof w.peak_isa, "%s", isa.c_str());
    const ssize_t n = write(fds[1], &w, sizeof w);
    _exit(n == static_cast<ssize_t>(sizeof w) ? 0 : 1);
  }
  close(fds[1]);
  Wire w{};
  if (read(fds[0], &w, sizeof w) == static_cast<ssize_t>(sizeof w)) {
    result.ok = w.ok;
    result.model_gflop = w.model_gflop;
    result.best_gflops = w.best_gflops;
    result.floor_seconds = w.floor_seconds;
    result.by_shape_seconds = w.by_shape_seconds;
    result.best_shape = w.best_shape;
    result.peak_gflops = w.peak_gflops;
    result.peak_isa = w.peak_isa;
  }
  close(fds[0]);
  wait(nullptr);
  return result;
}

double MeasureFmaPeak(int threads, std::string* isa) { return FmaPeak(threads, isa); }

}  // namespace attnscope::bench
