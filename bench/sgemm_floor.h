// The FLOP floor of a GPT-2-shaped forward pass on this machine: the best
// float32 matrix-product rate reached on the model's own products, by
// libtorch's BLAS or, where the model multiplies through oneDNN (AVX-512
// CPUs), by oneDNN's packed matmul and sgemm, whichever is faster.
#pragma once

#include <cstdint>
#include <string>

namespace attnscope::bench {

struct ModelShape {
  int64_t layers = 0, heads = 0, width = 0, inner = 0, vocab = 0;
};

struct FloorResult {
  bool ok = false;
  double model_gflop = 0;       // every matrix product of one forward pass (dense attention)
  double best_gflops = 0;       // the best rate over the model's product shapes
  std::string best_shape;       // where it was reached, e.g. "1024x768 . 768x3072"
  double floor_seconds = 0;     // model_gflop / best_gflops
  double by_shape_seconds = 0;  // sum over the products of their own best time
  // The machine's float32 FMA peak with the same threads: independent
  // vector FMA chains from registers (no memory traffic), the rate no
  // matrix product can beat; 0 when the CPU has neither AVX-512 nor AVX2.
  double peak_gflops = 0;
  std::string peak_isa;  // "AVX-512" or "AVX2"
};

// Times each product of the model at T = `tokens` (q|k|v, output, MLP up and
// down, the head, per-head scores and weighted sums) with `threads` threads,
// best of several runs, and the FMA peak, in a forked child (so the caller's process never
// starts OpenMP before it forks others).
FloorResult MeasureSgemmFloor(const ModelShape& shape, int64_t tokens, int threads);

// The float32 FMA peak alone (GFLOP/s with `threads` threads; `isa` names
// the vector width), 0 when the CPU has neither AVX-512 nor AVX2.
double MeasureFmaPeak(int threads, std::string* isa);

}  // namespace attnscope::bench
