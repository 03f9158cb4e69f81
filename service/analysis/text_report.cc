#include "service/analysis/text_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/core/utf8.h"
#include "service/analysis/text_cells.h"

namespace attnscope::analysis {
namespace {

constexpr const char* kShades[] = {" ", "░", "▒", "▓", "█"};
constexpr const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
// ANSI SGR codes per shade band, from "nothing here" to "full sink".
constexpr const char* kBandColors[] = {"2", "36", "33", "91", "1;31"};
constexpr int kHealthBarCells = 10;
constexpr size_t kLineWidth = 88;

using text_cells::CodePoints;
using text_cells::Paint;
using text_cells::PadRight;

int Band(double v) {
  if (!(v >= 0.2)) return 0;  // also NaN
  if (v < 0.4) return 1;
  if (v < 0.6) return 2;
  if (v < 0.8) return 3;
  return 4;
}

// A horizontal bar of `fraction` (clamped to [0,1]) of `width` cells, with
// eighth-cell resolution, padded with `fill` to the full width.
std::string Bar(double fraction, int width, const char* fill) {
  if (!(fraction > 0.0)) fraction = 0.0;
  const int eighths = static_cast<int>(std::lround(std::min(fraction, 1.0) * width * 8));
  std::string bar;
  for (int i = 0; i < eighths / 8; ++i) bar += "█";
  bar += kEighths[eighths % 8];
  const int used = eighths / 8 + (eighths % 8 != 0 ? 1 : 0);
  for (int i = used; i < width; ++i) bar += fill;
  return bar;
}

// Decimals chosen from `scale` (the largest value of a column) so that a
// column of norms lines up.
std::string FormatNorm(double v, double scale) {
  if (std::fabs(scale) >= 1000.0) return absl::StrFormat("%.0f", v);
  if (std::fabs(scale) >= 10.0) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.3f", v);
}

std::string TokenLabel(const std::vector<std::string>& tokens, int64_t i, int width) {
  const std::string text =
      i >= 0 && static_cast<size_t>(i) < tokens.size() ? tokens[static_cast<size_t>(i)] : "";
  return absl::StrCat("\"", DisplayToken(text, width), "\"");
}

// Width of the token-label column: the longest label of the prompt.
size_t LabelColumn(const PromptStats& s, const std::vector<std::string>& tokens, int width) {
  size_t longest = 2;
  for (int64_t i = 0; i < static_cast<int64_t>(s.max_norm.size()); ++i) {
    longest = std::max(longest, CodePoints(TokenLabel(tokens, i, width)));
  }
  return longest;
}

size_t IndexColumn(const PromptStats& s) { return absl::StrCat(s.max_norm.size()).size() + 1; }

bool Contains(const std::vector<int64_t>& sorted, int64_t v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

std::string HealthSection(const PromptStats& s, bool color) {
  const char* sgr = s.health >= 7.0 ? "1;32" : (s.health >= 4.0 ? "1;33" : "1;31");
  std::string note;
  if (s.num_candidates == 0) {
    note = "no candidate tokens: every position is structural";
  } else {
    note = absl::StrFormat("%d anomalous sink%s among %d candidate tokens (z > %.1f)",
                           s.sinks.size(), s.sinks.size() == 1 ? "" : "s", s.num_candidates,
                           s.threshold);
  }
  return absl::StrCat("Context health  ", Paint(absl::StrFormat("%.1f / 10", s.health), sgr, color),
                      "  ", Paint(Bar(s.health / 10.0, kHealthBarCells, "░"), sgr, color), "  ",
                      note, "\n\n");
}

// A titled list of tokens with their z-score and received attention, one a
// line in colour `sgr`.
std::string TokenZSection(const std::string& title, const std::vector<int64_t>& positions,
                          const char* sgr, const PromptStats& s,
                          const std::vector<std::string>& tokens, const TextReportOptions& o) {
  std::string out = title;
  if (positions.empty()) out += "  none\n";
  const size_t label_width = LabelColumn(s, tokens, o.token_text_width);
  for (int64_t j : positions) {
    const auto k = static_cast<size_t>(j);
    const double z = k < s.z.size() ? s.z[k] : 0.0;
    const double r = k < s.received.size() ? s.received[k] : 0.0;
    out += Paint(absl::StrFormat("  %s %s  z = %6.2f  received %.4f",
                                 PadRight(absl::StrCat("#", j), IndexColumn(s)),
                                 PadRight(TokenLabel(tokens, j, o.token_text_width), label_width),
                                 z, r),
                 sgr, o.color);
    out += "\n";
  }
  return out + "\n";
}

std::string SinkSection(const PromptStats& s, const std::vector<std::string>& tokens,
                        const TextReportOptions& o) {
  return TokenZSection(absl::StrFormat("Sink tokens (z > %.1f)\n", s.threshold), s.sinks, "1;31", s,
                       tokens, o);
}

std::string ExpectedSinkSection(const PromptStats& s, const std::vector<std::string>& tokens,
                                const TextReportOptions& o) {
  return TokenZSection(
      absl::StrFormat(
          "Expected sinks (structural tokens with z > %.1f; not anomalous, not in the health score)\n",
          s.threshold),
      s.expected_sinks, "36", s, tokens, o);
}

std::string StructuralSection(const PromptStats& s, const std::vector<std::string>& tokens,
                              const TextReportOptions& o) {
  std::string out = "Structural tokens (left out of the z-score baseline)\n";
  std::string line = " ";
  size_t line_chars = 1;  // without colour escapes
  for (int64_t j : s.structural) {
    const std::string item =
        absl::StrCat(" #", j, " ", TokenLabel(tokens, j, o.token_text_width));
    if (line_chars + CodePoints(item) > kLineWidth) {
      out += line + "\n";
      line = " ";
      line_chars = 1;
    }
    line += Paint(item, "36", o.color);
    line_chars += CodePoints(item);
  }
  if (s.structural.empty()) line += " none";
  return out + line + "\n\n";
}

std::string MassiveSection(const PromptStats& s, const std::vector<std::string>& tokens,
                           const TextReportOptions& o) {
  if (s.massive_argmax < 0 || static_cast<size_t>(s.massive_argmax) >= s.max_norm.size()) {
    return "";
  }
  const double top = s.max_norm[static_cast<size_t>(s.massive_argmax)];
  return absl::StrFormat(
      "Massive activation  largest max norm %s at token #%d %s; token #0 is %sx the median of "
      "the rest\n\n",
      FormatNorm(top, top), s.massive_argmax,
      TokenLabel(tokens, s.massive_argmax, o.token_text_width),
      Paint(absl::StrFormat("%.2f", s.massive_ratio), "1", o.color));
}

std::string GridCell(double v, bool numbers, bool color) {
  const int band = Band(v);
  // Without numbers a head is two shade cells wide, so the grid looks square.
  const std::string cell = numbers ? absl::StrFormat("%s %4.2f", kShades[band], v)
                                   : absl::StrCat(kShades[band], kShades[band]);
  return Paint(cell, kBandColors[band], color);
}

std::string GridSection(const PromptStats& s, const TextReportOptions& o) {
  const bool numbers = s.num_heads <= o.grid_numbers_max_heads;
  std::string out = absl::StrFormat(
      "Sink score A[l,h,T-1,0] per layer x head  (back-half sink share %.2f)\n",
      s.back_half_sink_share);
  const size_t layer_width = absl::StrCat("L", std::max<int64_t>(s.num_layers - 1, 0)).size();
  // With numbers, a head label sits above the number, two cells into the cell.
  std::string header(layer_width + (numbers ? 5 : 4), ' ');
  for (int64_t h = 0; h < s.num_heads; ++h) {
    if (numbers) {
      header += absl::StrFormat("%-8s", absl::StrCat("h", h));
    } else {
      header += h % 8 == 0 ? PadRight(absl::StrCat(h), 16) : "";
    }
  }
  out += header.substr(0, header.find_last_not_of(' ') + 1) + "\n";
  for (size_t l = 0; l < s.sink_score.size(); ++l) {
    // Shade-only rows get a frame: a run of low (blank) cells stays visible.
    std::string row = absl::StrCat("  ", PadRight(absl::StrCat("L", l), layer_width), " ",
                                   numbers ? "" : "│");
    for (size_t h = 0; h < s.sink_score[l].size(); ++h) {
      if (numbers && h > 0) row += "  ";
      row += GridCell(s.sink_score[l][h], numbers, o.color);
    }
    out += row + (numbers ? "" : "│") + "\n";
  }
  out += "  shades: \" \" < 0.2  ░ < 0.4  ▒ < 0.6  ▓ < 0.8  █ >= 0.8\n\n";
  return out;
}

// Which token rows the norm section lists.
std::vector<int64_t> NormRows(const PromptStats& s, int max_rows) {
  const auto t = static_cast<int64_t>(s.max_norm.size());
  std::set<int64_t> rows;
  const int64_t first = max_rows > 0 ? std::min<int64_t>(max_rows, t) : t;
  for (int64_t i = 0; i < first; ++i) rows.insert(i);
  if (first < t) {
    rows.insert(s.sinks.begin(), s.sinks.end());
    rows.insert(s.structural.begin(), s.structural.end());
    rows.insert(s.massive_argmax);
  }
  std::vector<int64_t> out;
  for (int64_t i : rows) {
    if (i >= 0 && i < t) out.push_back(i);
  }
  return out;
}

std::string NormSection(const PromptStats& s, const std::vector<std::string>& tokens,
                        const TextReportOptions& o) {
  const std::vector<int64_t> rows = NormRows(s, o.max_token_rows);
  std::string out = "Max hidden-state norm per token (over all layers";
  if (rows.size() < s.max_norm.size()) {
    out += absl::StrFormat("; %d of %d tokens shown", rows.size(), s.max_norm.size());
  }
  out += ")\n";
  double top = 0.0;
  for (double v : s.max_norm) top = std::max(top, v);
  const size_t index_width = IndexColumn(s);
  const size_t label_width = LabelColumn(s, tokens, o.token_text_width);
  int64_t previous = -1;
  for (int64_t i : rows) {
    if (i != previous + 1) out += "  ⋮\n";
    previous = i;
    const double v = s.max_norm[static_cast<size_t>(i)];
    const bool sink = Contains(s.sinks, i);
    const bool structural = Contains(s.structural, i);
    const char* sgr = sink ? "31" : (structural ? "36" : (i == s.massive_argmax ? "1" : "34"));
    std::string line = absl::StrCat(
        "  ", PadRight(absl::StrCat("#", i), index_width), " ",
        PadRight(TokenLabel(tokens, i, o.token_text_width), label_width),
        " ", Paint(Bar(top > 0.0 ? v / top : 0.0, o.bar_width, " "), sgr, o.color), " ",
        absl::StrFormat("%9s", FormatNorm(v, top)));
    if (sink) line += Paint("  sink", "1;31", o.color);
    if (Contains(s.expected_sinks, i)) line += Paint("  expected sink", "36", o.color);
    if (structural) line += Paint("  structural", "36", o.color);
    out += line + "\n";
  }
  if (previous + 1 < static_cast<int64_t>(s.max_norm.size())) out += "  ⋮\n";
  return out;
}

}  // namespace

std::string ReadableBytes(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    // The length of the valid sequence at i, or 0.
    size_t n = 0;
    for (size_t len = 1; len <= 4 && i + len <= bytes.size() && n == 0; ++len) {
      if (ValidateUtf8(std::string_view(bytes).substr(i, len), "").ok()) n = len;
    }
    if (n == 0) {
      out += absl::StrFormat("<0x%02X>", static_cast<unsigned char>(bytes[i]));
      ++i;
    } else {
      out.append(bytes, i, n);
      i += n;
    }
  }
  return out;
}

std::string DisplayToken(const std::string& bytes, int max_chars) {
  const std::string text = ReadableBytes(bytes);
  std::string escaped;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\t') {
      escaped += "\\t";
    } else if (c == '\r') {
      escaped += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      escaped += absl::StrFormat("\\x%02x", u);
    } else {
      escaped += c;
    }
  }
  const size_t limit = static_cast<size_t>(std::max(max_chars, 1));
  if (CodePoints(escaped) <= limit) return escaped;
  std::string cut;
  size_t kept = 0;
  for (char c : escaped) {
    const bool starts = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (starts && ++kept > limit - 1) break;
    cut += c;
  }
  return cut + "…";
}

std::string RenderTextReport(const PromptStats& stats, const std::vector<std::string>& tokens,
                             const TextReportOptions& options) {
  std::string out = absl::StrFormat("%s  %d tokens, %d layers x %d heads\n\n",
                                    Paint("attnscope report", "1", options.color),
                                    stats.num_tokens, stats.num_layers, stats.num_heads);
  out += HealthSection(stats, options.color);
  out += SinkSection(stats, tokens, options);
  out += ExpectedSinkSection(stats, tokens, options);
  out += StructuralSection(stats, tokens, options);
  out += MassiveSection(stats, tokens, options);
  out += GridSection(stats, options);
  out += NormSection(stats, tokens, options);
  out += PredictionSection(stats, tokens, options);
  return out;
}

}  // namespace attnscope::analysis
