// A parallel loop for torch-free code (the statistics), run on whatever
// thread pool the process installed: the model library installs libtorch's
// intra-op pool (the threads of --threads) when it loads a model, so the
// statistics of a block use the same cores as the forward pass that made it.
// Without an installed pool, or inside another parallel region, the loop runs
// on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace attnscope::core {

// fn(begin, end) over disjoint chunks covering [0, n), each at least `grain`
// long (but the last); returns when all have run. fn must be safe to run
// concurrently on disjoint chunks.
using ChunkFn = std::function<void(int64_t begin, int64_t end)>;
using ParallelForImpl = void (*)(int64_t n, int64_t grain, const ChunkFn& fn);

void ParallelFor(int64_t n, int64_t grain, const ChunkFn& fn);

// Installs the pool's loop (nullptr: the calling thread only). Meant to be
// called once, before any ParallelFor that should use it.
void SetParallelForImpl(ParallelForImpl impl);
ParallelForImpl CurrentParallelForImpl();

}  // namespace attnscope::core
