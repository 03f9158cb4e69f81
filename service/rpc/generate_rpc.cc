// AnalyzerService::RunGenerate: the prompt's tokens, one event per generated
// token as it is produced (also on the feed for subscribers that asked for
// token entropies), then the summary.
#include <algorithm>
#include <chrono>

#include "service/core/status_macros.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

void RecordOutcome(const std::string& model, const engine::GenerationResult& result,
                   int64_t prompt_tokens, double seconds, metrics::ServiceMetrics& metrics,
                   v1::RequestFinished& finished) {
  metrics.RecordPromptTokens(model, prompt_tokens);
  metrics.RecordGeneration(model, static_cast<int64_t>(result.tokens.size()), seconds);
  double max_entropy = 0;
  for (double e : result.prompt_entropy_normalized) {
    max_entropy = std::max(max_entropy, e);
    finished.add_entropy_normalized(e);
  }
  for (const engine::GeneratedToken& t : result.tokens) {
    metrics.RecordNextTokenEntropy(model, t.entropy_normalized);
    max_entropy = std::max(max_entropy, t.entropy_normalized);
    finished.add_entropy_normalized(t.entropy_normalized);
  }
  finished.set_generated_tokens(static_cast<int32_t>(result.tokens.size()));
  finished.set_max_entropy(max_entropy);
}

v1::TokenEntropy FeedToken(const engine::GeneratedToken& token) {
  v1::TokenEntropy out;
  out.set_index(token.index);
  out.set_text(token.text);
  out.set_entropy_nats(token.entropy_nats);
  out.set_entropy_normalized(token.entropy_normalized);
  return out;
}

v1::GenerateEvent SummaryEvent(const engine::GenerationResult& result, const v1::Timings& timings) {
  v1::GenerateEvent event;
  v1::GenerateSummary* summary = event.mutable_summary();
  summary->set_text(result.text);
  summary->set_generated_tokens(static_cast<int32_t>(result.tokens.size()));
  summary->set_stop_reason(result.stop_reason);
  const double seconds = timings.compute_seconds();
  summary->set_tokens_per_second(
      seconds > 0 ? static_cast<double>(result.tokens.size()) / seconds : 0.0);
  *summary->mutable_timings() = timings;
  return event;
}

}  // namespace

absl::Status AnalyzerService::RunGenerate(RequestScope& scope, const v1::GenerateRequest& request,
                                          grpc::ServerWriter<v1::GenerateEvent>* writer) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  const std::string model_name = models_.Resolve(request.model());
  scope.finished().set_model(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  scope.SetServedModel(model_name);
  engine::GenerationSettings settings = GenerationSettingsOf(request);
  ATTNSCOPE_RETURN_IF_ERROR(ApplyCachePolicy(request, settings));
  ATTNSCOPE_RETURN_IF_ERROR(CheckNewTokenLimit(settings.max_new_tokens, config_.max_new_tokens));
  ATTNSCOPE_ASSIGN_OR_RETURN(settings.precision, PrecisionOf(request.precision(), "precision",
                                                             config_.default_precision));
  v1::Timings timings;
  ATTNSCOPE_ASSIGN_OR_RETURN(Admitted admitted,
                             AdmitAndTokenize(scope, *bundle, model_name, PromptOf(request),
                                              &timings));
  const engine::Prompt& prompt = admitted.prompt;
  ATTNSCOPE_RETURN_IF_ERROR(engine::ValidateGenerationSettings(*bundle, prompt, settings));
  scope.Started(model_name, prompt.text, prompt.ids);

  bool write_failed = false;
  auto write = [&](const v1::GenerateEvent& event) {
    scope.MarkFirstEvent();
    if (!write_failed && !writer->Write(event)) write_failed = true;
  };
  v1::GenerateEvent first;
  *first.mutable_prompt() = TokensToProto(prompt);
  write(first);
  settings.should_stop = [&] { return write_failed || scope.ShouldStop(); };
  const auto compute_start = std::chrono::steady_clock::now();
  auto result = compute_.Call([&] {
    return engine::Generate(*bundle, prompt, settings, [&](const engine::GeneratedToken& t) {
      v1::GenerateEvent event;
      *event.mutable_token() = GeneratedTokenToProto(t);
      write(event);
      scope.PublishToken(FeedToken(t));
    });
  });
  const double compute = SecondsSince(compute_start);
  timings.set_compute_seconds(compute);
  if (write_failed || scope.ShouldStop()) {
    return scope.StopStatus("during the generation");
  }
  if (!result.ok()) return result.status();

  RecordOutcome(model_name, *result, static_cast<int64_t>(prompt.ids.size()), compute, metrics_,
                scope.finished());
  timings.set_first_event_seconds(scope.FirstEventSeconds());
  timings.set_total_seconds(scope.ElapsedSeconds());
  write(SummaryEvent(*result, timings));
  if (write_failed) return scope.StopStatus("before the summary was sent");
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
