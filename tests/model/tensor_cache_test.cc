// The CPU tensor allocator that keeps large freed buffers for the next
// tensors of about their size (service/model/tensor_cache.h).
#include "service/model/tensor_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace attnscope::model {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(TensorCacheTest, AFreedLargeBufferServesTheNextOfItsSize) {
  TensorCache cache;
  void* first = nullptr;
  {
    c10::DataPtr a = cache.allocate(kMiB);
    first = a.get();
    ASSERT_NE(first, nullptr);
    std::memset(first, 1, kMiB);
    EXPECT_EQ(cache.Stats().live_blocks, 1);
  }
  EXPECT_EQ(cache.Stats().live_blocks, 0);
  EXPECT_EQ(cache.Stats().free_blocks, 1);
  c10::DataPtr b = cache.allocate(kMiB);
  EXPECT_EQ(b.get(), first);
  const TensorCacheStats s = cache.Stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.free_blocks, 0);
  EXPECT_GE(s.live_bytes, static_cast<int64_t>(kMiB));
}

TEST(TensorCacheTest, TakesTheSmallestFreeBufferWithinAQuarterAboveTheSize) {
  TensorCache cache;
  void* one = nullptr;
  void* two = nullptr;
  {
    c10::DataPtr a = cache.allocate(kMiB);
    c10::DataPtr b = cache.allocate(2 * kMiB);
    one = a.get();
    two = b.get();
  }
  ASSERT_EQ(cache.Stats().free_blocks, 2);
  // 1.7 MiB: the 1 MiB buffer is too small, 2 MiB is within 1.25 x.
  c10::DataPtr c = cache.allocate(17 * kMiB / 10);
  EXPECT_EQ(c.get(), two);
  // 0.7 MiB: 1 MiB is more than 1.25 x 0.7 MiB, so a fresh buffer.
  c10::DataPtr d = cache.allocate(7 * kMiB / 10);
  EXPECT_NE(d.get(), one);
  EXPECT_EQ(cache.Stats().hits, 1);
  EXPECT_EQ(cache.Stats().misses, 3);
  c10::DataPtr e = cache.allocate(kMiB - 100);
  EXPECT_EQ(e.get(), one);
}

TEST(TensorCacheTest, SmallBuffersAreMallocedAndNotKept) {
  TensorCache cache;
  for (size_t n : {size_t{1}, size_t{63}, size_t{4096}, TensorCache::kMinCachedBytes - 1}) {
    c10::DataPtr p = cache.allocate(n);
    ASSERT_NE(p.get(), nullptr) << n;
    EXPECT_TRUE(Aligned64(p.get())) << n;
    std::memset(p.get(), 7, n);
  }
  const TensorCacheStats s = cache.Stats();
  EXPECT_EQ(s.hits + s.misses, 0);
  EXPECT_EQ(s.free_blocks, 0);
  c10::DataPtr empty = cache.allocate(0);
  EXPECT_EQ(empty.get(), nullptr);
}

TEST(TensorCacheTest, LargeBuffersAreAlignedAndWholeWritable) {
  TensorCache cache;
  for (size_t n : {TensorCache::kMinCachedBytes, 3 * kMiB + 5, 13 * kMiB}) {
    c10::DataPtr p = cache.allocate(n);
    EXPECT_TRUE(Aligned64(p.get())) << n;
    auto* bytes = static_cast<unsigned char*>(p.get());
    std::memset(bytes, 0xab, n);
    EXPECT_EQ(bytes[0], 0xab);
    EXPECT_EQ(bytes[n - 1], 0xab);
  }
}

TEST(TensorCacheTest, BuffersFreedLongestAgoAreUnmappedOverTheLimit) {
  TensorCache cache(3 * kMiB + kMiB / 2);
  std::vector<c10::DataPtr> held;
  for (int i = 0; i < 4; ++i) held.push_back(cache.allocate(kMiB));
  for (auto& p : held) p.clear();  // freed in order 0, 1, 2, 3
  TensorCacheStats s = cache.Stats();
  EXPECT_EQ(s.released, 1);
  EXPECT_EQ(s.free_blocks, 3);
  EXPECT_LE(s.free_bytes, static_cast<int64_t>(cache.max_free_bytes()));
  cache.Trim();
  s = cache.Stats();
  EXPECT_EQ(s.free_blocks, 0);
  EXPECT_EQ(s.free_bytes, 0);
  EXPECT_EQ(s.released, 4);
}

TEST(TensorCacheTest, ConcurrentTensorsNeverShareABuffer) {
  TensorCache cache;
  constexpr int kThreads = 8, kRounds = 300;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t n = (1 + (r + t) % 3) * kMiB / 2;
        c10::DataPtr p = cache.allocate(n);
        auto* bytes = static_cast<unsigned char*>(p.get());
        std::memset(bytes, t, n);
        std::this_thread::yield();
        // Another thread holding the same buffer would have overwritten it.
        if (bytes[0] != t || bytes[n / 2] != t || bytes[n - 1] != t) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  const TensorCacheStats s = cache.Stats();
  EXPECT_EQ(s.hits + s.misses, kThreads * kRounds);
  EXPECT_EQ(s.live_blocks, 0);
  EXPECT_EQ(s.live_bytes, 0);
  EXPECT_LE(s.misses, kThreads * 3);  // at most one buffer per size per thread in flight
}

TEST(TensorCacheTest, InstalledItServesLibtorchsTensors) {
  const TensorCache* cache = InstallTensorCache();
  ASSERT_NE(cache, nullptr) << "ATTNSCOPE_TENSOR_CACHE_MIB=0 in this test's environment?";
  EXPECT_EQ(InstallTensorCache(), cache);
  EXPECT_EQ(c10::GetCPUAllocator(), cache);
  const TensorCacheStats before = cache->Stats();
  void* data = nullptr;
  {
    at::Tensor t = at::ones({1024, 1024});  // 4 MiB
    data = t.data_ptr();
    EXPECT_EQ(cache->Stats().live_blocks, before.live_blocks + 1);
    EXPECT_FLOAT_EQ(t.sum().item<float>(), 1024.0f * 1024.0f);
  }
  EXPECT_EQ(cache->Stats().live_blocks, before.live_blocks);
  const at::Tensor again = at::zeros({1024, 1024});
  EXPECT_EQ(again.data_ptr(), data);  // the same buffer, and zeroed as asked
  EXPECT_EQ(again.abs().max().item<float>(), 0.0f);
}

// In a fresh process (the installed cache is once per process).
TEST(TensorCacheDeathTest, TheEnvironmentTurnsItOffOrSetsItsLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ATTNSCOPE_TENSOR_CACHE_MIB", "0", 1);
        std::exit(InstallTensorCache() == nullptr && c10::GetCPUAllocator() != nullptr ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("ATTNSCOPE_TENSOR_CACHE_MIB", "64", 1);
        const TensorCache* c = InstallTensorCache();
        std::exit(c != nullptr && c->max_free_bytes() == 64 * kMiB ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("ATTNSCOPE_TENSOR_CACHE_MIB", "lots", 1);
        const TensorCache* c = InstallTensorCache();
        std::exit(c != nullptr && c->max_free_bytes() == TensorCache::kDefaultMaxFreeBytes ? 3
                                                                                           : 1);
      },
      ::testing::ExitedWithCode(3), "ATTNSCOPE_TENSOR_CACHE_MIB=lots is not a size in MiB");
}

}  // namespace
}  // namespace attnscope::model
