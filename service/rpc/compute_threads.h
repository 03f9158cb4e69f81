// The threads the service computes on.
//
// gRPC's synchronous server runs each call on one of its own threads, and
// starts and ends those threads as its load changes, so consecutive calls
// land on different, often new, threads. A forward pass on a new thread
// pays for everything libtorch and the model keep per thread: a new OpenMP
// team, the scratch that bfloat16 weights are widened into, an allocator
// arena whose freed memory went back to the system, and served analyses
// were slower than the same analyses in process (docs/performance.md, "The
// service"). Here a fixed set of threads lives as long as the service, and
// every admitted computation runs on one of them.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace attnscope::rpc {

class ComputeThreads {
 public:
  // At most max_threads >= 1 threads (the service's --max-concurrent:
  // admission lets no more computations run at once, so none waits here for
  // a thread), each started when a computation finds no idle one.
  explicit ComputeThreads(int max_threads);
  // Runs what is queued, then joins the threads.
  ~ComputeThreads();
  ComputeThreads(const ComputeThreads&) = delete;
  ComputeThreads& operator=(const ComputeThreads&) = delete;

  // Runs `fn` on one of the threads and returns once it has finished,
  // rethrowing what it threw. The caller's other work waits meanwhile, so
  // `fn` may use whatever the caller owns (the call's writer included).
  void Run(const std::function<void()>& fn);

  // Run for a function with a result: returns f()'s.
  template <typename F>
  auto Call(F&& f) -> decltype(f()) {
    std::optional<decltype(f())> result;
    Run([&] { result.emplace(f()); });
    return std::move(*result);
  }

  // Threads started so far.
  int started() const;

 private:
  struct Job;
  void Loop();

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable work_;
  std::deque<Job*> queue_;
  int idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace attnscope::rpc
