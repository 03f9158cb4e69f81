#include "service/cli/generate_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/text_cells.h"
#include "service/analysis/text_report.h"

namespace attnscope::cli {
namespace {

constexpr int kTokenWidth = 16;

// The flat [layer * H + head] scores as [layer][head].
nlohmann::json NestedSinkScores(const std::vector<double>& flat, int64_t num_heads) {
  const auto n = static_cast<int64_t>(flat.size());
  if (num_heads < 1 || n % num_heads != 0) return flat;
  nlohmann::json out = nlohmann::json::array();
  for (int64_t l = 0; l < n / num_heads; ++l) {
    out.push_back(std::vector<double>(flat.begin() + l * num_heads,
                                      flat.begin() + (l + 1) * num_heads));
  }
  return out;
}

nlohmann::json TokenJson(const engine::GeneratedToken& t, int64_t num_heads) {
  nlohmann::json alternatives = nlohmann::json::array();
  for (const engine::Alternative& a : t.alternatives) {
    alternatives.push_back({{"id", a.id}, {"text", a.text}, {"probability", a.probability}});
  }
  nlohmann::json out = {{"index", t.index},
                        {"position", t.position},
                        {"id", t.id},
                        {"text", t.text},
                        {"probability", t.probability},
                        {"entropy_nats", t.entropy_nats},
                        {"entropy_normalized", t.entropy_normalized},
                        {"alternatives", alternatives}};
  if (!t.sink_scores.empty()) out["sink_scores"] = NestedSinkScores(t.sink_scores, num_heads);
  out["cache_tokens"] = t.cache_tokens;
  if (!t.evicted_positions.empty()) out["evicted_positions"] = t.evicted_positions;
  return out;
}

// A token's text quoted and padded to a fixed number of cells.
std::string Cell(const std::string& text, int width = kTokenWidth) {
  std::string shown = absl::StrCat("\"", analysis::DisplayToken(text, width), "\"");
  size_t cells = 0;
  for (char c : shown) cells += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  if (cells < static_cast<size_t>(width) + 2) shown.append(width + 2 - cells, ' ');
  return shown;
}

// The sink scores of one token as rows "L0  0.91 0.12 ...".
std::string SinkBlock(const std::vector<double>& flat, int64_t num_heads, bool color) {
  const auto n = static_cast<int64_t>(flat.size());
  const int64_t h = num_heads >= 1 && n % num_heads == 0 ? num_heads : n;
  std::string out;
  for (int64_t l = 0; h > 0 && l < n / h; ++l) {
    absl::StrAppend(&out, absl::StrFormat("%13s L%-3d", "sink", l));
    for (int64_t k = 0; k < h; ++k) {
      const double v = flat[l * h + k];
      absl::StrAppend(&out, " ",
                      analysis::text_cells::Paint(absl::StrFormat("%4.2f", v), "1;31",
                                                  color && v >= 0.5));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

void KeepOtherAlternatives(engine::GenerationResult& result, int keep) {
  for (engine::GeneratedToken& t : result.tokens) {
    auto& a = t.alternatives;
    a.erase(std::remove_if(a.begin(), a.end(),
                           [&t](const engine::Alternative& x) { return x.id == t.id; }),
            a.end());
    if (a.size() > static_cast<size_t>(std::max(keep, 0))) a.resize(static_cast<size_t>(std::max(keep, 0)));
  }
}

nlohmann::json GenerationJson(const engine::Prompt& prompt, const engine::GenerationResult& result,
                              double tokens_per_second, int64_t num_heads) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const engine::GeneratedToken& t : result.tokens) tokens.push_back(TokenJson(t, num_heads));
  return {{"input_ids", prompt.ids},
          {"prompt_tokens", prompt.tokens},
          {"text", result.text},
          {"stop_reason", result.stop_reason},
          {"generated_tokens", result.tokens.size()},
          {"tokens", tokens},
          {"tokens_per_second", tokens_per_second}};
}

std::string GenerationTable(const engine::GenerationResult& result, int64_t num_heads,
                            bool color) {
  std::string out = absl::StrCat(result.text, "\n\n", result.tokens.size(),
                                 " new tokens (stop: ", result.stop_reason, ")\n\n");
  bool any_alternatives = false;
  for (const engine::GeneratedToken& t : result.tokens) any_alternatives |= !t.alternatives.empty();
  absl::StrAppend(&out, absl::StrFormat("%5s %5s  %-*s %8s %9s %6s%s\n", "#", "pos",
                                        kTokenWidth + 2, "token", "prob", "entropy", "norm",
                                        any_alternatives ? "  alternatives" : ""));
  for (const engine::GeneratedToken& t : result.tokens) {
    std::string others;
    for (const engine::Alternative& a : t.alternatives) {
      absl::StrAppend(&others, "  ", Cell(a.text, 10), " ",
                      analysis::text_cells::FormatProbability(a.probability, 4));
    }
    const std::string probability = analysis::text_cells::Paint(
        absl::StrFormat("%8s", analysis::text_cells::FormatProbability(t.probability, 4)), "1;33",
        color && t.probability < 0.1);
    std::string row = absl::StrFormat("%5d %5d  %s %s %9.4f %6.3f%s", t.index, t.position,
                                      Cell(t.text), probability, t.entropy_nats,
                                      t.entropy_normalized, others);
    out += row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
    if (!t.sink_scores.empty()) out += SinkBlock(t.sink_scores, num_heads, color);
  }
  return out;
}

}  // namespace attnscope::cli
