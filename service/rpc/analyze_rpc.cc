// AnalyzerService::RunAnalyze: tokens, then one LayerStats (and the requested
// attention chunks) per layer as soon as the layer is computed, then the
// summary.
#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/layer_streamer.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

// Per-prompt numbers for the metrics (users' requests only: a dashboard's
// detail fetch repeats a prompt already counted) and the finished feed event.
void RecordOutcome(const std::string& model, const analysis::PromptStats& s, bool count,
                   metrics::ServiceMetrics& metrics, v1::RequestFinished& finished) {
  double last_mass = 0;
  if (!s.first_token_mass.empty() && !s.first_token_mass.back().empty()) {
    for (double m : s.first_token_mass.back()) last_mass += m;
    last_mass /= static_cast<double>(s.first_token_mass.back().size());
  }
  if (count) {
    metrics.RecordPromptTokens(model, s.num_tokens);
    metrics.RecordAnalysis(model, s.health, static_cast<int64_t>(s.sinks.size()), last_mass,
                           s.massive_ratio);
  }
  double max_entropy = 0;
  for (double e : s.next_token_entropy_normalized) {
    if (count) metrics.RecordNextTokenEntropy(model, e);
    max_entropy = std::max(max_entropy, e);
    finished.add_entropy_normalized(e);
  }
  finished.set_health(s.health);
  finished.set_sink_count(static_cast<int32_t>(s.sinks.size()));
  finished.set_max_entropy(max_entropy);
}

}  // namespace

absl::Status AnalyzerService::RunAnalyze(RequestScope& scope, const v1::AnalyzeRequest& request,
                                         grpc::ServerWriter<v1::AnalyzeEvent>* writer) {
  // Origin first: a dashboard's own request cancelled before it started
  // must still read as the dashboard's in the feed and the metrics.
  scope.SetOrigin(request.origin());
  scope.SetOptions(request.options());
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  const std::string model_name = models_.Resolve(request.model());
  scope.finished().set_model(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  scope.SetServedModel(model_name);
  AnalyzeLimits limits;
  limits.chunk_bytes = config_.tensor_chunk_bytes;
  limits.default_precision = config_.default_precision;
  limits.max_attention_bytes = config_.max_attention_bytes;
  ATTNSCOPE_ASSIGN_OR_RETURN(AnalyzePlan plan,
                             PlanAnalysis(request.options(), *bundle, model_name, limits));
  v1::Timings timings;
  ATTNSCOPE_ASSIGN_OR_RETURN(Admitted admitted,
                             AdmitAndTokenize(scope, *bundle, model_name, PromptOf(request),
                                              &timings));
  const engine::Prompt& prompt = admitted.prompt;
  ATTNSCOPE_RETURN_IF_ERROR(plan.CheckPromptLength(static_cast<int64_t>(prompt.ids.size())));
  scope.Started(model_name, prompt.text, prompt.ids);

  // The feed's finished event carries the tokens, layers and summary, so a
  // dashboard shows the request without analyzing it again.
  // The pass's progress in the metrics: its layers pending until each is
  // computed; those it does not reach (an error, a cancel) leave with it.
  const model::ModelConfig& config = bundle->config();
  int64_t layers_done = 0;
  metrics_.AddAnalysisLayersPending(model_name, config.num_layers);
  struct Unfinished {
    std::function<void()> leave;
    ~Unfinished() { leave(); }
  } unfinished{[&] { metrics_.AddAnalysisLayersPending(model_name, -(config.num_layers - layers_done)); }};
  auto write = [&](const v1::AnalyzeEvent& event) {
    scope.MarkFirstEvent();
    if (event.has_layer()) {
      *scope.finished().add_layers() = event.layer();
      ++layers_done;
      metrics_.AddAnalysisLayersDone(model_name, 1);
    }
    return writer->Write(event);
  };
  v1::AnalyzeEvent tokens;
  *tokens.mutable_tokens() = TokensToProto(prompt);
  *scope.finished().mutable_tokens() = tokens.tokens();
  if (!write(tokens)) return scope.StopStatus("before the tokens were sent");

  LayerStreamer streamer(config.num_layers, config.num_heads, plan.stream, write);
  plan.settings.extra_observers.clear();
  streamer.AttachTo(plan.settings);
  plan.settings.should_stop = [&] { return streamer.failed() || scope.ShouldStop(); };
  const auto compute_start = std::chrono::steady_clock::now();
  auto run = compute_.Call([&] { return engine::RunAnalysis(*bundle, prompt, plan.settings); });
  timings.set_compute_seconds(SecondsSince(compute_start));
  if (streamer.failed() || scope.ShouldStop()) {
    return scope.StopStatus(absl::StrCat("after ", streamer.layers_emitted(), " of ",
                                         config.num_layers, " layers"));
  }
  if (!run.ok()) return run.status();

  RecordOutcome(model_name, run->stats, request.origin() != v1::REQUEST_ORIGIN_DASHBOARD, metrics_,
                scope.finished());
  v1::AnalyzeEvent summary;
  *summary.mutable_summary() = SummaryToProto(run->stats, run->structure, prompt);
  summary.mutable_summary()->set_model(model_name);
  timings.set_first_event_seconds(scope.FirstEventSeconds());
  timings.set_total_seconds(scope.ElapsedSeconds());
  *summary.mutable_summary()->mutable_timings() = std::move(timings);
  *scope.finished().mutable_summary() = summary.summary();
  if (!write(summary)) return scope.StopStatus("before the summary was sent");
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
