// Small text helpers shared by the terminal reports: widths in code points,
// padding, optional ANSI colour and probabilities.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attnscope::analysis::text_cells {

// Number of UTF-8 code points in `s` (its width in a terminal cell grid for
// the texts the reports print).
inline size_t CodePoints(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// `s` padded with spaces to `width` code points (unchanged when wider).
inline std::string PadRight(std::string s, size_t width) {
  const size_t n = CodePoints(s);
  if (n < width) s.append(width - n, ' ');
  return s;
}

// `text` wrapped in the SGR sequence `sgr` when `color`; `text` otherwise.
inline std::string Paint(const std::string& text, const char* sgr, bool color) {
  return color ? absl::StrCat("\x1b[", sgr, "m", text, "\x1b[0m") : text;
}

// A probability with `decimals` decimals, or in scientific notation when
// that would print it as zero ("6.6e-06": with a vocabulary of 150K most
// probabilities are below 0.001); exactly 0 stays "0.000".
inline std::string FormatProbability(double p, int decimals = 3) {
  double smallest = 0.5;  // half a unit of the last decimal: rounds up to it
  for (int i = 0; i < decimals; ++i) smallest /= 10;
  if (p > 0 && p < smallest) return absl::StrFormat("%.1e", p);
  return absl::StrFormat("%.*f", decimals, p);
}

}  // namespace attnscope::analysis::text_cells
