// core::ParallelFor: serial without a pool, the installed loop with one; the
// chunks are disjoint, cover [0, n) and respect the grain.
#include "service/core/parallel.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace attnscope::core {
namespace {

// Up to three std::threads, one per chunk: a real concurrent loop.
std::vector<std::pair<int64_t, int64_t>>* g_impl_calls = nullptr;
void ThreeThreads(int64_t n, int64_t grain, const ChunkFn& fn) {
  g_impl_calls->emplace_back(n, grain);
  const int64_t chunks = std::min<int64_t>(3, (n + grain - 1) / grain);
  const int64_t step = (n + chunks - 1) / chunks;
  std::vector<std::thread> threads;
  for (int64_t b = 0; b < n; b += step) threads.emplace_back(fn, b, std::min(n, b + step));
  for (std::thread& t : threads) t.join();
}

class ParallelForTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = CurrentParallelForImpl();
    g_impl_calls = &calls_;
  }
  void TearDown() override {
    SetParallelForImpl(saved_);
    g_impl_calls = nullptr;
  }
  // Runs ParallelFor(n, grain) and returns its chunks, sorted.
  std::vector<std::pair<int64_t, int64_t>> Chunks(int64_t n, int64_t grain) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> chunks;
    ParallelFor(n, grain, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      chunks.emplace_back(b, e);
    });
    std::sort(chunks.begin(), chunks.end());
    return chunks;
  }
  ParallelForImpl saved_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> calls_;
};

TEST_F(ParallelForTest, WithoutAPoolOneChunkOnTheCallingThread) {
  SetParallelForImpl(nullptr);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int calls = 0;
  ParallelFor(10, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ran_on = std::this_thread::get_id();
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, caller);
}

TEST_F(ParallelForTest, TheInstalledLoopCoversEveryIndexOnce) {
  SetParallelForImpl(ThreeThreads);
  const auto chunks = Chunks(10, 1);
  ASSERT_EQ(chunks.size(), 3u);
  int64_t next = 0;
  for (const auto& [b, e] : chunks) {
    EXPECT_EQ(b, next);
    EXPECT_GT(e, b);
    next = e;
  }
  EXPECT_EQ(next, 10);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0], std::make_pair(int64_t{10}, int64_t{1}));
}

TEST_F(ParallelForTest, AtMostGrainIndicesRunInlineAndEmptyRangesNotAtAll) {
  SetParallelForImpl(ThreeThreads);
  EXPECT_EQ(Chunks(4, 4), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}}));
  EXPECT_TRUE(Chunks(0, 1).empty());
  EXPECT_TRUE(Chunks(-3, 1).empty());
  EXPECT_TRUE(calls_.empty());  // none of these reached the pool
  // A grain below 1 is taken as 1.
  EXPECT_EQ(Chunks(5, 0).size(), 3u);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].second, 1);
}

}  // namespace
}  // namespace attnscope::core
