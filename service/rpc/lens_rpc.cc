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
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

constexpr int kMaxLensTopK = 1000;

// A positions field's syntax ("", "last", "all", or indices and ranges),
// checked before the request takes a slot.
absl::Status CheckPositionsSyntax(const std::string& value, const std::string& field,
                                  bool all_allowed) {
  if (value.empty() || value == "last") return absl::OkStatus();
  if (value == "all") {
    if (all_allowed) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": takes \"last\" or a list such as 0,5,10-13, not \"all\" (L x T x T numbers)"));
  }
  return engine::ParseIndexList(value, field).status();
}

absl::StatusOr<std::vector<int64_t>> PositionsOf(const std::string& value,
                                                 const std::string& field, int64_t tokens,
                                                 bool all_as_empty) {
  return engine::ParsePromptPositions(value.empty() ? "last" : value, field, tokens,
                                      all_as_empty);
}

// What a Lens request asks for, checked against the model before any slot
// is taken; positions and text targets wait for the prompt.
absl::StatusOr<engine::LensSettings> LensSettingsOf(const v1::LensRequest& r,
                                                    const engine::ModelBundle& bundle,
                                                    model::Precision fallback) {
  engine::LensSettings s;
  s.lens = r.logit_lens();
  s.attribution = r.attribution();
  s.rollout = r.rollout();
  if (!s.lens && !s.attribution && !s.rollout) {
    return absl::InvalidArgumentError(
        "none of logit_lens, attribution or rollout is set: ask for at least one");
  }
  if (r.has_top_k()) {
    if (!s.lens) return absl::InvalidArgumentError("top_k: shapes the logit lens; set logit_lens");
    if (r.top_k() < 1 || r.top_k() > kMaxLensTopK) {
      return absl::InvalidArgumentError(
          absl::StrCat("top_k: ", r.top_k(), " is outside 1..", kMaxLensTopK));
    }
    s.lens_options.top_k = r.top_k();
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckPositionsSyntax(r.lens_positions(), "lens_positions", true));
  ATTNSCOPE_RETURN_IF_ERROR(
      CheckPositionsSyntax(r.attribution_positions(), "attribution_positions", true));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPositionsSyntax(r.rollout_queries(), "rollout_queries", false));
  for (const auto& [set, field, needs] :
       {std::tuple<bool, const char*, bool>{!r.lens_positions().empty(), "lens_positions", s.lens},
        {!r.attribution_positions().empty() || r.target_ids_size() > 0 ||
             !r.target_text().empty(),
         "attribution_positions, target_ids and target_text", s.attribution},
        {!r.rollout_queries().empty(), "rollout_queries", s.rollout}}) {
    if (set && !needs) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": set for a part of the run that was not asked for"));
    }
  }
  if (r.target_ids_size() > 0 && !r.target_text().empty()) {
    return absl::InvalidArgumentError("give the target as target_ids or as target_text, not both");
  }
  const int64_t vocab = bundle.config().vocab_size;
  for (int i = 0; i < r.target_ids_size(); ++i) {
    if (r.target_ids(i) < 0 || r.target_ids(i) >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("target_ids[", i, "]: ", r.target_ids(i),
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
  }
  s.attribution_options.targets.assign(r.target_ids().begin(), r.target_ids().end());
  if (r.query_block_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("query_block_size: ", r.query_block_size(), " must be >= 0"));
  }
  s.query_block_size = r.query_block_size();
  ATTNSCOPE_ASSIGN_OR_RETURN(s.precision, PrecisionOf(r.precision(), "precision", fallback));
  return s;
}

// The positions and the text target, now that the prompt is known.
absl::Status ResolveLensPrompt(const v1::LensRequest& r, const engine::ModelBundle& bundle,
                               int64_t tokens, engine::LensSettings& s) {
  if (s.lens) {
    ATTNSCOPE_ASSIGN_OR_RETURN(s.lens_options.positions,
                               PositionsOf(r.lens_positions(), "lens_positions", tokens, true));
  }
  if (s.attribution) {
    analysis::AttributionOptions& o = s.attribution_options;
    ATTNSCOPE_ASSIGN_OR_RETURN(
        o.positions, PositionsOf(r.attribution_positions(), "attribution_positions", tokens, false));
    if (static_cast<int64_t>(o.positions.size()) > o.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribution_positions: ", o.positions.size(), " positions; direct logit attribution "
          "keeps every layer's writes at each position until the pass ends, so it takes at most ",
          o.max_positions));
    }
    if (o.targets.size() > 1 && o.targets.size() != o.positions.size()) {
      return absl::InvalidArgumentError(absl::StrCat("target_ids: ", o.targets.size(),
                                                     " ids for ", o.positions.size(),
                                                     " positions; give one, or one per position"));
    }
    if (!r.target_text().empty()) {
      ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t id,
                                 engine::SingleTokenId(bundle, "target_text", r.target_text(),
                                                       "target_ids"));
      o.targets = {id};
    }
  }
  if (s.rollout) {
    ATTNSCOPE_ASSIGN_OR_RETURN(s.rollout_options.queries,
                               PositionsOf(r.rollout_queries(), "rollout_queries", tokens, true));
  }
  return absl::OkStatus();
}

// A patch request's prompt `which` ("clean" or "corrupted").
PromptInput PatchPrompt(const v1::PatchRequest& r, bool clean) {
  PromptInput in;
  if (clean) {
    if (r.clean_case() == v1::PatchRequest::kCleanText) in.text = &r.clean_text();
    if (r.clean_case() == v1::PatchRequest::kCleanIds) in.ids = &r.clean_ids();
  } else {
    if (r.corrupted_case() == v1::PatchRequest::kCorruptedText) in.text = &r.corrupted_text();
    if (r.corrupted_case() == v1::PatchRequest::kCorruptedIds) in.ids = &r.corrupted_ids();
  }
  if (r.has_add_special_tokens()) in.add_special_tokens = r.add_special_tokens();
  return in;
}

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::StatusOr<engine::PatchSettings> PatchSettingsOf(const v1::PatchRequest& r,
                                                      const engine::ModelBundle& bundle,
                                                      model::Precision fallback) {
  engine::PatchSettings s;
  switch (r.kind()) {
    case v1::PATCH_KIND_UNSPECIFIED:
    case v1::PATCH_KIND_HEADS:
      s.what = engine::PatchTarget::kHeads;
      break;
    case v1::PATCH_KIND_RESIDUAL:
      s.what = engine::PatchTarget::kResidual;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("kind: ", r.kind(), " is not a PatchKind"));
  }
  if (r.clean_case() == v1::PatchRequest::CLEAN_NOT_SET ||
      r.corrupted_case() == v1::PatchRequest::CORRUPTED_NOT_SET) {
    return absl::InvalidArgumentError(
        "clean and corrupted: give both prompts, each as text or as ids");
  }
  const int64_t vocab = bundle.config().vocab_size;
  for (const auto& [has_id, id, text, name] :
       {std::tuple<bool, int64_t, const std::string*, const char*>{
            r.has_target_a_id(), r.target_a_id(), &r.target_a_text(), "target_a"},
        {r.has_target_b_id(), r.target_b_id(), &r.target_b_text(), "target_b"}}) {
    if (has_id && !text->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("give ", name, " as ", name, "_id or as ", name, "_text, not both"));
    }
    if (has_id && (id < 0 || id >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "_id: ", id,
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
    if (!text->empty()) {
      ATTNSCOPE_ASSIGN_OR_RETURN(
          const int64_t resolved,
          engine::SingleTokenId(bundle, absl::StrCat(name, "_text"), *text, absl::StrCat(name, "_id")));
      (std::string(name) == "target_a" ? s.token_a : s.token_b) = resolved;
    } else if (has_id) {
      (std::string(name) == "target_a" ? s.token_a : s.token_b) = id;
    }
  }
  if (r.query_block_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("query_block_size: ", r.query_block_size(), " must be >= 0"));
  }
  s.query_block_size = r.query_block_size();
  ATTNSCOPE_ASSIGN_OR_RETURN(s.precision, PrecisionOf(r.precision(), "precision", fallback));
  return s;
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
  auto run = engine::RunLens(*bundle, prompt, settings);
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
  auto run = engine::RunPatching(*bundle, clean, *corrupted, settings);
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
