#include "service/model/tensor_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ATTNSCOPE_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ATTNSCOPE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ATTNSCOPE_POISON(p, n) ((void)(p), (void)(n))
#define ATTNSCOPE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace attnscope::model {
namespace {

// Every buffer starts with its Block; the tensor's data follows it, 64-byte
// aligned (c10::gAlignment).
constexpr size_t kHeaderBytes = 64;
constexpr size_t kPageBytes = 4096;
constexpr uint32_t kMagic = 0x61747463;  // "attc"
enum Kind : uint32_t { kSmall = 1, kLarge = 2 };

size_t RoundUpToPages(size_t n) { return (n + kPageBytes - 1) / kPageBytes * kPageBytes; }

}  // namespace

struct TensorCache::Block {
  const TensorCache* owner;  // nullptr for a small (malloc'd) buffer
  size_t capacity;           // bytes after the header
  uint64_t freed_at;
  uint32_t magic;
  uint32_t kind;
  char* data() { return reinterpret_cast<char*>(this) + kHeaderBytes; }
  static Block* Of(void* data) {
    return reinterpret_cast<Block*>(static_cast<char*>(data) - kHeaderBytes);
  }
};
TensorCache::TensorCache(size_t max_free_bytes) : max_free_bytes_(max_free_bytes) {
  static_assert(sizeof(Block) <= kHeaderBytes, "the header must fit before the data");
}

TensorCache::~TensorCache() { Trim(); }

c10::DataPtr TensorCache::allocate(size_t n) const {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (n == 0) return {nullptr, nullptr, &TensorCache::Delete, cpu};
  void* data = nullptr;
  if (n < kMinCachedBytes) {
    void* base = nullptr;
    TORCH_CHECK(posix_memalign(&base, kHeaderBytes, n + kHeaderBytes) == 0,
                "attnscope: out of memory allocating ", n, " bytes for a tensor");
    auto* block = static_cast<Block*>(base);
    *block = Block{nullptr, n, 0, kMagic, kSmall};
    data = block->data();
  } else {
    data = TakeLarge(n);
  }
  return {data, data, &TensorCache::Delete, cpu};
}

c10::DeleterFnPtr TensorCache::raw_deleter() const { return &TensorCache::Delete; }

void* TensorCache::TakeLarge(size_t n) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(n);
    if (it != free_.end() && it->first <= n + n / 4) {
      Block* block = it->second;
      free_.erase(it);
      stats_.free_blocks -= 1;
      stats_.free_bytes -= static_cast<int64_t>(block->capacity);
      stats_.hits += 1;
      CountLive(block->capacity);
      ATTNSCOPE_UNPOISON(block->data(), n);
      return block->data();
    }
  }
  // Mapped outside the lock: fresh pages, faulted in as the tensor is written.
  const size_t mapped = RoundUpToPages(n + kHeaderBytes);
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(base != MAP_FAILED, "attnscope: out of memory mapping ", mapped,
              " bytes for a tensor: ", std::strerror(errno));
  auto* block = static_cast<Block*>(base);
  *block = Block{this, mapped - kHeaderBytes, 0, kMagic, kLarge};
  ATTNSCOPE_POISON(block->data() + n, block->capacity - n);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.misses += 1;
  CountLive(block->capacity);
  return block->data();
}

// Under mu_.
void TensorCache::CountLive(size_t capacity) const {
  stats_.live_blocks += 1;
  stats_.live_bytes += static_cast<int64_t>(capacity);
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
}

void TensorCache::GiveBack(Block* block) const {
  ATTNSCOPE_POISON(block->data(), block->capacity);
  std::lock_guard<std::mutex> lock(mu_);
  block->freed_at = ++clock_;
  free_.emplace(block->capacity, block);
  stats_.live_blocks -= 1;
  stats_.live_bytes -= static_cast<int64_t>(block->capacity);
  stats_.free_blocks += 1;
  stats_.free_bytes += static_cast<int64_t>(block->capacity);
  ReleaseDownTo(max_free_bytes_);
}

void TensorCache::Trim() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseDownTo(0);
}

// Under mu_. The free list is short (the distinct activation sizes of a
// pass), so finding the oldest by a scan is cheap next to an munmap.
void TensorCache::ReleaseDownTo(size_t limit) const {
  while (stats_.free_bytes > static_cast<int64_t>(limit) && !free_.empty()) {
    auto oldest = free_.begin();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second->freed_at < oldest->second->freed_at) oldest = it;
    }
    Block* block = oldest->second;
    free_.erase(oldest);
    stats_.free_blocks -= 1;
    stats_.free_bytes -= static_cast<int64_t>(block->capacity);
    stats_.released += 1;
    ATTNSCOPE_UNPOISON(block, block->capacity + kHeaderBytes);
    munmap(block, block->capacity + kHeaderBytes);
  }
}

void TensorCache::Delete(void* data) {
  if (data == nullptr) return;
  Block* block = Block::Of(data);
  TORCH_INTERNAL_ASSERT(block->magic == kMagic, "attnscope: a tensor buffer lost its header");
  if (block->kind == kSmall) return std::free(block);
  block->owner->GiveBack(block);
}

void TensorCache::ResetPeak() const {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_live_bytes = stats_.live_bytes;
}

TensorCacheStats TensorCache::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

const TensorCache* InstallTensorCache() {
  static const TensorCache* const installed = [] () -> const TensorCache* {
    size_t limit = TensorCache::kDefaultMaxFreeBytes;
    if (const char* env = std::getenv("ATTNSCOPE_TENSOR_CACHE_MIB"); env != nullptr && *env) {
      char* end = nullptr;
      const unsigned long long mib = std::strtoull(env, &end, 10);
      if (end == nullptr || *end != '\0' || mib > (size_t{1} << 24)) {
        std::fprintf(stderr,
                     "attnscope: ATTNSCOPE_TENSOR_CACHE_MIB=%s is not a size in MiB (0 .. 16777216); "
                     "using %zu\n",
                     env, limit >> 20);
      } else if (mib == 0) {
        return nullptr;
      } else {
        limit = static_cast<size_t>(mib) << 20;
      }
    }
    // Never destroyed: tensors may outlive every other static object.
    auto* cache = new TensorCache(limit);
    c10::SetCPUAllocator(cache, /*priority=*/1);
    return cache;
  }();
  return installed;
}

}  // namespace attnscope::model
