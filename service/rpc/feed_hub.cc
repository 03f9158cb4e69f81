#include "service/rpc/feed_hub.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"

namespace attnscope::rpc {

struct FeedHub::Queue {
  FeedFilter filter;
  std::mutex mu;
  std::condition_variable ready;
  std::deque<attnscope::v1::FeedEvent> events;
  uint64_t dropped = 0;
  bool closed = false;
};

FeedHub::FeedHub(size_t queue_capacity, int max_subscribers,
                 std::function<void(int64_t)> on_subscribers,
                 std::function<void(int64_t)> on_dropped)
    : capacity_(std::max<size_t>(queue_capacity, 1)),
      max_subscribers_(max_subscribers),
      on_subscribers_(std::move(on_subscribers)),
      on_dropped_(std::move(on_dropped)) {}

FeedHub::~FeedHub() { Close(); }

absl::StatusOr<std::unique_ptr<FeedHub::Subscription>> FeedHub::Subscribe(FeedFilter filter) {
  auto queue = std::make_shared<Queue>();
  queue->filter = std::move(filter);
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  if (static_cast<int>(queues_.size()) >= max_subscribers_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many subscribers: ", queues_.size(), " already (--max-subscribers ",
                     max_subscribers_, "); retry later"));
  }
  queues_.push_back(queue);
  if (on_subscribers_) on_subscribers_(static_cast<int64_t>(queues_.size()));
  return std::unique_ptr<Subscription>(new Subscription(this, std::move(queue)));
}

void FeedHub::Unsubscribe(const Queue* queue) {
  std::lock_guard<std::mutex> lock(mu_);
  queues_.erase(std::remove_if(queues_.begin(), queues_.end(),
                               [&](const std::shared_ptr<Queue>& q) { return q.get() == queue; }),
                queues_.end());
  if (on_subscribers_) on_subscribers_(static_cast<int64_t>(queues_.size()));
}

void FeedHub::Publish(attnscope::v1::FeedEvent event, const std::string& model) {
  event.set_unix_time(std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
  const bool token_event = event.has_token();
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::shared_ptr<Queue>& q : queues_) {
      if (!q->filter.model.empty() && q->filter.model != model) continue;
      if (token_event && !q->filter.include_token_entropy) continue;
      std::lock_guard<std::mutex> queue_lock(q->mu);
      if (q->events.size() >= capacity_) {
        ++q->dropped;
        ++dropped;
        continue;
      }
      q->events.push_back(event);
      q->ready.notify_one();
    }
  }
  if (dropped > 0 && on_dropped_) on_dropped_(dropped);
}

void FeedHub::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (const std::shared_ptr<Queue>& q : queues_) {
    std::lock_guard<std::mutex> queue_lock(q->mu);
    q->closed = true;
    q->ready.notify_all();
  }
}

int64_t FeedHub::subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queues_.size());
}

FeedHub::Subscription::~Subscription() { hub_->Unsubscribe(queue_.get()); }

std::optional<attnscope::v1::FeedEvent> FeedHub::Subscription::Next(
    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(queue_->mu);
  queue_->ready.wait_for(lock, timeout,
                         [&] { return queue_->closed || !queue_->events.empty(); });
  if (queue_->closed || queue_->events.empty()) return std::nullopt;
  attnscope::v1::FeedEvent event = std::move(queue_->events.front());
  queue_->events.pop_front();
  event.set_dropped(queue_->dropped);
  return event;
}

bool FeedHub::Subscription::closed() const {
  std::lock_guard<std::mutex> lock(queue_->mu);
  return queue_->closed;
}

}  // namespace attnscope::rpc
