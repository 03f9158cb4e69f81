// The population figures of `attnscope summarize`, from the result lines of
// `attnscope batch` (service/analysis/definitions.md, "Population metrics").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::cli {

using Grid = std::vector<std::vector<double>>;  // [layer][head]

// Quantiles (lower, as definitions.md's median) and a histogram of values.
struct Distribution {
  int64_t count = 0;
  double mean = 0, min = 0, p10 = 0, median = 0, p90 = 0, max = 0;
  double bin_low = 0, bin_width = 1;  // bin k covers [low + k w, low + (k+1) w)
  std::vector<int64_t> bins;          // the last bin includes its upper edge
};

struct LowHealthPrompt {
  nlohmann::json id;
  double health = 0;
  int64_t sinks = 0;
  int64_t tokens = 0;
};

struct DatasetSummary {
  std::string path;
  std::string model;  // the first result's "model" ("" when none)
  int64_t prompts = 0;  // result lines
  int64_t errors = 0;   // error lines, left out of every figure
  int64_t layers = 0, heads = 0;
  double epsilon = 0.3;
  double sink_eps = 0;        // mean over prompts of each prompt's Sink-epsilon
  Grid mean_importance;       // mean alpha per (layer, head)
  Grid share_above;           // share of prompts with alpha > epsilon
  std::vector<double> first_token_mass_by_layer;  // mean over prompts and heads of alpha
  Distribution health;        // 10 bins over [0, 10]
  Distribution sink_eps_per_prompt;  // 10 bins over [0, 1]
  Distribution entropy;       // entropy.next_token_mean_nats, 12 bins over its range
  std::vector<LowHealthPrompt> lowest_health;  // ascending health, ties by file order
};

// Reads a results file. Sink-epsilon is recomputed from each prompt's
// first_token_importance with `epsilon`. InvalidArgument naming the file and
// the line for a line that is not a batch result or error, results whose
// layers x heads differ, or no result at all.
absl::StatusOr<DatasetSummary> SummarizeResults(const std::string& path, double epsilon,
                                                int lowest);

// b - a per (layer, head); InvalidArgument when the shapes differ.
absl::StatusOr<Grid> GridDelta(const Grid& a, const Grid& b);

nlohmann::json SummaryToJson(const DatasetSummary& s);
// The figures as text tables (what `summarize` prints without --json).
std::string SummaryToText(const DatasetSummary& s);
// The difference of two files: Sink-eps and `share_delta` (b - a).
std::string DeltaText(const DatasetSummary& a, const DatasetSummary& b, const Grid& share_delta);

}  // namespace attnscope::cli
