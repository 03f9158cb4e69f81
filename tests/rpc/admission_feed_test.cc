// AdmissionController and FeedHub on their own: limits, order, deadlines,
// cancellation, and a slow subscriber losing (and counting) events.
#include <atomic>
#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/rpc/admission.h"
#include "service/rpc/feed_hub.h"

namespace attnscope::rpc {
namespace {

using ::testing::HasSubstr;
using Clock = AdmissionController::Clock;
using std::chrono::milliseconds;

Clock::time_point Never() { return Clock::time_point::max(); }

TEST(AdmissionTest, RunsUpToTheLimitThenTurnsAwayWithTheLimits) {
  int64_t last_in_flight = -1, last_queued = -1;
  AdmissionController admission(2, 0, [&](int64_t running, int64_t queued) {
    last_in_flight = running;
    last_queued = queued;
  });
  auto a = admission.Acquire(nullptr, Never());
  auto b = admission.Acquire(nullptr, Never());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(last_in_flight, 2);
  auto c = admission.Acquire(nullptr, Never());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("2 requests running (--max-concurrent 2)"));
  EXPECT_THAT(c.status().message(), HasSubstr("0 waiting (--max-queue 0)"));
  { AdmissionController::Slot released = std::move(*a); }
  EXPECT_EQ(last_in_flight, 1);
  EXPECT_EQ(last_queued, 0);
  EXPECT_TRUE(admission.Acquire(nullptr, Never()).ok());
}

TEST(AdmissionTest, WaitersGetSlotsInArrivalOrder) {
  AdmissionController admission(1, 3);
  auto holder = std::make_unique<AdmissionController::Slot>(*admission.Acquire(nullptr, Never()));
  std::vector<int> order;
  std::mutex mu;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      auto slot = admission.Acquire(nullptr, Never());
      ASSERT_TRUE(slot.ok());
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
    // Each waiter is in line before the next one arrives.
    while (admission.queued() < i + 1) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(admission.Acquire(nullptr, Never()).status().code(),
            absl::StatusCode::kResourceExhausted);
  holder.reset();
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(admission.in_flight(), 0);
}

TEST(AdmissionTest, WaitingEndsAtTheDeadlineOrOnCancellation) {
  AdmissionController admission(1, 2);
  auto holder = admission.Acquire(nullptr, Never());
  ASSERT_TRUE(holder.ok());
  // It gives up at its deadline, not before (the order of two clock
  // readings, not a bound on how long anything takes).
  const auto deadline = Clock::now() + milliseconds(50);
  auto late = admission.Acquire(nullptr, deadline);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(Clock::now(), deadline) << "gave up before its deadline";
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(30));
    cancel = true;
  });
  auto cancelled = admission.Acquire([&] { return cancel.load(); }, Never());
  canceller.join();
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(admission.queued(), 0);
  EXPECT_EQ(admission.in_flight(), 1);
}

v1::FeedEvent Started(const std::string& model) {
  v1::FeedEvent event;
  event.mutable_started()->set_model(model);
  return event;
}

v1::FeedEvent Token(int index) {
  v1::FeedEvent event;
  event.mutable_token()->set_index(index);
  return event;
}

TEST(FeedHubTest, FiltersByModelAndTokenEvents) {
  FeedHub hub(16, 4);
  auto all = *hub.Subscribe({"", true});
  auto only_b = *hub.Subscribe({"b", false});
  hub.Publish(Started("a"), "a");
  hub.Publish(Token(0), "b");
  hub.Publish(Started("b"), "b");
  auto e1 = all->Next(milliseconds(10)), e2 = all->Next(milliseconds(10)),
       e3 = all->Next(milliseconds(10));
  ASSERT_TRUE(e1 && e2 && e3);
  EXPECT_EQ(e1->started().model(), "a");
  EXPECT_TRUE(e2->has_token());
  EXPECT_GT(e1->unix_time(), 1.6e9);
  auto b = only_b->Next(milliseconds(10));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->started().model(), "b");
  EXPECT_FALSE(only_b->Next(milliseconds(10)));
}

TEST(FeedHubTest, SlowSubscriberLosesAndCountsEventsWithoutBlocking) {
  int64_t dropped_total = 0;
  FeedHub hub(3, 4, nullptr, [&](int64_t n) { dropped_total += n; });
  auto slow = *hub.Subscribe({"", false});
  // Publishing never waits for the subscriber: nobody reads here, so a
  // Publish that waited would never return (and ctest's timeout fails it).
  for (int i = 0; i < 10; ++i) hub.Publish(Started("m" + std::to_string(i)), "x");
  EXPECT_EQ(dropped_total, 7);
  for (int i = 0; i < 3; ++i) {
    auto e = slow->Next(milliseconds(10));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->started().model(), "m" + std::to_string(i));  // the oldest are kept
    EXPECT_EQ(e->dropped(), 7u);
  }
  EXPECT_FALSE(slow->Next(milliseconds(10)));
}

TEST(FeedHubTest, LimitsSubscribersAndCloseEndsEveryStream) {
  std::vector<int64_t> counts;
  FeedHub hub(4, 2, [&](int64_t n) { counts.push_back(n); });
  auto a = hub.Subscribe({});
  auto b = hub.Subscribe({});
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = hub.Subscribe({});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("--max-subscribers 2"));
  b->reset();
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 2, 1}));
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    hub.Close();
  });
  EXPECT_FALSE((*a)->Next(std::chrono::seconds(10)));  // woken by Close, not the timeout
  closer.join();
  EXPECT_TRUE((*a)->closed());
  EXPECT_EQ(hub.Subscribe({}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace attnscope::rpc
