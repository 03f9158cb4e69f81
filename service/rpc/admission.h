// Admission control: at most max_concurrent requests compute at once; the
// next max_queue wait (first come, first served); the rest are turned away
// at once with ResourceExhausted instead of piling up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "absl/status/statusor.h"

namespace attnscope::rpc {

class AdmissionController {
 public:
  using Clock = std::chrono::system_clock;  // gRPC deadlines are system_clock
  // Called after every change of the counts, with the controller's lock held
  // (so gauges never go back in time): it must not call back into it.
  using OnChange = std::function<void(int64_t in_flight, int64_t queued)>;

  // max_concurrent >= 1, max_queue >= 0.
  AdmissionController(int max_concurrent, int max_queue, OnChange on_change = nullptr);

  // A running request's slot; released when destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { Release(); }

   private:
    friend class AdmissionController;
    explicit Slot(AdmissionController* owner) : owner_(owner) {}
    void Release();
    AdmissionController* owner_ = nullptr;
  };

  // Takes a slot, waiting in line if all are busy. ResourceExhausted naming
  // both limits when max_concurrent requests run and max_queue already wait;
  // DeadlineExceeded if `deadline` passes, Cancelled if `cancelled()` turns
  // true while waiting (polled every few milliseconds).
  absl::StatusOr<Slot> Acquire(const std::function<bool()>& cancelled, Clock::time_point deadline);

  int64_t in_flight() const;
  int64_t queued() const;

 private:
  void ReleaseOne();
  void Notify(int64_t in_flight, int64_t queued) const;

  const int max_concurrent_;
  const int max_queue_;
  const OnChange on_change_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  int64_t in_flight_ = 0;
  uint64_t next_ticket_ = 0;
  std::deque<uint64_t> waiting_;  // tickets in arrival order
};

}  // namespace attnscope::rpc
