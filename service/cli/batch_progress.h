// The progress of `attnscope batch`: a line on stderr rewritten as prompts
// finish (on a terminal), and the summary line that ends every run.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace attnscope::cli {

class BatchProgress {
 public:
  // `total` prompts to run now, `skipped` already in the output (--resume);
  // `show` draws the progress line (a terminal).
  BatchProgress(int64_t total, int64_t skipped, bool show);
  // Clears the progress line.
  ~BatchProgress();

  // One prompt finished; `replica` "" when unknown or local. Thread-safe.
  void Done(bool ok, const std::string& replica);
  // A request is tried again (UNAVAILABLE, RESOURCE_EXHAUSTED). Thread-safe.
  void Retried();

  int64_t errors() const;
  // "batch: 100 prompts in 29.4 s (3.40 prompts/s): 99 ok, 1 error, 12
  // skipped (--resume); 2 retried; replicas: ipv4:127.0.0.1:50051 33 ..."
  // ("retried" only when some request was tried again; on a
  // terminal preceded by what erases the progress line).
  std::string Summary() const;

 private:
  double Elapsed() const;
  void Draw();  // with mu_ held

  const int64_t total_, skipped_;
  const bool show_;
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  int64_t done_ = 0, errors_ = 0, retried_ = 0;
  double drawn_at_ = -1;  // elapsed seconds at the last line drawn
  std::map<std::string, int64_t> replicas_;
};

}  // namespace attnscope::cli
