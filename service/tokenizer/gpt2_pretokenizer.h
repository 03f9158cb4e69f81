// GPT-2's regex pre-split, compiled with PCRE2 (UTF + Unicode properties,
// JIT when available).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace attnscope::tokenizer {

// Splits text into the pieces BPE runs on, as OpenAI's encoder.py does with
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// where \s is Python's: the Unicode White_Space property (PCRE2's own \s
// differs on U+0085 and U+180E). Thread-safe: Split keeps its match state
// per call.
class Gpt2PreTokenizer {
 public:
  // Compiles the pattern. Internal error if PCRE2 rejects it (e.g. built
  // without Unicode support).
  static absl::StatusOr<std::unique_ptr<Gpt2PreTokenizer>> Create();
  ~Gpt2PreTokenizer();

  Gpt2PreTokenizer(const Gpt2PreTokenizer&) = delete;
  Gpt2PreTokenizer& operator=(const Gpt2PreTokenizer&) = delete;

  // Appends to `pieces` the [begin, end) byte spans of the pieces of `text`,
  // which must be valid UTF-8 (checked by the caller; not re-checked).
  // Spans are shifted by `base` and tile `text` exactly. Internal error if
  // PCRE2 fails to match (resource limits).
  absl::Status Split(std::string_view text, size_t base,
                     std::vector<std::pair<size_t, size_t>>* pieces) const;

 private:
  struct Pcre;
  explicit Gpt2PreTokenizer(std::unique_ptr<Pcre> pcre);
  std::unique_ptr<Pcre> pcre_;
};

}  // namespace attnscope::tokenizer
