// The bookkeeping every RPC shares: its clock, cancellation and deadline, the
// time to its first event, the feed events that announce it, and the metrics
// recorded when it ends (whatever the outcome).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "attnscope/v1/attnscope.pb.h"
#include "grpcpp/server_context.h"
#include "service/metrics/service_metrics.h"
#include "service/rpc/feed_hub.h"

namespace attnscope::rpc {

// Seconds elapsed since `start` on the steady clock.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The end of the server's drain: set once, when the drain time has run out,
// every request still running stops at its next check (layer, token, queue
// poll) and ends itself with UNAVAILABLE and the message, sent like any
// other final status. (Cancelling the calls from outside instead loses the
// message: gRPC then closes the stream without it.)
class DrainEnd {
 public:
  // Once; `message` says why and what to do.
  void Expire(std::string message) {
    message_ = std::move(message);
    expired_.store(true, std::memory_order_release);
  }
  bool expired() const { return expired_.load(std::memory_order_acquire); }
  // Valid once expired() is true.
  const std::string& message() const { return message_; }

 private:
  std::atomic<bool> expired_{false};
  std::string message_;  // written before expired_ is set, read after
};

class RequestScope {
 public:
  // `context`, `metrics`, `feed` and `drain` must outlive the scope.
  RequestScope(std::string rpc, grpc::ServerContext* context, metrics::ServiceMetrics& metrics,
               FeedHub& feed, const DrainEnd& drain);

  // True once the client cancelled, the deadline passed or the server's
  // drain ran out: the computation should stop at the next layer.
  bool ShouldStop() const;
  // Why it stopped: Unavailable with the drain's message when the server's
  // drain ran out, DeadlineExceeded when the deadline has passed, else
  // Cancelled. `where` says how far the request got.
  absl::Status StopStatus(const std::string& where) const;
  // True once the server's drain ran out.
  bool drain_expired() const { return drain_.expired(); }

  // The client's deadline (time_point::max() when it set none).
  std::chrono::system_clock::time_point deadline() const { return context_->deadline(); }

  // The served model the request resolved to: the model label of its metrics
  // (empty until set, e.g. for a model name the server does not serve).
  void SetServedModel(const std::string& model) { served_model_ = model; }
  // Marks a dashboard's own request (metrics label origin, feed events).
  void SetOrigin(attnscope::v1::RequestOrigin origin);
  metrics::ServiceMetrics::Origin metrics_origin() const;
  // The Analyze options to announce on the feed (started and finished).
  void SetOptions(const attnscope::v1::AnalyzeOptions& options);

  // Records the time to the first event the first time it is called.
  void MarkFirstEvent();
  double ElapsedSeconds() const;
  double FirstEventSeconds() const { return first_event_seconds_; }

  // Announces the request on the feed (once the prompt is known) and fills
  // the model/preview/token fields of the finished event to come.
  void Started(const std::string& model, const std::string& prompt_text,
               const std::vector<int64_t>& prompt_ids);
  // A per-token feed event of a generation.
  void PublishToken(const attnscope::v1::TokenEntropy& token);
  // What the finished event will report (health, sinks, entropies, ...).
  attnscope::v1::RequestFinished& finished() { return finished_; }

  // Keeps this request off the Subscribe feed (Tokenize, ScanHeads, Ablate:
  // the feed shows analyses and generations); its metrics are recorded.
  void KeepOffFeed() { publish_ = false; }

  // Ends the RPC: records the request metric with the gRPC code name,
  // publishes the finished event (also for requests that failed before
  // Started; never after KeepOffFeed) and returns the status to hand to gRPC.
  grpc::Status Finish(const absl::Status& status);

 private:
  using Clock = std::chrono::steady_clock;
  const std::string rpc_;
  grpc::ServerContext* const context_;
  metrics::ServiceMetrics& metrics_;
  FeedHub& feed_;
  const DrainEnd& drain_;
  const Clock::time_point start_;
  const uint64_t request_id_;
  double first_event_seconds_ = -1;
  std::string served_model_;
  bool publish_ = true;
  attnscope::v1::RequestFinished finished_;
};

// The first `max_chars` code points of `text` (invalid UTF-8 replaced first).
std::string PromptPreview(const std::string& text, size_t max_chars = 80);

}  // namespace attnscope::rpc
