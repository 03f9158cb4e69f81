#include "service/rpc/analyzer_service.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/status_codes.h"
#include "service/rpc/transport_security.h"

namespace attnscope::rpc {
namespace {

constexpr auto kFeedPoll = std::chrono::milliseconds(100);

}  // namespace

AnalyzerService::AnalyzerService(const ModelRegistry& models, metrics::ServiceMetrics& metrics,
                                 ServiceConfig config)
    : models_(models),
      metrics_(metrics),
      config_(config),
      admission_(config.max_concurrent, config.max_queue,
                 [this](int64_t in_flight, int64_t queued) {
                   metrics_.SetInFlight(in_flight);
                   metrics_.SetQueued(queued);
                 }),
      compute_(config.max_concurrent),
      client_streams_(config.max_streams_per_client),
      feed_(config.feed_queue, config.max_subscribers,
            [this](int64_t count) { metrics_.SetSubscribers(count); },
            [this](int64_t dropped) { metrics_.AddDroppedFeedEvents(dropped); }) {
  for (const ModelDescription& m : models_.Describe()) {
    metrics_.SetModelInfo(m.name, m.architecture, m.num_layers, m.num_heads, m.hidden_size,
                          m.vocab_size, m.max_positions);
  }
  metrics_.SetInFlight(0);
  metrics_.SetQueued(0);
  metrics_.SetSubscribers(0);
}

absl::Status AnalyzerService::Gate(grpc::ServerContext* context, size_t request_bytes,
                                   ClientStreams::Lease* lease) {
  if (absl::Status auth = CheckBearerToken(*context, config_.auth_token); !auth.ok()) return auth;
  if (absl::Status size = CheckMessageSize(request_bytes, config_.max_message_bytes); !size.ok()) {
    return size;
  }
  if (lease == nullptr) return absl::OkStatus();
  auto opened = client_streams_.Open(context->peer());
  if (!opened.ok()) return opened.status();
  *lease = *std::move(opened);
  return absl::OkStatus();
}

grpc::Status AnalyzerService::Refused(const std::string& rpc, const absl::Status& status,
                                      std::chrono::steady_clock::time_point start) {
  const grpc::Status result = ToGrpcStatus(status);
  metrics_.RecordRequest(rpc, "", metrics::ServiceMetrics::Origin::kUser,
                         GrpcCodeName(result.error_code()), SecondsSince(start));
  return result;
}

grpc::Status AnalyzerService::ListModels(grpc::ServerContext* context,
                                         const v1::ListModelsRequest* request,
                                         v1::ListModelsResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), nullptr); !refused.ok()) {
    return Refused("ListModels", refused, start);
  }
  for (const ModelDescription& m : models_.Describe()) *response->add_models() = ModelToProto(m);
  metrics_.RecordRequest("ListModels", "", metrics::ServiceMetrics::Origin::kUser, "OK",
                         SecondsSince(start));
  return grpc::Status::OK;
}

absl::StatusOr<AnalyzerService::Admitted> AnalyzerService::AdmitAndTokenize(
    RequestScope& scope, const engine::ModelBundle& bundle, const std::string& model_name,
    const PromptInput& input, v1::Timings* timings) {
  const auto queue_start = std::chrono::steady_clock::now();
  auto slot = admission_.Acquire([&] { return scope.ShouldStop(); }, scope.deadline());
  timings->set_queued_seconds(SecondsSince(queue_start));
  if (!slot.ok() && scope.drain_expired()) {
    return scope.StopStatus("while it waited for a free slot");
  }
  if (!slot.ok()) return slot.status();
  metrics_.RecordQueueWait(model_name, scope.metrics_origin(), timings->queued_seconds());
  const auto tokenize_start = std::chrono::steady_clock::now();
  auto prompt = ResolvePrompt(input, bundle, model_name, config_.max_prompt_tokens);
  timings->set_tokenize_seconds(SecondsSince(tokenize_start));
  if (!prompt.ok()) return prompt.status();
  return Admitted{std::move(*slot), std::move(*prompt)};
}

grpc::Status AnalyzerService::Analyze(grpc::ServerContext* context,
                                      const v1::AnalyzeRequest* request,
                                      grpc::ServerWriter<v1::AnalyzeEvent>* writer) {
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return Refused("Analyze", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Analyze", context, metrics_, feed_, drain_);
  const absl::Status status = RunAnalyze(scope, *request, writer);
  return scope.Finish(status);
}

grpc::Status AnalyzerService::Generate(grpc::ServerContext* context,
                                       const v1::GenerateRequest* request,
                                       grpc::ServerWriter<v1::GenerateEvent>* writer) {
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return Refused("Generate", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Generate", context, metrics_, feed_, drain_);
  const absl::Status status = RunGenerate(scope, *request, writer);
  return scope.Finish(status);
}

grpc::Status AnalyzerService::EvaluateEviction(grpc::ServerContext* context,
                                               const v1::EvaluateEvictionRequest* request,
                                               grpc::ServerWriter<v1::EvaluateEvictionEvent>* writer) {
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return Refused("EvaluateEviction", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("EvaluateEviction", context, metrics_, feed_, drain_);
  const absl::Status status = RunEvaluateEviction(scope, *request, writer);
  return scope.Finish(status);
}

grpc::Status AnalyzerService::Subscribe(grpc::ServerContext* context,
                                        const v1::SubscribeRequest* request,
                                        grpc::ServerWriter<v1::FeedEvent>* writer) {
  const auto start = std::chrono::steady_clock::now();
  std::string model;  // the label: only a served model's name
  auto finish = [&](const absl::Status& status) {
    const grpc::Status result = ToGrpcStatus(status);
    metrics_.RecordRequest("Subscribe", model, metrics::ServiceMetrics::Origin::kUser,
                           GrpcCodeName(result.error_code()), SecondsSince(start));
    return result;
  };
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return finish(refused);
  }
  if (!request->model().empty()) {
    if (auto found = models_.Find(request->model()); !found.ok()) return finish(found.status());
    model = models_.Resolve(request->model());
  }
  auto subscription = feed_.Subscribe({request->model(), request->include_token_entropy()});
  if (!subscription.ok()) return finish(subscription.status());
  // Headers go out now, so a client knows it is subscribed before any event.
  writer->SendInitialMetadata();
  while (!context->IsCancelled() && !(*subscription)->closed()) {
    std::optional<v1::FeedEvent> event = (*subscription)->Next(kFeedPoll);
    if (event.has_value() && !writer->Write(*event)) break;
  }
  if (context->IsCancelled()) return finish(absl::CancelledError("the subscriber went away"));
  return finish(absl::OkStatus());
}

}  // namespace attnscope::rpc
