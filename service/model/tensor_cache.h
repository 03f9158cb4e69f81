// Internal to the model library: libtorch's CPU allocator replaced by one
// that keeps the large buffers of finished tensors and hands them to the
// next tensors of about the same size.
//
// Why: a forward pass allocates and frees the same dozen activation sizes
// (q|k|v, MLP, residual, logit blocks: 3-13 MB each for GPT-2 at T = 1024)
// on every layer. glibc serves them from its heap once its mmap threshold
// has risen past them, and keeps the freed ones resident: the resident
// memory grows to several times the live heap, and from one pass to the
// next. With a fixed mmap threshold the memory goes back, but every buffer
// is then fresh pages faulted in and zeroed, which slows the pass. Here a
// freed large buffer waits in a free list and the next allocation that fits
// takes it: no growth across passes and no page faults once the sizes have
// been seen (the measurements: docs/performance-history.md, "Measurements
// behind choices in the code").
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace attnscope::model {

struct TensorCacheStats {
  int64_t live_blocks = 0;  // large buffers held by tensors
  int64_t live_bytes = 0;
  int64_t peak_live_bytes = 0;  // since construction or ResetPeak
  int64_t free_blocks = 0;  // large buffers waiting for a tensor
  int64_t free_bytes = 0;
  int64_t hits = 0;      // large allocations served from the free list
  int64_t misses = 0;    // large allocations that mapped fresh memory
  int64_t released = 0;  // free buffers given back to the system (over the limit)
};

// A c10::Allocator for CPU tensors.
//   - n < kMinCachedBytes: malloc'd (posix_memalign), freed at once, as
//     libtorch's default allocator does;
//   - larger: whole pages from mmap. A freed buffer goes to the free list; an
//     allocation takes the smallest free buffer of capacity n .. 1.25 n, and
//     maps a new one only when none fits. When the free list holds more than
//     `max_free_bytes`, the buffers freed longest ago are unmapped.
// Thread-safe. Data is 64-byte aligned (c10's alignment). Under
// AddressSanitizer a buffer in the free list, and the slack past the bytes a
// tensor asked for, are poisoned: a use after free or an overrun into the
// slack is reported as for malloc'd memory.
class TensorCache final : public c10::Allocator {
 public:
  static constexpr size_t kMinCachedBytes = size_t{256} << 10;
  static constexpr size_t kDefaultMaxFreeBytes = size_t{256} << 20;

  explicit TensorCache(size_t max_free_bytes = kDefaultMaxFreeBytes);
  // Unmaps the free list. Every tensor of this cache must be gone first (its
  // deleter returns its buffer here); the installed cache is never destroyed.
  ~TensorCache() override;
  TensorCache(const TensorCache&) = delete;
  TensorCache& operator=(const TensorCache&) = delete;

  c10::DataPtr allocate(size_t n) const override;
  c10::DeleterFnPtr raw_deleter() const override;

  // Unmaps every free buffer (e.g. the temporaries of loading a checkpoint).
  void Trim() const;
  TensorCacheStats Stats() const;
  void ResetPeak() const;
  size_t max_free_bytes() const { return max_free_bytes_; }

 private:
  struct Block;
  void* TakeLarge(size_t n) const;
  void GiveBack(Block* block) const;
  void CountLive(size_t capacity) const;
  void ReleaseDownTo(size_t limit) const;  // unmaps the oldest free buffers
  static void Delete(void* data);

  const size_t max_free_bytes_;
  mutable std::mutex mu_;
  mutable std::multimap<size_t, Block*> free_;  // by capacity
  mutable TensorCacheStats stats_;
  mutable uint64_t clock_ = 0;  // orders frees, for releasing the oldest
};

// Makes a TensorCache libtorch's CPU allocator, once per process (later calls
// return the same answer). The environment variable
// ATTNSCOPE_TENSOR_CACHE_MIB sets the free list's limit in MiB (default 256);
// 0 keeps libtorch's default allocator. Returns the installed cache, or
// nullptr when it is off. Tensors allocated before the call keep their own
// deleter, so installing late is safe.
const TensorCache* InstallTensorCache();

}  // namespace attnscope::model
