// Small text helpers shared by the terminal reports: widths in code points,
// padding and optional ANSI colour.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"

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

}  // namespace attnscope::analysis::text_cells
