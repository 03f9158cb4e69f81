#include "service/cli/head_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace attnscope::cli {
namespace {

constexpr const char* kShades[] = {" ", "░", "▒", "▓", "█"};
// ANSI SGR per band, as in the analyze report: faint to bold red.
constexpr const char* kBandColors[] = {"2", "36", "33", "91", "1;31"};

int Band(double v) {
  if (!(v >= 0.2)) return 0;  // also NaN
  return v < 0.4 ? 1 : v < 0.6 ? 2 : v < 0.8 ? 3 : 4;
}

std::string Paint(const std::string& text, const char* sgr, bool color) {
  return color ? absl::StrCat("\x1b[", sgr, "m", text, "\x1b[0m") : text;
}

std::string HeadLabel(const engine::RankedHead& h) { return absl::StrCat(h.layer, ".", h.head); }

std::string SetName(const std::vector<model::HeadRef>& heads) {
  if (heads.empty()) return "none (baseline)";
  std::vector<std::string> names;
  for (const model::HeadRef& h : heads) names.push_back(engine::HeadName(h));
  return absl::StrJoin(names, " + ");
}

const char* ModeName(model::AblationMode mode) {
  return mode == model::AblationMode::kZero ? "zero" : "mean";
}

nlohmann::json RankedJson(const std::vector<engine::RankedHead>& heads) {
  nlohmann::json out = nlohmann::json::array();
  for (const engine::RankedHead& h : heads) {
    out.push_back({{"layer", h.layer}, {"head", h.head}, {"score", h.score}});
  }
  return out;
}

// Three columns of "L.H  score", one per kind, `top` rows.
std::string TopTable(const engine::HeadScan& scan, int top) {
  const std::vector<std::vector<engine::RankedHead>> columns = {
      engine::TopHeads(scan.prev_token, top), engine::TopHeads(scan.induction, top),
      engine::TopHeads(scan.sink, top)};
  std::string out = absl::StrFormat("Top %d heads (layer.head)\n  %-6s%-18s%-18s%s\n", top, "rank",
                                    "previous-token", "induction", "sink");
  for (int r = 0; r < top; ++r) {
    std::string line = absl::StrFormat("  %-6d", r + 1);
    bool any = false;
    for (const auto& column : columns) {
      if (r < static_cast<int>(column.size())) {
        line += absl::StrFormat("%-18s",
                                absl::StrFormat("%-6s %.3f", HeadLabel(column[r]), column[r].score));
        any = true;
      } else {
        line += std::string(18, ' ');
      }
    }
    if (!any) break;
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out + "\n";
}

}  // namespace

std::string RenderHeadGrid(const std::string& title, const analysis::HeadGrid& grid, bool color) {
  std::string out = title + "\n";
  const size_t layer_width = absl::StrCat("L", std::max<size_t>(grid.size(), 1) - 1).size();
  std::string header(layer_width + 5, ' ');
  const size_t heads = grid.empty() ? 0 : grid[0].size();
  for (size_t h = 0; h < heads; ++h) header += absl::StrFormat("%-8s", absl::StrCat("h", h));
  out += header.substr(0, header.find_last_not_of(' ') + 1) + "\n";
  for (size_t l = 0; l < grid.size(); ++l) {
    std::string row = absl::StrCat("  ", absl::StrFormat("%-*s", static_cast<int>(layer_width), absl::StrCat("L", l)),
                                   " ");
    for (size_t h = 0; h < grid[l].size(); ++h) {
      const double v = grid[l][h];
      const int band = Band(v);
      if (h > 0) row += "  ";
      row += Paint(absl::StrFormat("%s %4.2f", kShades[band], v), kBandColors[band], color);
    }
    out += row + "\n";
  }
  return out + "  shades: \" \" < 0.2  ░ < 0.4  ▒ < 0.6  ▓ < 0.8  █ >= 0.8\n\n";
}

std::string RenderHeadScan(const engine::HeadScan& scan, const std::string& probe_line, int top,
                           bool color) {
  const int64_t n = scan.n;
  std::string out = absl::StrCat("Head scan on the induction probe: ", probe_line, "\n\n");
  out += "Loss on each half (mean next-token cross-entropy, nats)\n";
  out += absl::StrFormat("  %-32s %8.4f\n", absl::StrFormat("first half   (targets 2..%d)", n),
                         scan.loss.first);
  out += absl::StrFormat("  %-32s %8.4f\n",
                         absl::StrFormat("second half  (targets %d..%d)", n + 2, 2 * n),
                         scan.loss.second);
  out += absl::StrFormat("  %-32s %+8.4f  (far below 0 when the model copies the repeat)\n\n",
                         "second - first", scan.loss.second - scan.loss.first);
  out += RenderHeadGrid("Previous-token score  mean_{i>=1} A[l,h,i,i-1]", scan.prev_token, color);
  out += RenderHeadGrid(
      absl::StrFormat("Induction score  mean_{i=n+1..2n} A[l,h,i,i-n+1]  (n = %d)", n),
      scan.induction, color);
  out += RenderHeadGrid("Sink score  A[l,h,T-1,0]", scan.sink, color);
  if (top > 0) out += TopTable(scan, top);
  return out;
}

nlohmann::json HeadScanJson(const engine::HeadScan& scan, int top) {
  nlohmann::json j;
  j["n"] = scan.n;
  j["num_sequences"] = scan.num_sequences;
  j["layers"] = scan.prev_token.size();
  j["heads"] = scan.prev_token.empty() ? 0 : scan.prev_token[0].size();
  j["prev_token_score"] = scan.prev_token;
  j["induction_score"] = scan.induction;
  j["sink_score"] = scan.sink;
  j["top"] = {{"prev_token", RankedJson(engine::TopHeads(scan.prev_token, top))},
              {"induction", RankedJson(engine::TopHeads(scan.induction, top))},
              {"sink", RankedJson(engine::TopHeads(scan.sink, top))}};
  j["loss"] = {{"first_half", scan.loss.first}, {"second_half", scan.loss.second}};
  return j;
}

std::string RenderAblation(const std::vector<engine::AblationRow>& rows, model::AblationMode mode,
                           const std::string& probe_line) {
  std::string out = absl::StrCat("Ablation (", ModeName(mode), "): ", probe_line, "\n");
  out += mode == model::AblationMode::kZero
             ? "Each head's output (before the output projection) set to 0.\n\n"
             : "Each head's output replaced by its mean over all positions and sequences.\n\n";
  // "Δ" is two bytes but one column: one more byte of width keeps them aligned.
  out += absl::StrFormat("  %-24s %12s %12s %11s %11s\n", "heads ablated", "first half",
                         "second half", "Δ first", "Δ second");
  const engine::HalfLosses base = rows.empty() ? engine::HalfLosses{} : rows[0].loss;
  for (const engine::AblationRow& row : rows) {
    std::string line = absl::StrFormat("  %-24s %12.4f %12.4f", SetName(row.heads),
                                       row.loss.first, row.loss.second);
    if (!row.heads.empty()) {
      line += absl::StrFormat(" %+10.4f %+10.4f", row.loss.first - base.first,
                              row.loss.second - base.second);
    }
    out += line + "\n";
  }
  return out + "  (loss: mean next-token cross-entropy in nats; Δ: change from the baseline)\n";
}

nlohmann::json AblationJson(const std::vector<engine::AblationRow>& rows,
                            model::AblationMode mode) {
  nlohmann::json j;
  j["mode"] = ModeName(mode);
  j["rows"] = nlohmann::json::array();
  const engine::HalfLosses base = rows.empty() ? engine::HalfLosses{} : rows[0].loss;
  for (const engine::AblationRow& row : rows) {
    std::vector<std::string> names;
    for (const model::HeadRef& h : row.heads) names.push_back(engine::HeadName(h));
    j["rows"].push_back({{"heads", names},
                         {"loss_first_half", row.loss.first},
                         {"loss_second_half", row.loss.second},
                         {"delta_first_half", row.loss.first - base.first},
                         {"delta_second_half", row.loss.second - base.second}});
  }
  return j;
}

}  // namespace attnscope::cli
