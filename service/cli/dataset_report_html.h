// The HTML report of `attnscope summarize --html`: one self-contained page
// (inline SVG and CSS, no network): per results file the dataset's Sink-eps,
// a heatmap of the share of prompts with alpha > eps per layer x head,
// histograms of health, per-prompt Sink-eps and next-token entropy, the
// first-token mass by layer and the lowest-health prompts; with two files a
// heatmap of their differences.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "service/cli/dataset_summary.h"

namespace attnscope::cli {

// `share_delta`: second minus first, when two files were given. With "#test"
// in its URL the page writes what it drew as JSON into <pre
// id="test-output"> ({"title", "heatmaps", "cells", "bars"}) for tests.
std::string DatasetReportHtml(const std::vector<DatasetSummary>& summaries,
                              const std::optional<Grid>& share_delta);

}  // namespace attnscope::cli
