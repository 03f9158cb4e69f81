#include "service/rpc/lens_validation.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/engine/prompt.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::rpc {

namespace v1 = ::attnscope::v1;

namespace {

// query_block_size (>= 0) and precision (or the server's default), the
// fields every long run's request shares.
absl::Status ComputeFieldsOf(int64_t block_size, const std::string& precision,
                             model::Precision fallback, int64_t* block_out,
                             std::optional<model::Precision>* precision_out) {
  if (block_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("query_block_size: ", block_size, " must be >= 0"));
  }
  *block_out = block_size;
  ATTNSCOPE_ASSIGN_OR_RETURN(*precision_out, PrecisionOf(precision, "precision", fallback));
  return absl::OkStatus();
}

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

}  // namespace

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
  ATTNSCOPE_RETURN_IF_ERROR(
      ComputeFieldsOf(r.query_block_size(), r.precision(), fallback, &s.query_block_size,
                      &s.precision));
  return s;
}

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
  ATTNSCOPE_RETURN_IF_ERROR(
      ComputeFieldsOf(r.query_block_size(), r.precision(), fallback, &s.query_block_size,
                      &s.precision));
  return s;
}

}  // namespace attnscope::rpc
