#include "service/rpc/admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace attnscope::rpc {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

}  // namespace

AdmissionController::AdmissionController(int max_concurrent, int max_queue, OnChange on_change)
    : max_concurrent_(std::max(max_concurrent, 1)),
      max_queue_(std::max(max_queue, 0)),
      on_change_(std::move(on_change)) {}

AdmissionController::Slot& AdmissionController::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

void AdmissionController::Slot::Release() {
  if (owner_ != nullptr) owner_->ReleaseOne();
  owner_ = nullptr;
}

absl::StatusOr<AdmissionController::Slot> AdmissionController::Acquire(
    const std::function<bool()>& cancelled, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (in_flight_ < max_concurrent_ && waiting_.empty()) {
    ++in_flight_;
    Notify(in_flight_, static_cast<int64_t>(waiting_.size()));
    return Slot(this);
  }
  if (static_cast<int64_t>(waiting_.size()) >= max_queue_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: ", in_flight_, " requests running (--max-concurrent ", max_concurrent_,
        ") and ", waiting_.size(), " waiting (--max-queue ", max_queue_,
        "); retry later or raise the limits"));
  }
  const uint64_t ticket = next_ticket_++;
  waiting_.push_back(ticket);
  Notify(in_flight_, static_cast<int64_t>(waiting_.size()));
  absl::Status gave_up;
  while (!(in_flight_ < max_concurrent_ && waiting_.front() == ticket)) {
    if (Clock::now() >= deadline) {
      gave_up = absl::DeadlineExceededError("deadline passed while waiting for a free slot");
    } else if (cancelled && cancelled()) {
      gave_up = absl::CancelledError("request cancelled while waiting for a free slot");
    }
    if (!gave_up.ok()) break;
    freed_.wait_for(lock, kPollInterval);
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
  if (gave_up.ok()) ++in_flight_;
  Notify(in_flight_, static_cast<int64_t>(waiting_.size()));
  lock.unlock();
  // Someone else may now be at the head of the line.
  freed_.notify_all();
  if (!gave_up.ok()) return gave_up;
  return Slot(this);
}

void AdmissionController::ReleaseOne() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    Notify(in_flight_, static_cast<int64_t>(waiting_.size()));
  }
  freed_.notify_all();
}

void AdmissionController::Notify(int64_t in_flight, int64_t queued) const {
  if (on_change_) on_change_(in_flight, queued);
}

int64_t AdmissionController::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

int64_t AdmissionController::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(waiting_.size());
}

}  // namespace attnscope::rpc
