// The next-token section of the text report (see text_report.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/text_cells.h"
#include "service/analysis/text_report.h"

namespace attnscope::analysis {
namespace {

using text_cells::FormatProbability;
using text_cells::PadRight;
using text_cells::Paint;

std::string Quoted(const std::vector<std::string>& tokens, int64_t i, int width) {
  const std::string text =
      i >= 0 && static_cast<size_t>(i) < tokens.size() ? tokens[static_cast<size_t>(i)] : "";
  return absl::StrCat("\"", DisplayToken(text, width), "\"");
}

// The positions listed: all, or the `max_rows` with the largest surprisal
// (NaN last; ties by position), in position order.
std::vector<int64_t> PredictionRows(const PromptStats& s, int max_rows) {
  const auto t = static_cast<int64_t>(s.next_token_entropy_nats.size());
  std::vector<int64_t> rows(static_cast<size_t>(t));
  std::iota(rows.begin(), rows.end(), 0);
  if (max_rows <= 0 || max_rows >= t) return rows;
  auto surprisal = [&s](int64_t i) {
    const auto k = static_cast<size_t>(i);
    const double v = k < s.next_token_surprisal_nats.size() ? s.next_token_surprisal_nats[k] : -1.0;
    return std::isnan(v) ? -1.0 : v;
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](int64_t a, int64_t b) { return surprisal(a) > surprisal(b); });
  rows.resize(static_cast<size_t>(max_rows));
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

std::string PredictionSection(const PromptStats& s, const std::vector<std::string>& tokens,
                              const TextReportOptions& o) {
  const auto t = static_cast<int64_t>(s.next_token_entropy_nats.size());
  if (t == 0) return "";
  const std::vector<int64_t> rows = PredictionRows(s, o.max_prediction_rows);
  std::string out = "\nNext token at each position (nats: entropy of the prediction, surprisal "
                    "-ln p of the actual next token";
  if (static_cast<int64_t>(rows.size()) < t) {
    out += absl::StrFormat("; the %d most surprising of %d positions", rows.size(), t);
  }
  out += ")\n";
  const int width = std::min(o.token_text_width, 12);
  const size_t index_width = absl::StrCat(t).size() + 1, label_width = static_cast<size_t>(width) + 2;
  out += absl::StrCat("  ", PadRight("#", index_width), " ", PadRight("token", label_width),
                      "  entropy  surprisal  ", PadRight("next", label_width), "  top predictions\n");
  int64_t previous = -1;
  for (int64_t i : rows) {
    if (i != previous + 1) out += "  ⋮\n";
    previous = i;
    const auto k = static_cast<size_t>(i);
    std::string surprisal = "        –", next = PadRight("–", label_width);
    if (k < s.next_token_surprisal_nats.size()) {
      const double v = s.next_token_surprisal_nats[k];
      surprisal = absl::StrFormat("%9.3f", v);
      if (v > s.next_token_entropy_nats[k] + 2.0) surprisal = Paint(surprisal, "1;33", o.color);
      next = PadRight(Quoted(tokens, i + 1, width), label_width);
    }
    std::string top;
    if (k < s.top_predictions.size()) {
      const auto& p = s.top_predictions[k];
      for (size_t r = 0; r < p.size() && r < static_cast<size_t>(std::max(o.predictions_per_row, 0));
           ++r) {
        const std::string token = p[r].token.empty() ? absl::StrCat("#", p[r].id) : p[r].token;
        absl::StrAppend(&top, r ? "  " : "", "\"", DisplayToken(token, width), "\" ",
                        FormatProbability(p[r].p));
      }
    }
    out += absl::StrCat("  ", PadRight(absl::StrCat("#", i), index_width), " ",
                        PadRight(Quoted(tokens, i, width), label_width), "  ",
                        absl::StrFormat("%7.3f", s.next_token_entropy_nats[k]), "  ", surprisal,
                        "  ", next, "  ", top, "\n");
  }
  if (previous + 1 < t) out += "  ⋮\n";
  return out;
}

}  // namespace attnscope::analysis
