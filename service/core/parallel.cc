#include "service/core/parallel.h"

#include <atomic>

namespace attnscope::core {
namespace {

std::atomic<ParallelForImpl> installed{nullptr};

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const ChunkFn& fn) {
  if (n <= 0) return;
  const ParallelForImpl impl = installed.load(std::memory_order_acquire);
  if (impl == nullptr || n <= grain) return fn(0, n);
  impl(n, grain < 1 ? 1 : grain, fn);
}

void SetParallelForImpl(ParallelForImpl impl) { installed.store(impl, std::memory_order_release); }

ParallelForImpl CurrentParallelForImpl() { return installed.load(std::memory_order_acquire); }

}  // namespace attnscope::core
