// What `attnscope heads` and `attnscope ablate` print: shaded layer x head
// grids, top-head tables and the ablation table, as text or JSON.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/analysis/prompt_stats.h"
#include "service/engine/head_scan.h"
#include "service/model/language_model.h"

namespace attnscope::cli {

// A layer x head grid with a title line, each cell a shade of " ░▒▓█" by
// bands of 0.2 followed by the value (2 decimals), rows "L0".., columns
// "h0"..; ANSI colours when `color`. Lines end with '\n'.
std::string RenderHeadGrid(const std::string& title, const analysis::HeadGrid& grid, bool color);

// The report of `attnscope heads`: the probe line, the loss on each half,
// the three grids (previous-token, induction, sink) and the `top` highest
// heads of each kind.
std::string RenderHeadScan(const engine::HeadScan& scan, const std::string& probe_line, int top,
                           bool color);

// {"n", "num_sequences", "layers", "heads", "prev_token_score",
// "induction_score", "sink_score" ([L][H]), "top": {"prev_token",
// "induction", "sink": [{"layer", "head", "score"}]}, "loss": {"first_half",
// "second_half"}}.
nlohmann::json HeadScanJson(const engine::HeadScan& scan, int top);

// The ablation table: one row per set of heads (the baseline first) with the
// loss on each half and its change from the baseline.
std::string RenderAblation(const std::vector<engine::AblationRow>& rows, model::AblationMode mode,
                           const std::string& probe_line);

// {"mode": "zero"|"mean", "rows": [{"heads": ["5.1", ...], "loss_first_half",
// "loss_second_half", "delta_first_half", "delta_second_half"}]} with the
// baseline (heads []) first; deltas are against it.
nlohmann::json AblationJson(const std::vector<engine::AblationRow>& rows,
                            model::AblationMode mode);

}  // namespace attnscope::cli
