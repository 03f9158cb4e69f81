// A stretch of text on its way through a tokenizer.json pipeline, with the
// byte span of the original input that every byte of it came from (Hugging
// Face's NormalizedString, reduced to what attnscope needs: offsets).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnscope::tokenizer {

struct Piece {
  std::string text;
  // align[i] = [begin, end) bytes of the original input that text[i] stands
  // for; text.size() == align.size().
  std::vector<std::pair<int64_t, int64_t>> align;
  // Byte offset of this piece in the original input (for Metaspace "first").
  int64_t origin = 0;

  // A piece holding `text` unchanged, found at `base` in the input.
  static Piece Original(std::string text, int64_t base);

  // The bytes [begin, end) of this piece, alignment included.
  Piece Sub(size_t begin, size_t end) const;

  // The original span of bytes [begin, end) of text (begin < end).
  std::pair<int64_t, int64_t> Span(size_t begin, size_t end) const;
};

}  // namespace attnscope::tokenizer
