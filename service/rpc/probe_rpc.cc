// AnalyzerService::ScanHeads and ::Ablate: the induction probe of
// engine/head_scan.h on a served model, admitted like Analyze, cancellable
// between layers, kept off the feed.
#include <chrono>
#include <utility>

#include "service/core/status_macros.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/head_scan_convert.h"
#include "service/rpc/probe_validation.h"

namespace attnscope::rpc {

absl::StatusOr<AdmissionController::Slot> AnalyzerService::AdmitSlot(
    RequestScope& scope, const std::string& model_name) {
  const auto start = std::chrono::steady_clock::now();
  auto slot = admission_.Acquire([&] { return scope.ShouldStop(); }, scope.deadline());
  // A client whose deadline passes while queued cancels a moment before our
  // copy of the deadline: StopStatus tells the two apart.
  if (!slot.ok() && scope.ShouldStop()) return scope.StopStatus("while queued for a slot");
  if (!slot.ok()) return slot.status();
  metrics_.RecordQueueWait(model_name, scope.metrics_origin(), SecondsSince(start));
  return slot;
}

grpc::Status AnalyzerService::ScanHeads(grpc::ServerContext* context,
                                        const v1::HeadScanRequest* request,
                                        v1::HeadScanResponse* response) {
  // The bearer token and the message size, as for every other call.
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), nullptr); !refused.ok()) {
    return Refused("ScanHeads", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("ScanHeads", context, metrics_, feed_, drain_);
  scope.KeepOffFeed();
  return scope.Finish(RunScanHeads(scope, *request, response));
}

grpc::Status AnalyzerService::Ablate(grpc::ServerContext* context,
                                     const v1::AblateRequest* request,
                                     v1::AblateResponse* response) {
  // The bearer token and the message size, as for every other call.
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), nullptr); !refused.ok()) {
    return Refused("Ablate", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Ablate", context, metrics_, feed_, drain_);
  scope.KeepOffFeed();
  return scope.Finish(RunAblate(scope, *request, response));
}

absl::Status AnalyzerService::RunScanHeads(RequestScope& scope, const v1::HeadScanRequest& request,
                                           v1::HeadScanResponse* response) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  const std::string model_name = models_.Resolve(request.model());
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(
      const engine::Probe probe,
      ResolveProbe(request.probe(), *bundle, model_name, config_.max_prompt_tokens));
  ATTNSCOPE_ASSIGN_OR_RETURN(AdmissionController::Slot slot, AdmitSlot(scope, model_name));
  const auto start = std::chrono::steady_clock::now();
  auto scan = compute_.Call(
      [&] { return engine::ScanHeads(*bundle->model, probe, 0, [&] { return scope.ShouldStop(); }); });
  if (scope.ShouldStop()) return scope.StopStatus("during the forward pass");
  if (!scan.ok()) return scan.status();
  const model::ModelConfig& config = bundle->config();
  response->set_model(model_name);
  *response->mutable_probe() = ProbeRunToProto(probe);
  HeadScanToProto(*scan, static_cast<int>(config.num_layers), static_cast<int>(config.num_heads),
                  response);
  response->set_compute_seconds(SecondsSince(start));
  return absl::OkStatus();
}

absl::Status AnalyzerService::RunAblate(RequestScope& scope, const v1::AblateRequest& request,
                                        v1::AblateResponse* response) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  const std::string model_name = models_.Resolve(request.model());
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(const AblationPlan plan, PlanAblation(request, bundle->config()));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      const engine::Probe probe,
      ResolveProbe(request.probe(), *bundle, model_name, config_.max_prompt_tokens));
  ATTNSCOPE_ASSIGN_OR_RETURN(AdmissionController::Slot slot, AdmitSlot(scope, model_name));
  const auto start = std::chrono::steady_clock::now();
  auto rows = compute_.Call([&] {
    return engine::AblationTable(*bundle->model, probe, plan.heads, plan.mode,
                                 [&] { return scope.ShouldStop(); });
  });
  if (scope.ShouldStop()) return scope.StopStatus("during the forward passes");
  if (!rows.ok()) return rows.status();
  response->set_model(model_name);
  *response->mutable_probe() = ProbeRunToProto(probe);
  AblationRowsToProto(*rows, response);
  response->set_compute_seconds(SecondsSince(start));
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
