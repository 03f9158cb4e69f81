#include "service/rpc/request_scope.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"
#include "service/rpc/status_codes.h"

namespace attnscope::rpc {

RequestScope::RequestScope(std::string rpc, grpc::ServerContext* context,
                           metrics::ServiceMetrics& metrics, FeedHub& feed,
                           const DrainEnd& drain)
    : rpc_(std::move(rpc)),
      context_(context),
      metrics_(metrics),
      feed_(feed),
      drain_(drain),
      start_(Clock::now()),
      request_id_(feed.NextRequestId()) {
  finished_.set_rpc(rpc_);
}

bool RequestScope::ShouldStop() const {
  return drain_.expired() || context_->IsCancelled() ||
         std::chrono::system_clock::now() >= context_->deadline();
}

absl::Status RequestScope::StopStatus(const std::string& where) const {
  if (drain_.expired()) {
    return absl::UnavailableError(absl::StrCat(drain_.message(), " (stopped ", where, ")"));
  }
  // A client whose deadline passes cancels the call itself, which reaches us
  // a little before our copy of the deadline (sent as a relative timeout and
  // started on receipt): a cancellation that close to it is the deadline.
  constexpr auto kDeadlineSlack = std::chrono::milliseconds(100);
  if (std::chrono::system_clock::now() + kDeadlineSlack >= context_->deadline()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the deadline passed ", where, "; give the request more time or a shorter prompt"));
  }
  return absl::CancelledError(absl::StrCat("the client cancelled the request ", where));
}

void RequestScope::SetOrigin(attnscope::v1::RequestOrigin origin) { finished_.set_origin(origin); }

metrics::ServiceMetrics::Origin RequestScope::metrics_origin() const {
  switch (finished_.origin()) {
    case attnscope::v1::REQUEST_ORIGIN_DASHBOARD:
      return metrics::ServiceMetrics::Origin::kDashboard;
    case attnscope::v1::REQUEST_ORIGIN_BATCH:
      return metrics::ServiceMetrics::Origin::kBatch;
    default:
      return metrics::ServiceMetrics::Origin::kUser;
  }
}

void RequestScope::SetOptions(const attnscope::v1::AnalyzeOptions& options) {
  *finished_.mutable_options() = options;
}

void RequestScope::MarkFirstEvent() {
  if (first_event_seconds_ >= 0) return;
  first_event_seconds_ = ElapsedSeconds();
  metrics_.RecordFirstEvent(rpc_, first_event_seconds_);
}

double RequestScope::ElapsedSeconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void RequestScope::Started(const std::string& model, const std::string& prompt_text,
                           const std::vector<int64_t>& prompt_ids) {
  finished_.set_model(model);
  finished_.set_prompt_preview(PromptPreview(prompt_text));
  finished_.set_prompt_tokens(static_cast<int32_t>(prompt_ids.size()));
  finished_.mutable_prompt_ids()->Add(prompt_ids.begin(), prompt_ids.end());
  attnscope::v1::FeedEvent event;
  event.set_request_id(request_id_);
  attnscope::v1::RequestStarted* started = event.mutable_started();
  started->set_rpc(rpc_);
  started->set_model(model);
  started->set_prompt_preview(finished_.prompt_preview());
  started->set_prompt_tokens(finished_.prompt_tokens());
  *started->mutable_prompt_ids() = finished_.prompt_ids();
  started->set_origin(finished_.origin());
  if (finished_.has_options()) *started->mutable_options() = finished_.options();
  *started->mutable_eviction_policies() = finished_.eviction_policies();
  feed_.Publish(std::move(event), model);
}

void RequestScope::PublishToken(const attnscope::v1::TokenEntropy& token) {
  attnscope::v1::FeedEvent event;
  event.set_request_id(request_id_);
  *event.mutable_token() = token;
  feed_.Publish(std::move(event), finished_.model());
}

grpc::Status RequestScope::Finish(const absl::Status& status) {
  const grpc::Status result = ToGrpcStatus(status);
  const std::string code = GrpcCodeName(result.error_code());
  const double seconds = ElapsedSeconds();
  metrics_.RecordRequest(rpc_, served_model_, metrics_origin(), code, seconds);
  finished_.set_status(code);
  finished_.set_error_message(std::string(status.message()));
  finished_.set_duration_seconds(seconds);
  if (!publish_) return result;
  attnscope::v1::FeedEvent event;
  event.set_request_id(request_id_);
  *event.mutable_finished() = finished_;
  feed_.Publish(std::move(event), finished_.model());
  return result;
}

std::string PromptPreview(const std::string& text, size_t max_chars) {
  const std::string valid = SanitizeUtf8(text);
  size_t chars = 0;
  for (size_t i = 0; i < valid.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(valid[i]) & 0xC0) != 0x80;
    if (starts && chars++ == max_chars) return valid.substr(0, i);
  }
  return valid;
}

}  // namespace attnscope::rpc
