// AnalyzerService::RunEvaluateEviction: the StreamingLLM perplexity
// evaluation over gRPC. Streams the text's tokens, per-step progress and
// 64-step window perplexities of every policy, then the summary; the
// finished feed event carries the results for dashboards.
#include <chrono>
#include <cmath>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/engine/eviction_eval.h"
#include "service/engine/streaming_cache.h"
#include "service/rpc/analyzer_service.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"

namespace attnscope::rpc {
namespace {

constexpr int kWindowSteps = 64;

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// Policies, positions and max_tokens of a request, checked against the
// model before any slot is taken.
absl::StatusOr<engine::EvictionEvalSettings> SettingsOf(const v1::EvaluateEvictionRequest& r,
                                                        const engine::ModelBundle& bundle) {
  engine::EvictionEvalSettings s;
  if (r.policies_size() < 1 || r.policies_size() > engine::kMaxEvalPolicies) {
    return absl::InvalidArgumentError(absl::StrCat("policies: ", r.policies_size(),
                                                   " given; give between 1 and ",
                                                   engine::kMaxEvalPolicies));
  }
  for (int i = 0; i < r.policies_size(); ++i) {
    absl::StatusOr<engine::EvictionPolicy> p = engine::ParseEvictionPolicy(r.policies(i));
    if (!p.ok()) return Prefixed(p.status(), absl::StrCat("policies[", i, "]: "));
    s.policies.push_back(*p);
  }
  s.positions = engine::DefaultCachePositions(bundle.config());
  if (!r.positions().empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(s.positions, engine::ParseCachePositions(r.positions()));
  }
  ATTNSCOPE_RETURN_IF_ERROR(engine::CheckCachePositions(bundle.config(), s.positions));
  if (r.max_tokens() < 0 || r.max_tokens() == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_tokens: ", r.max_tokens(), " must be 0 (the whole text) or at least 2"));
  }
  s.report_kept_positions = r.include_kept_positions();
  return s;
}

PromptInput InputOf(const v1::EvaluateEvictionRequest& r) {
  PromptInput in;
  if (r.prompt_case() == v1::EvaluateEvictionRequest::kText) in.text = &r.text();
  if (r.prompt_case() == v1::EvaluateEvictionRequest::kIds) in.ids = &r.ids();
  if (r.has_add_special_tokens()) in.add_special_tokens = r.add_special_tokens();
  in.limit_to_positions = false;  // ValidateEvictionEval checks per policy
  return in;
}

v1::EvictionPolicyResult ResultToProto(const engine::EvictionRunResult& r) {
  v1::EvictionPolicyResult out;
  out.set_policy(r.policy);
  out.set_positions(r.positions);
  out.set_steps(static_cast<int32_t>(r.steps));
  out.mutable_nll()->Add(r.nll.begin(), r.nll.end());
  out.set_perplexity(r.perplexity);
  out.set_max_cache_tokens(static_cast<int32_t>(r.max_cache_tokens));
  out.set_max_cache_bytes(r.max_cache_bytes);
  out.set_seconds(r.seconds);
  out.set_tokens_per_second(r.tokens_per_second);
  return out;
}

// Turns engine progress into progress and window events.
class ProgressStream {
 public:
  ProgressStream(const engine::EvictionEvalSettings& settings,
                 std::function<void(const v1::EvaluateEvictionEvent&)> write)
      : settings_(settings), write_(std::move(write)) {}

  void OnStep(const engine::EvictionProgress& p) {
    v1::EvaluateEvictionEvent event;
    v1::EvictionProgress* out = event.mutable_progress();
    out->set_policy_index(p.policy_index);
    out->set_policy(engine::PolicyName(settings_.policies[p.policy_index]));
    out->set_steps_done(static_cast<int32_t>(p.steps_done));
    out->set_steps_total(static_cast<int32_t>(p.steps_total));
    out->set_nll(p.nll);
    out->set_running_perplexity(p.running_perplexity);
    out->set_cache_tokens(static_cast<int32_t>(p.cache_tokens));
    out->mutable_evicted_positions()->Add(p.evicted.begin(), p.evicted.end());
    out->mutable_kept_positions()->Add(p.kept_positions.begin(), p.kept_positions.end());
    out->set_tokens_per_second(p.seconds > 0 ? p.steps_done / p.seconds : 0.0);
    write_(event);
    window_sum_ += p.nll;
    ++window_steps_;
    if (window_steps_ == kWindowSteps || p.steps_done == p.steps_total) {
      v1::EvaluateEvictionEvent w;
      w.mutable_window()->set_policy_index(p.policy_index);
      w.mutable_window()->set_first_step(static_cast<int32_t>(p.steps_done - window_steps_));
      w.mutable_window()->set_steps(window_steps_);
      w.mutable_window()->set_perplexity(std::exp(window_sum_ / window_steps_));
      write_(w);
      window_sum_ = 0;
      window_steps_ = 0;
    }
  }

 private:
  const engine::EvictionEvalSettings& settings_;
  std::function<void(const v1::EvaluateEvictionEvent&)> write_;
  double window_sum_ = 0;
  int window_steps_ = 0;
};

std::string PolicyKind(const std::string& name) { return name.substr(0, name.find(':')); }

// The first n tokens of a prompt (every per-token vector cut alike).
void Truncate(engine::Prompt& p, size_t n) {
  auto cut = [n](auto& v) {
    if (v.size() > n) v.resize(n);
  };
  cut(p.ids);
  cut(p.tokens);
  cut(p.token_bytes);
  cut(p.offsets);
  cut(p.special);
  cut(p.from_template);
}

}  // namespace

absl::Status AnalyzerService::RunEvaluateEviction(
    RequestScope& scope, const v1::EvaluateEvictionRequest& request,
    grpc::ServerWriter<v1::EvaluateEvictionEvent>* writer) {
  if (scope.ShouldStop()) return scope.StopStatus("before the request started");
  const std::string model_name = models_.Resolve(request.model());
  scope.finished().set_model(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(const engine::ModelBundle* bundle, models_.Find(request.model()));
  scope.SetServedModel(model_name);
  ATTNSCOPE_ASSIGN_OR_RETURN(engine::EvictionEvalSettings settings, SettingsOf(request, *bundle));
  *scope.finished().mutable_eviction_policies() = request.policies();
  scope.finished().set_eviction_positions(engine::CachePositionsName(settings.positions));
  v1::Timings timings;
  ATTNSCOPE_ASSIGN_OR_RETURN(Admitted admitted, AdmitAndTokenize(scope, *bundle, model_name,
                                                                 InputOf(request), &timings));
  engine::Prompt& prompt = admitted.prompt;
  if (request.max_tokens() > 0 && static_cast<int64_t>(prompt.ids.size()) > request.max_tokens()) {
    Truncate(prompt, static_cast<size_t>(request.max_tokens()));
  }
  ATTNSCOPE_RETURN_IF_ERROR(engine::ValidateEvictionEval(*bundle, prompt.ids, settings));
  scope.Started(model_name, prompt.text, prompt.ids);

  bool write_failed = false;
  auto write = [&](const v1::EvaluateEvictionEvent& event) {
    scope.MarkFirstEvent();
    if (!write_failed && !writer->Write(event)) write_failed = true;
  };
  v1::EvaluateEvictionEvent first;
  *first.mutable_text() = TokensToProto(prompt);
  write(first);
  settings.should_stop = [&] { return write_failed || scope.ShouldStop(); };
  ProgressStream progress(settings, write);
  const auto compute_start = std::chrono::steady_clock::now();
  auto results = compute_.Call([&] {
    return engine::EvaluateEviction(*bundle, prompt.ids, settings,
                                    [&](const engine::EvictionProgress& p) { progress.OnStep(p); });
  });
  timings.set_compute_seconds(SecondsSince(compute_start));
  if (write_failed || scope.ShouldStop()) return scope.StopStatus("during the evaluation");
  if (!results.ok()) return results.status();

  v1::EvaluateEvictionEvent done;
  v1::EvaluateEvictionSummary* summary = done.mutable_summary();
  for (const engine::EvictionRunResult& r : *results) {
    *summary->add_results() = ResultToProto(r);
    metrics_.RecordEvictionRun(model_name, PolicyKind(r.policy), r.steps, r.perplexity);
  }
  metrics_.RecordPromptTokens(model_name, static_cast<int64_t>(prompt.ids.size()));
  timings.set_first_event_seconds(scope.FirstEventSeconds());
  timings.set_total_seconds(scope.ElapsedSeconds());
  *summary->mutable_timings() = timings;
  *scope.finished().mutable_eviction() = *summary;
  write(done);
  if (write_failed) return scope.StopStatus("before the summary was sent");
  return absl::OkStatus();
}

}  // namespace attnscope::rpc
