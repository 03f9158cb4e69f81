// ComputeThreads on its own: computations run on the service's own threads
// (not the caller's), the same thread again when one is idle, as many at
// once as the limit allows, results and exceptions come back to the caller.
#include "service/rpc/compute_threads.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace attnscope::rpc {
namespace {

TEST(ComputeThreadsTest, RunsOnOneLastingThreadThatIsNotTheCallers) {
  ComputeThreads compute(1);
  EXPECT_EQ(compute.started(), 0);
  std::vector<std::thread::id> ran;
  for (int i = 0; i < 3; ++i) {
    // A new calling thread each time, as gRPC's threads come and go.
    std::thread([&] { compute.Run([&] { ran.push_back(std::this_thread::get_id()); }); }).join();
  }
  compute.Run([&] { ran.push_back(std::this_thread::get_id()); });
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_NE(ran[0], std::this_thread::get_id());
  for (const std::thread::id& id : ran) EXPECT_EQ(id, ran[0]);
  EXPECT_EQ(compute.started(), 1);
}

TEST(ComputeThreadsTest, RunsUpToItsLimitAtOnceAndReusesIdleThreads) {
  ComputeThreads compute(2);
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  std::set<std::thread::id> threads;
  // Each job waits until both run at once: with fewer than two threads
  // this would never finish.
  auto job = [&] {
    std::unique_lock<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    ++running;
    cv.notify_all();
    cv.wait(lock, [&] { return running >= 2; });
  };
  std::thread a([&] { compute.Run(job); });
  std::thread b([&] { compute.Run(job); });
  a.join();
  b.join();
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(compute.started(), 2);
  for (int i = 0; i < 4; ++i) compute.Run([] {});
  EXPECT_EQ(compute.started(), 2);  // idle threads were reused
}

TEST(ComputeThreadsTest, ReturnsResultsAndRethrowsAndKeepsServing) {
  ComputeThreads compute(1);
  absl::StatusOr<std::unique_ptr<int>> value =
      compute.Call([] { return absl::StatusOr<std::unique_ptr<int>>(std::make_unique<int>(42)); });
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(**value, 42);
  try {
    compute.Run([] { throw std::runtime_error("the pass failed"); });
    ADD_FAILURE() << "Run did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "the pass failed");
  }
  EXPECT_EQ(compute.Call([] { return 7; }), 7);  // the thread survived
  EXPECT_EQ(compute.started(), 1);
}

TEST(ComputeThreadsTest, ManyCallersAllFinish) {
  ComputeThreads compute(2);
  std::mutex mu;
  int done = 0;
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      for (int j = 0; j < 25; ++j) {
        compute.Run([&] {
          std::lock_guard<std::mutex> lock(mu);
          ++done;
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(done, 200);
  EXPECT_LE(compute.started(), 2);
}

}  // namespace
}  // namespace attnscope::rpc
