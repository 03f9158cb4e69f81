#include "service/rpc/probe_validation.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

namespace v1 = ::attnscope::v1;

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::StatusOr<engine::Probe> RandomProbe(const v1::RandomProbe& random,
                                          const model::ModelConfig& config) {
  engine::ProbeSpec spec;
  spec.n = random.n();
  spec.num_sequences = random.num_sequences();
  spec.seed = random.seed();
  auto probe = engine::MakeRandomProbe(config, spec);
  if (!probe.ok()) return Prefixed(probe.status(), "probe.random: ");
  return probe;
}

absl::StatusOr<engine::Probe> GivenProbe(const v1::ProbeSequences& given,
                                         const model::ModelConfig& config) {
  if (given.sequences().empty()) {
    return absl::InvalidArgumentError("probe.sequences: no sequences; give at least one");
  }
  if (given.sequences_size() > engine::kMaxProbeSequences) {
    return absl::InvalidArgumentError(absl::StrCat("probe.sequences: ", given.sequences_size(),
                                                   " sequences is over the limit of ",
                                                   engine::kMaxProbeSequences));
  }
  engine::Probe probe;
  probe.n = given.n() != 0 ? given.n() : (given.sequences(0).ids_size() - 1) / 2;
  for (const v1::TokenIds& ids : given.sequences()) {
    probe.sequences.emplace_back(ids.ids().begin(), ids.ids().end());
  }
  ATTNSCOPE_RETURN_IF_ERROR(Prefixed(engine::ValidateProbe(config, probe), "probe.sequences: "));
  return probe;
}

absl::StatusOr<engine::Probe> TextProbe(const std::string& text, const engine::ModelBundle& bundle,
                                        const std::string& model_name) {
  PromptInput input;
  input.text = &text;
  input.add_special_tokens = false;  // the probe's BOS is its own
  auto prompt = ResolvePrompt(input, bundle, model_name, 0);
  if (!prompt.ok()) return Prefixed(prompt.status(), "probe.");
  auto probe = engine::MakeRepeatedProbe(bundle.config(), prompt->ids);
  if (!probe.ok()) return Prefixed(probe.status(), "probe.text: ");
  return probe;
}

}  // namespace

absl::StatusOr<engine::Probe> ResolveProbe(const v1::InductionProbe& request,
                                           const engine::ModelBundle& bundle,
                                           const std::string& model_name,
                                           int64_t max_prompt_tokens) {
  absl::StatusOr<engine::Probe> resolved;
  if (request.has_random()) {
    resolved = RandomProbe(request.random(), bundle.config());
  } else if (request.has_sequences()) {
    resolved = GivenProbe(request.sequences(), bundle.config());
  } else if (request.source_case() == v1::InductionProbe::kText) {
    resolved = TextProbe(request.text(), bundle, model_name);
  } else {
    return absl::InvalidArgumentError(
        "probe: none of random, sequences or text was given; set one of them");
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(engine::Probe probe, std::move(resolved));
  const int64_t tokens = 2 * probe.n + 1;
  if (max_prompt_tokens > 0 && tokens > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe: T = 2n+1 = ", tokens, " tokens is over the server's limit of ", max_prompt_tokens,
        " tokens (--max-prompt-tokens); use a smaller n or a shorter text"));
  }
  return probe;
}

absl::StatusOr<AblationPlan> PlanAblation(const v1::AblateRequest& request,
                                          const model::ModelConfig& config) {
  AblationPlan plan;
  if (request.heads().empty()) {
    return absl::InvalidArgumentError("heads: no heads to ablate; list at least one");
  }
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < request.heads_size(); ++i) {
    const model::HeadRef head{request.heads(i).layer(), request.heads(i).head()};
    ATTNSCOPE_RETURN_IF_ERROR(
        Prefixed(engine::CheckHeads(config, {head}), absl::StrCat("heads[", i, "]: ")));
    if (!seen.insert({head.layer, head.head}).second) {
      return absl::InvalidArgumentError(absl::StrCat("heads[", i, "]: head ",
                                                     engine::HeadName(head), " is listed twice"));
    }
    plan.heads.push_back(head);
  }
  switch (request.mode()) {
    case v1::ABLATION_MODE_UNSPECIFIED:
    case v1::ABLATION_MODE_ZERO:
      plan.mode = model::AblationMode::kZero;
      break;
    case v1::ABLATION_MODE_MEAN:
      plan.mode = model::AblationMode::kMean;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "mode: ", static_cast<int>(request.mode()),
          " is not an AblationMode; use ABLATION_MODE_ZERO or ABLATION_MODE_MEAN"));
  }
  return plan;
}

}  // namespace attnscope::rpc
