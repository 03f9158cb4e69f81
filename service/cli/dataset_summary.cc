#include "service/cli/dataset_summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

using nlohmann::json;

json Number(double v) { return std::isfinite(v) ? json(v) : json(); }

json GridJson(const Grid& grid) {
  json out = json::array();
  for (const auto& row : grid) {
    json r = json::array();
    for (double v : row) r.push_back(Number(v));
    out.push_back(std::move(r));
  }
  return out;
}

// Lower quantile q of sorted values: element floor(q (n - 1)).
double Quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))];
}

Distribution Distribute(std::vector<double> values, double low, double high, int bins) {
  Distribution d;
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  d.count = static_cast<int64_t>(values.size());
  d.bins.assign(static_cast<size_t>(bins), 0);
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  d.min = values.front();
  d.max = values.back();
  d.p10 = Quantile(values, 0.1);
  d.median = Quantile(values, 0.5);
  d.p90 = Quantile(values, 0.9);
  if (!(high > low)) high = low + 1;
  d.bin_low = low;
  d.bin_width = (high - low) / bins;
  for (double v : values) {
    const auto k = static_cast<int>(std::floor((v - low) / d.bin_width));
    ++d.bins[static_cast<size_t>(std::clamp(k, 0, bins - 1))];
  }
  return d;
}

json DistributionJson(const Distribution& d) {
  return {{"count", d.count},   {"mean", Number(d.mean)},     {"min", Number(d.min)},
          {"p10", Number(d.p10)}, {"median", Number(d.median)}, {"p90", Number(d.p90)},
          {"max", Number(d.max)}, {"bin_low", Number(d.bin_low)},
          {"bin_width", Number(d.bin_width)}, {"bins", d.bins}};
}

// alpha[l][h] of one result line, checked against the file's shape so far.
absl::StatusOr<Grid> ImportanceOf(const json& line, const std::string& where, DatasetSummary& s) {
  const json& grid = line.contains("first_token_importance") ? line["first_token_importance"] : json();
  if (!grid.is_array() || grid.empty() || !grid[0].is_array() || grid[0].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no first_token_importance [layer][head] (results of an older attnscope?)"));
  }
  if (s.layers == 0) {
    s.layers = static_cast<int64_t>(grid.size());
    s.heads = static_cast<int64_t>(grid[0].size());
  }
  Grid out;
  for (const json& row : grid) {
    if (!row.is_array() || static_cast<int64_t>(row.size()) != s.heads ||
        static_cast<int64_t>(grid.size()) != s.layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": first_token_importance is not ", s.layers, " layers x ", s.heads,
          " heads like the earlier lines; summarize one model per file"));
    }
    std::vector<double> values;
    for (const json& v : row) values.push_back(v.is_number() ? v.get<double>() : NAN);
    out.push_back(std::move(values));
  }
  return out;
}

double NumberOr(const json& line, const char* key, double fallback) {
  return line.contains(key) && line[key].is_number() ? line[key].get<double>() : fallback;
}

struct Accumulator {
  Grid sum, above;
  std::vector<double> health, sink_eps, entropy;
  std::vector<LowHealthPrompt> prompts;
};

absl::Status AddResult(const json& line, const std::string& where, DatasetSummary& s,
                       Accumulator& acc) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const Grid alpha, ImportanceOf(line, where, s));
  if (acc.sum.empty()) {
    acc.sum.assign(static_cast<size_t>(s.layers), std::vector<double>(static_cast<size_t>(s.heads), 0));
    acc.above = acc.sum;
  }
  int64_t above = 0;
  for (size_t l = 0; l < alpha.size(); ++l) {
    for (size_t h = 0; h < alpha[l].size(); ++h) {
      acc.sum[l][h] += alpha[l][h];
      if (alpha[l][h] > s.epsilon) {
        acc.above[l][h] += 1;
        ++above;
      }
    }
  }
  acc.sink_eps.push_back(static_cast<double>(above) / static_cast<double>(s.layers * s.heads));
  const double health = NumberOr(line, "health", NAN);
  acc.health.push_back(health);
  acc.entropy.push_back(line.contains("entropy") && line["entropy"].is_object()
                            ? NumberOr(line["entropy"], "next_token_mean_nats", NAN)
                            : NAN);
  const int64_t sinks = line.contains("sinks") && line["sinks"].is_array()
                            ? static_cast<int64_t>(line["sinks"].size())
                            : 0;
  acc.prompts.push_back({line["id"], health, sinks, static_cast<int64_t>(NumberOr(line, "tokens", 0))});
  if (s.model.empty() && line.contains("model") && line["model"].is_string()) {
    s.model = line["model"].get<std::string>();
  }
  return absl::OkStatus();
}

void Finish(Accumulator& acc, int lowest, DatasetSummary& s) {
  const auto n = static_cast<double>(s.prompts);
  s.mean_importance = acc.sum;
  s.share_above = acc.above;
  s.first_token_mass_by_layer.assign(static_cast<size_t>(s.layers), 0);
  for (size_t l = 0; l < acc.sum.size(); ++l) {
    for (size_t h = 0; h < acc.sum[l].size(); ++h) {
      s.mean_importance[l][h] /= n;
      s.share_above[l][h] /= n;
      s.first_token_mass_by_layer[l] += s.mean_importance[l][h] / static_cast<double>(s.heads);
    }
  }
  double sum = 0;
  for (double e : acc.sink_eps) sum += e;
  s.sink_eps = sum / n;
  s.health = Distribute(acc.health, 0, 10, 10);
  s.sink_eps_per_prompt = Distribute(acc.sink_eps, 0, 1, 10);
  std::vector<double> finite;
  for (double e : acc.entropy) {
    if (std::isfinite(e)) finite.push_back(e);
  }
  const auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
  s.entropy = Distribute(acc.entropy, finite.empty() ? 0 : *lo, finite.empty() ? 1 : *hi, 12);
  std::stable_sort(acc.prompts.begin(), acc.prompts.end(),
                   [](const LowHealthPrompt& a, const LowHealthPrompt& b) { return a.health < b.health; });
  acc.prompts.resize(std::min(acc.prompts.size(), static_cast<size_t>(lowest)));
  s.lowest_health = std::move(acc.prompts);
}

}  // namespace

absl::StatusOr<DatasetSummary> SummarizeResults(const std::string& path, double epsilon,
                                                int lowest) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  DatasetSummary s;
  s.path = path;
  s.epsilon = epsilon;
  Accumulator acc;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat(path, " line ", number);
    const json line = json::parse(text, nullptr, false);
    if (!line.is_object() || !line.contains("id")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a result of attnscope batch (a JSON object with an \"id\")"));
    }
    if (line.contains("error")) {
      ++s.errors;
      continue;
    }
    ATTNSCOPE_RETURN_IF_ERROR(AddResult(line, where, s, acc));
    ++s.prompts;
  }
  if (s.prompts == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no results (", s.errors,
                                                   " error lines); nothing to summarize"));
  }
  Finish(acc, lowest, s);
  return s;
}

absl::StatusOr<Grid> GridDelta(const Grid& a, const Grid& b) {
  if (a.size() != b.size() || (!a.empty() && a[0].size() != b[0].size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the two files have ", a.size(), " x ", a.empty() ? 0 : a[0].size(), " and ", b.size(),
        " x ", b.empty() ? 0 : b[0].size(),
        " layers x heads: a head-by-head difference needs models of the same shape"));
  }
  Grid out = b;
  for (size_t l = 0; l < out.size(); ++l) {
    for (size_t h = 0; h < out[l].size(); ++h) out[l][h] -= a[l][h];
  }
  return out;
}

json SummaryToJson(const DatasetSummary& s) {
  json lowest = json::array();
  for (const LowHealthPrompt& p : s.lowest_health) {
    lowest.push_back({{"id", p.id}, {"health", Number(p.health)}, {"sinks", p.sinks},
                      {"tokens", p.tokens}});
  }
  json mass = json::array();
  for (double v : s.first_token_mass_by_layer) mass.push_back(Number(v));
  return {{"file", s.path},
          {"model", s.model},
          {"prompts", s.prompts},
          {"errors", s.errors},
          {"layers", s.layers},
          {"heads", s.heads},
          {"sink_epsilon", s.epsilon},
          {"sink_eps", Number(s.sink_eps)},
          {"mean_first_token_importance", GridJson(s.mean_importance)},
          {"share_above_epsilon", GridJson(s.share_above)},
          {"first_token_mass_by_layer", std::move(mass)},
          {"health", DistributionJson(s.health)},
          {"sink_eps_per_prompt", DistributionJson(s.sink_eps_per_prompt)},
          {"next_token_entropy_mean_nats", DistributionJson(s.entropy)},
          {"lowest_health", std::move(lowest)}};
}

namespace {

std::string GridText(const Grid& grid, const char* format) {
  std::string out = "      ";
  for (size_t h = 0; h < (grid.empty() ? 0 : grid[0].size()); ++h) {
    absl::StrAppend(&out, absl::StrFormat("%7s", absl::StrCat("h", h)));
  }
  out += "\n";
  for (size_t l = 0; l < grid.size(); ++l) {
    absl::StrAppend(&out, absl::StrFormat("  %-4s", absl::StrCat("L", l)));
    for (double v : grid[l]) absl::StrAppend(&out, absl::StrFormat(format, v));
    out += "\n";
  }
  return out;
}

std::string DistributionText(const Distribution& d) {
  return absl::StrFormat("mean %.3f  min %.3f  p10 %.3f  median %.3f  p90 %.3f  max %.3f", d.mean,
                         d.min, d.p10, d.median, d.p90, d.max);
}

}  // namespace

std::string SummaryToText(const DatasetSummary& s) {
  std::string out = absl::StrFormat(
      "%s: %d prompts (%d error lines left out), model %s, %d layers x %d heads\n\n", s.path,
      s.prompts, s.errors, s.model.empty() ? "?" : s.model, s.layers, s.heads);
  absl::StrAppend(&out, absl::StrFormat("Sink-ε (ε = %.2f)  %.4f  (mean over prompts of the "
                                        "share of heads with α > ε)\n\n",
                                        s.epsilon, s.sink_eps));
  absl::StrAppend(&out, "Share of prompts with α > ε, per layer x head\n",
                  GridText(s.share_above, "%7.3f"), "\n");
  absl::StrAppend(&out, "Mean first-token importance α, per layer x head\n",
                  GridText(s.mean_importance, "%7.3f"), "\n");
  absl::StrAppend(&out, "First-token mass by layer (mean α over prompts and heads)\n ");
  for (size_t l = 0; l < s.first_token_mass_by_layer.size(); ++l) {
    absl::StrAppend(&out, absl::StrFormat(" L%d %.3f", l, s.first_token_mass_by_layer[l]));
  }
  absl::StrAppend(&out, "\n\nHealth (0-10)                      ", DistributionText(s.health),
                  "\nNext-token entropy (prompt mean)   ", DistributionText(s.entropy),
                  " nats\n\nLowest health\n  ", absl::StrFormat("%-24s %7s %6s %7s\n", "id",
                                                                 "health", "sinks", "tokens"));
  for (const LowHealthPrompt& p : s.lowest_health) {
    absl::StrAppend(&out, absl::StrFormat("  %-24s %7.2f %6d %7d\n", p.id.dump(), p.health,
                                          p.sinks, p.tokens));
  }
  return out;
}

std::string DeltaText(const DatasetSummary& a, const DatasetSummary& b, const Grid& share_delta) {
  return absl::StrCat(
      absl::StrFormat("Difference %s - %s\nSink-ε  %+.4f  (%.4f -> %.4f)\n\n", b.path, a.path,
                      b.sink_eps - a.sink_eps, a.sink_eps, b.sink_eps),
      "Share of prompts with α > ε, difference per layer x head\n",
      GridText(share_delta, "%+7.3f"));
}

}  // namespace attnscope::cli
