// The live feed behind Subscribe: every request publishes a few events
// (started, per-token entropies, finished) and every subscriber gets its own
// bounded queue. Publishing never waits: when a subscriber has fallen behind
// and its queue is full, the event is dropped for that subscriber and
// counted, so a slow dashboard cannot slow an analysis down.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::rpc {

struct FeedFilter {
  std::string model;                   // only this model's requests; "" = all
  bool include_token_entropy = false;  // also the per-token events
};

class FeedHub {
 public:
  // queue_capacity >= 1 events per subscriber; at most max_subscribers at
  // once. on_subscribers(count) after every change; on_dropped(n) when n
  // events are dropped.
  FeedHub(size_t queue_capacity, int max_subscribers,
          std::function<void(int64_t)> on_subscribers = nullptr,
          std::function<void(int64_t)> on_dropped = nullptr);
  ~FeedHub();

  struct Queue;  // one subscriber's state (feed_hub.cc)

  class Subscription {
   public:
    ~Subscription();  // unsubscribes
    // The next event (with FeedEvent.dropped set to the events this
    // subscriber has lost so far), or nullopt after `timeout` or once the
    // hub is closed.
    std::optional<attnscope::v1::FeedEvent> Next(std::chrono::milliseconds timeout);
    bool closed() const;

   private:
    friend class FeedHub;
    Subscription(FeedHub* hub, std::shared_ptr<Queue> queue) : hub_(hub), queue_(std::move(queue)) {}
    FeedHub* hub_;
    std::shared_ptr<Queue> queue_;
  };

  // ResourceExhausted naming the limit when max_subscribers are subscribed;
  // Unavailable once the hub is closed. The hub must outlive the result.
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(FeedFilter filter);

  // Stamps unix_time and offers `event` to every
  // subscriber whose filter matches `model` (token events only to those that
  // asked for them). Never blocks on a subscriber.
  void Publish(attnscope::v1::FeedEvent event, const std::string& model);

  // Ends every subscription (their Next returns nullopt) and refuses new ones.
  void Close();

  // A fresh id for a request's events.
  uint64_t NextRequestId() { return next_request_id_.fetch_add(1) + 1; }

  int64_t subscribers() const;

 private:
  void Unsubscribe(const Queue* queue);

  const size_t capacity_;
  const int max_subscribers_;
  const std::function<void(int64_t)> on_subscribers_;
  const std::function<void(int64_t)> on_dropped_;
  std::atomic<uint64_t> next_request_id_{0};
  mutable std::mutex mu_;
  bool closed_ = false;
  std::vector<std::shared_ptr<Queue>> queues_;
};

}  // namespace attnscope::rpc
