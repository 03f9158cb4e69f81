// The human-readable report of one prompt's statistics, for a terminal.
#pragma once

#include <string>
#include <vector>

#include "service/analysis/prompt_stats.h"

namespace attnscope::analysis {

struct TextReportOptions {
  // ANSI colours (the CLI turns this on when stdout is a terminal). Off: the
  // output contains no escape sequence at all.
  bool color = false;
  // Width in cells of the longest max-norm bar.
  int bar_width = 40;
  // Heads up to which the sink-score grid prints the numbers next to the
  // shades; wider grids show shades only.
  int grid_numbers_max_heads = 16;
  // Token rows in the max-norm section; 0 = all. Sinks, structural tokens
  // and the argmax are always listed when rows are cut.
  int max_token_rows = 0;
  // Token text is cut to this many characters (with an ellipsis).
  int token_text_width = 16;
  // Rows of the next-token section; 0 = all. When cut, the positions whose
  // actual next token was most surprising are listed (in position order).
  int max_prediction_rows = 0;
  // Top predictions printed per row (of the ones computed).
  int predictions_per_row = 3;
};

// Renders the report: header (T, L, H), context health with a bar, the
// (anomalous) sink tokens with their z-scores, the expected sinks (structural
// tokens with z above the threshold), the structural tokens, the massive-activation
// line, a layer x head grid of sink scores shaded " ░▒▓█" by bands of 0.2
// (with the numbers when H <= grid_numbers_max_heads) and per-token bars of
// the max hidden-state norm scaled to the largest. `tokens[i]` is the text
// of token i (raw bytes are fine: invalid UTF-8 is replaced, control
// characters escaped); missing entries show as "". Lines end with '\n'.
// The last section is PredictionSection's.
std::string RenderTextReport(const PromptStats& stats, const std::vector<std::string>& tokens,
                             const TextReportOptions& options = {});

// The next-token section: per position the token, the next-token entropy,
// the surprisal of the actual next token and the top predictions with their
// probabilities (see TextReportOptions::max_prediction_rows). "" when the
// stats hold no entropies.
std::string PredictionSection(const PromptStats& stats, const std::vector<std::string>& tokens,
                              const TextReportOptions& options);

// `bytes` with every byte that is not part of a valid UTF-8 sequence written
// as <0xNN> (a byte-level token holding part of a character, e.g. "<0xE2>").
std::string ReadableBytes(const std::string& bytes);

// One token's text for display: bytes of invalid UTF-8 as <0xNN>, newline,
// tab and carriage return shown as \n \t \r, other control bytes as \xNN, and
// cut to `max_chars` code points (the last one an ellipsis) when longer.
std::string DisplayToken(const std::string& bytes, int max_chars);

}  // namespace attnscope::analysis
