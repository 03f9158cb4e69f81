#include "service/cli/batch_progress.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attnscope::cli {

BatchProgress::BatchProgress(int64_t total, int64_t skipped, bool show)
    : total_(total), skipped_(skipped), show_(show), start_(std::chrono::steady_clock::now()) {
  std::lock_guard<std::mutex> lock(mu_);
  if (show_ && total_ > 0) Draw();
}

BatchProgress::~BatchProgress() {
  if (show_ && drawn_at_ >= 0) std::fprintf(stderr, "\r\033[K");
}

double BatchProgress::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void BatchProgress::Done(bool ok, const std::string& replica) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  if (!ok) ++errors_;
  if (!replica.empty()) ++replicas_[replica];
  // At most ten lines a second, and always the last.
  if (show_ && (Elapsed() - drawn_at_ >= 0.1 || done_ == total_)) Draw();
}

void BatchProgress::Retried() {
  std::lock_guard<std::mutex> lock(mu_);
  ++retried_;
}

void BatchProgress::Draw() {
  const double elapsed = Elapsed();
  drawn_at_ = elapsed;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  const std::string eta =
      rate > 0 ? absl::StrFormat("ETA %.0f s", static_cast<double>(total_ - done_) / rate) : "ETA -";
  std::fprintf(stderr, "\r\033[Kbatch: %lld/%lld  %.2f prompts/s  %s  %lld error%s",
               static_cast<long long>(done_), static_cast<long long>(total_), rate, eta.c_str(),
               static_cast<long long>(errors_), errors_ == 1 ? "" : "s");
  std::fflush(stderr);
}

int64_t BatchProgress::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

std::string BatchProgress::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  const double elapsed = Elapsed();
  // On a terminal the summary takes the progress line's place.
  std::string out = show_ && drawn_at_ >= 0 ? "\r\033[K" : "";
  out += absl::StrFormat(
      "batch: %d prompts in %.1f s (%.2f prompts/s): %d ok, %d error%s, %d skipped (--resume)",
      done_, elapsed, elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0, done_ - errors_,
      errors_, errors_ == 1 ? "" : "s", skipped_);
  if (done_ < total_) absl::StrAppend(&out, "; ", total_ - done_, " not run");
  if (retried_ > 0) absl::StrAppend(&out, "; ", retried_, " retried");
  if (!replicas_.empty()) {
    absl::StrAppend(&out, "; replicas:");
    for (const auto& [replica, count] : replicas_) absl::StrAppend(&out, " ", replica, " ", count);
  }
  return out;
}

}  // namespace attnscope::cli
