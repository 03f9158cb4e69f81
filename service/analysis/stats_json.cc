#include "service/analysis/stats_json.h"

#include <cmath>
#include <vector>

namespace attnscope::analysis {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json Vector(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) out.push_back(Number(v));
  return out;
}

nlohmann::json Matrix(const std::vector<std::vector<double>>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) out.push_back(Vector(row));
  return out;
}

}  // namespace

nlohmann::json StatsToJson(const PromptStats& stats) {
  nlohmann::json j;
  j["sink_score"] = Matrix(stats.sink_score);
  j["first_token_mass"] = Matrix(stats.first_token_mass);
  j["back_half_sink_share"] = Number(stats.back_half_sink_share);
  j["first_token_importance"] = Matrix(stats.first_token_importance);
  j["sink_epsilon"] = Number(stats.sink_epsilon);
  j["sink_eps"] = Number(stats.sink_eps);
  j["massive"] = {{"max_norm", Vector(stats.max_norm)},
                  {"ratio_first_to_median_rest", Number(stats.massive_ratio)},
                  {"argmax_token", stats.massive_argmax}};
  j["token_norms"] = Matrix(stats.token_norms);
  j["received"] = Vector(stats.received);
  j["z"] = Vector(stats.z);
  j["structural"] = stats.structural;
  j["threshold"] = Number(stats.threshold);
  j["sinks"] = stats.sinks;
  j["health"] = Number(stats.health);
  j["next_token_entropy_nats"] = Vector(stats.next_token_entropy_nats);
  j["next_token_entropy_normalized"] = Vector(stats.next_token_entropy_normalized);
  j["attention_entropy"] = Matrix(stats.attention_entropy);
  j["prev_token_score"] = Matrix(stats.prev_token_score);
  if (!stats.value_weighted_raw.empty()) {
    j["value_weighted_first_token_share"] = {
        {"raw", Matrix(stats.value_weighted_raw)},
        {"normalized", Matrix(stats.value_weighted_normalized)}};
  }
  j["expected_sinks"] = stats.expected_sinks;
  j["next_token_surprisal_nats"] = Vector(stats.next_token_surprisal_nats);
  nlohmann::json top = nlohmann::json::array();
  for (const auto& position : stats.top_predictions) {
    nlohmann::json row = nlohmann::json::array();
    for (const Prediction& p : position) {
      row.push_back({{"id", p.id}, {"token", p.token}, {"p", Number(p.p)}});
    }
    top.push_back(std::move(row));
  }
  j["top_predictions"] = std::move(top);
  if (!stats.induction_score.empty()) j["induction_score"] = Matrix(stats.induction_score);
  return j;
}

}  // namespace attnscope::analysis
