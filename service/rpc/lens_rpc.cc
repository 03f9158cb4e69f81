// AnalyzerService::Lens and ::Patch: the logit lens, direct logit
// attribution and attention rollout of one prompt, and activation patching
// of a clean and a corrupted prompt, streamed as they are computed;
// admitted like Analyze, cancellable between layers, kept off the feed.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/engine/tensor_pieces.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/lens_convert.h"
#include "service/rpc/lens_validation.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

grpc::Status AnalyzerService::Lens(grpc::ServerContext* context, const v1::LensRequest* request,
                                   grpc::ServerWriter<v1::LensEvent>* writer) {
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return Refused("Lens", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Lens", context, metrics_, feed_, drain_);
  scope.KeepOffFeed();
  return scope.Finish(RunLensCall(scope, *request, writer));
}

grpc::Status AnalyzerService::Patch(grpc::ServerContext* context, const v1::PatchRequest* request,
                                    grpc::ServerWriter<v1::PatchEvent>* writer) {
  ClientStreams::Lease lease;
  if (absl::Status refused = Gate(context, request->ByteSizeLong(), &lease); !refused.ok()) {
    return Refused("Patch", refused, std::chrono::steady_clock::now());
  }
  RequestScope scope("Patch", context, metrics_, feed_, drain_);
  scope.KeepOffFeed();
  return scope.Finish(RunPatchCall(scope, *request, writer));
}

absl::Status AnalyzerService::RunLensCall(RequestScope& scope, const v1::LensRequest& request,
                                          grpc::ServerWriter<v1::LensEvent>* writer) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  const std::string model_name = models_.Resolve(request.model());
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(engine::LensSettings settings,
                             LensSettingsOf(request, *bundle, config_.default_precision));
  v1::Timings timings;
  ATTNSCOPE_ASSIGN_OR_RETURN(Admitted admitted, AdmitAndTokenize(scope, *bundle, model_name,
                                                                 PromptOf(request), &timings));
  const engine::Prompt& prompt = admitted.prompt;
  const auto tokens = static_cast<int64_t>(prompt.ids.size());
  ATTNSCOPE_RETURN_IF_ERROR(ResolveLensPrompt(request, *bundle, tokens, settings));

  bool write_failed = false;
  auto write = [&](const v1::LensEvent& event) {
    scope.MarkFirstEvent();
    if (!write_failed && !writer->Write(event)) write_failed = true;
  };
  v1::LensEvent first;
  *first.mutable_tokens() = TokensToProto(prompt);
  write(first);
  // The lens positions: every position when the list is empty.
  std::vector<int64_t> lens_positions = settings.lens_options.positions;
  if (lens_positions.empty()) {
    for (int64_t i = 0; i < tokens; ++i) lens_positions.push_back(i);
  }
  settings.on_lens_state = [&](int state, const std::vector<analysis::LensCell>& cells) {
    for (v1::LensState& piece : LensStatesToProto(state, lens_positions, cells)) {
      v1::LensEvent event;
      *event.mutable_lens() = std::move(piece);
      write(event);
    }
  };
  settings.should_stop = [&] { return write_failed || scope.ShouldStop(); };
  const auto compute_start = std::chrono::steady_clock::now();
  auto run = compute_.Call([&] { return engine::RunLens(*bundle, prompt, settings); });
  timings.set_compute_seconds(SecondsSince(compute_start));
  if (write_failed || scope.ShouldStop()) return scope.StopStatus("during the forward pass");
  if (!run.ok()) return run.status();

  const model::ModelConfig& config = bundle->config();
  if (settings.attribution) {
    for (size_t k = 0; k < run->attribution.positions.size(); ++k) {
      v1::LensEvent event;
      *event.mutable_attribution() =
          AttributionToProto(run->attribution.positions[k], run->target_tokens[k]);
      write(event);
    }
  }
  if (run->rollout.has_value()) {
    for (v1::RolloutRow& row : RolloutToProto(*run->rollout)) {
      v1::LensEvent event;
      *event.mutable_rollout() = std::move(row);
      write(event);
    }
  }
  metrics_.RecordPromptTokens(model_name, tokens);
  v1::LensEvent done;
  v1::LensSummary* summary = done.mutable_summary();
  summary->set_model(model_name);
  summary->set_num_layers(static_cast<int32_t>(config.num_layers));
  summary->set_num_heads(static_cast<int32_t>(config.num_heads));
  summary->set_vocab_size(config.vocab_size);
  if (settings.lens) summary->mutable_lens_positions()->Add(lens_positions.begin(), lens_positions.end());
  timings.set_first_event_seconds(scope.FirstEventSeconds());
  timings.set_total_seconds(scope.ElapsedSeconds());
  *summary->mutable_timings() = timings;
  write(done);
  if (write_failed) return scope.StopStatus("before the summary was sent");
  return absl::OkStatus();
}

absl::Status AnalyzerService::RunPatchCall(RequestScope& scope, const v1::PatchRequest& request,
                                           grpc::ServerWriter<v1::PatchEvent>* writer) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  const std::string model_name = models_.Resolve(request.model());
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(engine::PatchSettings settings,
                             PatchSettingsOf(request, *bundle, config_.default_precision));
  v1::Timings timings;
  ATTNSCOPE_ASSIGN_OR_RETURN(Admitted admitted, AdmitAndTokenize(scope, *bundle, model_name,
                                                                 PatchPrompt(request, true),
                                                                 &timings));
  const engine::Prompt& clean = admitted.prompt;
  auto corrupted =
      ResolvePrompt(PatchPrompt(request, false), *bundle, model_name, config_.max_prompt_tokens);
  if (!corrupted.ok()) return Prefixed(corrupted.status(), "corrupted: ");

  bool write_failed = false;
  auto write = [&](const v1::PatchEvent& event) {
    scope.MarkFirstEvent();
    if (!write_failed && !writer->Write(event)) write_failed = true;
  };
  const model::ModelConfig& config = bundle->config();
  settings.on_baseline = [&](const engine::PatchRun& b) {
    v1::PatchEvent event;
    v1::PatchBaseline* out = event.mutable_baseline();
    *out->mutable_clean() = TokensToProto(clean);
    *out->mutable_corrupted() = TokensToProto(*corrupted);
    out->set_kind(PatchKindToProto(b.what));
    out->set_target_a(b.token_a);
    out->set_target_b(b.token_b);
    out->set_target_a_token(b.text_a);
    out->set_target_b_token(b.text_b);
    out->set_clean_metric(b.clean_metric);
    out->set_corrupted_metric(b.corrupted_metric);
    out->set_num_layers(static_cast<int32_t>(config.num_layers));
    out->set_num_columns(static_cast<int32_t>(
        b.what == engine::PatchTarget::kHeads ? config.num_heads : b.num_tokens));
    write(event);
  };
  settings.progress = [&](const engine::PatchStep& step) {
    v1::PatchEvent event;
    *event.mutable_step() = PatchStepToProto(step);
    write(event);
  };
  settings.should_stop = [&] { return write_failed || scope.ShouldStop(); };
  const auto compute_start = std::chrono::steady_clock::now();
  auto run =
      compute_.Call([&] { return engine::RunPatching(*bundle, clean, *corrupted, settings); });
  timings.set_compute_seconds(SecondsSince(compute_start));
  if (write_failed || scope.ShouldStop()) return scope.StopStatus("during the patched passes");
  if (!run.ok()) return run.status();
  metrics_.RecordPromptTokens(model_name, static_cast<int64_t>(clean.ids.size()));
  v1::PatchEvent done;
  done.mutable_summary()->set_model(model_name);
  done.mutable_summary()->set_passes(run->passes);
  timings.set_first_event_seconds(scope.FirstEventSeconds());
  timings.set_total_seconds(scope.ElapsedSeconds());
  *done.mutable_summary()->mutable_timings() = timings;
  write(done);
  if (write_failed) return scope.StopStatus("before the summary was sent");
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
