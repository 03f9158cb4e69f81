#include "service/cli/lens_output.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/analysis/text_cells.h"
#include "service/analysis/text_report.h"

namespace attnscope::cli {
namespace {

using analysis::text_cells::FormatProbability;
using analysis::text_cells::PadRight;

constexpr size_t kStateWidth = 9;
constexpr size_t kCellWidth = 20;
constexpr int kTokenChars = 9;

// A token as the tables show it: quoted, so that leading spaces show, and
// cut to kTokenChars.
std::string Quoted(const std::string& bytes) {
  return absl::StrCat("\"", analysis::DisplayToken(bytes, kTokenChars), "\"");
}

nlohmann::json NullIfNan(double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); }

nlohmann::json CellJson(const analysis::LensCell& cell, int64_t position,
                        const engine::Prompt& prompt) {
  nlohmann::json top = nlohmann::json::array();
  for (const analysis::Prediction& p : cell.top) {
    top.push_back({{"id", p.id}, {"token", p.token}, {"p", p.p}});
  }
  const bool has_next = cell.next_rank >= 0;
  const auto next = static_cast<size_t>(position + 1);
  return {{"position", position},
          {"top", top},
          {"next_id", has_next ? nlohmann::json(prompt.ids[next]) : nlohmann::json()},
          {"next_p", has_next ? NullIfNan(cell.next_p) : nlohmann::json()},
          {"next_rank", has_next ? nlohmann::json(cell.next_rank) : nlohmann::json()},
          {"entropy", NullIfNan(cell.entropy)}};
}

std::string StateName(int64_t s, int64_t num_layers) {
  if (s == 0) return "0 embed";
  if (s == num_layers) return absl::StrCat(s, " final");
  return absl::StrCat(s);
}

// One block of columns of a table over states x positions; `cell` renders
// (state, index into lens.positions).
template <typename Cell>
void TableBlock(std::string& out, const engine::Prompt& prompt, const analysis::LogitLens& lens,
                const std::vector<size_t>& shown, int64_t num_layers,
                const std::string& header_suffix, Cell cell) {
  out += PadRight("state", kStateWidth);
  for (size_t k : shown) {
    const auto i = static_cast<size_t>(lens.positions[k]);
    std::string head = absl::StrCat(i, " ", Quoted(prompt.token_bytes[i]));
    if (!header_suffix.empty() && i + 1 < prompt.token_bytes.size()) {
      head = absl::StrCat(i, header_suffix, Quoted(prompt.token_bytes[i + 1]));
    }
    out += "| " + PadRight(head, kCellWidth);
  }
  out += "\n";
  for (int64_t s = 0; s <= num_layers; ++s) {
    out += PadRight(StateName(s, num_layers), kStateWidth);
    for (size_t k : shown) out += "| " + PadRight(cell(s, k), kCellWidth);
    out += "\n";
  }
  out += "\n";
}

std::string LensSection(const engine::Prompt& prompt, const analysis::LogitLens& lens,
                        int64_t num_layers, size_t columns) {
  std::string out = absl::StrCat(
      "Logit lens: the most likely next token read out of each hidden state (state s = after "
      "layer s, 0 = the embeddings, ", num_layers,
      " = the final norm, the model's own output), and its probability\n\n");
  const auto& cells = lens.cells;
  std::vector<size_t> all(lens.positions.size()), with_next;
  std::iota(all.begin(), all.end(), size_t{0});
  for (size_t k : all) {
    if (lens.positions[k] + 1 < lens.num_tokens) with_next.push_back(k);
  }
  for (size_t first = 0; first < all.size(); first += columns) {
    const std::vector<size_t> shown(all.begin() + static_cast<std::ptrdiff_t>(first),
                                    all.begin() + static_cast<std::ptrdiff_t>(std::min(first + columns, all.size())));
    TableBlock(out, prompt, lens, shown, num_layers, "", [&](int64_t s, size_t k) -> std::string {
      const analysis::LensCell& c = cells[static_cast<size_t>(s)][k];
      if (c.top.empty()) return "";
      return absl::StrCat(Quoted(c.top[0].token), " ", FormatProbability(c.top[0].p, 2));
    });
  }
  if (with_next.empty()) {
    out += "(The last position has no next token in the prompt; --positions all or a list "
           "shows the actual next token's probability and rank at earlier ones.)\n\n";
    return out;
  }
  out += "The actual next token: its probability and rank (0 = the most likely)\n\n";
  for (size_t first = 0; first < with_next.size(); first += columns) {
    const std::vector<size_t> shown(
        with_next.begin() + static_cast<std::ptrdiff_t>(first),
        with_next.begin() + static_cast<std::ptrdiff_t>(std::min(first + columns, with_next.size())));
    TableBlock(out, prompt, lens, shown, num_layers, " → ", [&](int64_t s, size_t k) -> std::string {
      const analysis::LensCell& c = cells[static_cast<size_t>(s)][k];
      return absl::StrCat(FormatProbability(c.next_p, 3), " #", c.next_rank);
    });
  }
  return out;
}

// Per query, per layer: the five keys with the largest rollout weight.
std::string RolloutSection(const engine::Prompt& prompt, const analysis::Rollout& rollout) {
  std::string out =
      "Attention rollout: per layer, the five tokens with the largest share of the query's "
      "rolled-out attention (position:token weight)\n";
  for (size_t q = 0; q < rollout.queries.size(); ++q) {
    const int64_t query = rollout.queries[q];
    absl::StrAppend(&out, "\nquery ", query, " ",
                    Quoted(prompt.token_bytes[static_cast<size_t>(query)]), "\n");
    for (size_t l = 0; l < rollout.rows.size(); ++l) {
      const std::vector<double>& row = rollout.rows[l][q];
      std::vector<size_t> order(static_cast<size_t>(query + 1));
      std::iota(order.begin(), order.end(), size_t{0});
      const size_t shown = std::min<size_t>(5, order.size());
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown),
                        order.end(), [&](size_t a, size_t b) {
                          return row[a] > row[b] || (row[a] == row[b] && a < b);
                        });
      out += PadRight(absl::StrCat("  layer ", l + 1), 12);
      for (size_t k = 0; k < shown; ++k) {
        absl::StrAppend(&out, "  ", order[k], ":", Quoted(prompt.token_bytes[order[k]]), " ",
                        FormatProbability(row[order[k]], 3));
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace

nlohmann::json LensJson(const std::string& model, const engine::Prompt& prompt,
                        const engine::LensRun& run, int64_t num_layers) {
  nlohmann::json out = {{"model", model},
                        {"input_ids", prompt.ids},
                        {"tokens", prompt.tokens},
                        {"num_layers", num_layers},
                        {"forward_seconds", run.forward_seconds}};
  if (run.lens) {
    nlohmann::json states = nlohmann::json::array();
    for (const auto& state : run.lens->cells) {
      nlohmann::json row = nlohmann::json::array();
      for (size_t k = 0; k < state.size(); ++k) {
        row.push_back(CellJson(state[k], run.lens->positions[k], prompt));
      }
      states.push_back(std::move(row));
    }
    out["vocab"] = run.lens->vocab;
    out["lens"] = {{"positions", run.lens->positions}, {"states", std::move(states)}};
  }
  if (run.rollout) {
    out["rollout"] = {{"queries", run.rollout->queries}, {"rows", run.rollout->rows}};
  }
  return out;
}

std::string RenderLens(const engine::Prompt& prompt, const engine::LensRun& run,
                       int64_t num_layers, int64_t columns) {
  std::string out = absl::StrCat("attnscope lens  ", prompt.ids.size(), " tokens, ", num_layers,
                                 " layers\n\n");
  if (run.lens) {
    out += LensSection(prompt, *run.lens, num_layers, static_cast<size_t>(std::max<int64_t>(columns, 1)));
  }
  if (run.rollout) out += RolloutSection(prompt, *run.rollout);
  return out;
}

}  // namespace attnscope::cli
