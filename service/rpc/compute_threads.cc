#include "service/rpc/compute_threads.h"

#include <algorithm>
#include <exception>

namespace attnscope::rpc {

struct ComputeThreads::Job {
  const std::function<void()>* fn = nullptr;
  std::exception_ptr error;
  bool done = false;
  std::condition_variable finished;
};

ComputeThreads::ComputeThreads(int max_threads) : max_threads_(std::max(1, max_threads)) {}

ComputeThreads::~ComputeThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int ComputeThreads::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

void ComputeThreads::Run(const std::function<void()>& fn) {
  Job job;
  job.fn = &fn;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&job);
  if (idle_ < static_cast<int>(queue_.size()) &&
      static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  }
  work_.notify_one();
  job.finished.wait(lock, [&] { return job.done; });
  if (job.error) std::rethrow_exception(job.error);
}

void ComputeThreads::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left
    Job* job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job->fn)();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    job->error = error;
    job->done = true;
    job->finished.notify_one();
  }
}

}  // namespace attnscope::rpc
