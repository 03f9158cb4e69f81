#include "service/tokenizer/hf_piece.h"

#include <algorithm>

namespace attnscope::tokenizer {

Piece Piece::Original(std::string text, int64_t base) {
  Piece p;
  p.align.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t at = base + static_cast<int64_t>(i);
    p.align.emplace_back(at, at + 1);
  }
  p.text = std::move(text);
  p.origin = base;
  return p;
}

Piece Piece::Sub(size_t begin, size_t end) const {
  Piece p;
  p.text = text.substr(begin, end - begin);
  p.align.assign(align.begin() + static_cast<std::ptrdiff_t>(begin),
                 align.begin() + static_cast<std::ptrdiff_t>(end));
  p.origin = begin < align.size() ? align[begin].first : origin;
  return p;
}

std::pair<int64_t, int64_t> Piece::Span(size_t begin, size_t end) const {
  int64_t lo = align[begin].first;
  int64_t hi = align[begin].second;
  for (size_t i = begin; i < end; ++i) {
    lo = std::min(lo, align[i].first);
    hi = std::max(hi, align[i].second);
  }
  return {lo, hi};
}

}  // namespace attnscope::tokenizer
