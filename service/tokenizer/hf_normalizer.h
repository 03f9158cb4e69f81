// tokenizer.json normalizers (NFC, NFD, NFKC, NFKD, Sequence, Prepend,
// Replace, Lowercase, Strip, StripAccents), each rewriting a Piece while
// keeping track of which original bytes every new byte came from.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/tokenizer/hf_piece.h"

namespace attnscope::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `piece` in place (text valid UTF-8 in and out).
  virtual absl::Status Apply(Piece& piece) const = 0;
};

// Builds the normalizer described by `json` (an object with "type"; null
// gives nullptr). `path` is its JSON path for messages, e.g.
// "normalizer.normalizers[1]"; `file` the file name. InvalidArgument
// "FILE: PATH.type "X" is not supported" for a type not listed above, or
// naming the field for a malformed one.
absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& json,
                                                            const std::string& path,
                                                            const std::string& file);

// Unicode normalization forms, shared with tests.
enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes `piece` to `form` with utf8proc. Every output byte is aligned
// to the original bytes of the run of characters (a starter and its
// combining marks) it came from.
absl::Status NormalizeUnicode(Piece& piece, UnicodeForm form);

}  // namespace attnscope::tokenizer

namespace attnscope::tokenizer {
class Regex;
// A tokenizer.json pattern, {"String": s} (matched literally) or
// {"Regex": r}; InvalidArgument naming `path` otherwise.
absl::StatusOr<std::unique_ptr<Regex>> ParsePattern(const nlohmann::json& json,
                                                    const std::string& path,
                                                    const std::string& file);
// Replaces every match of `pattern` in `piece` by `content`; the new bytes
// are aligned to the original span of the match they replace.
absl::Status ReplaceAll(const Regex& pattern, const std::string& content, Piece& piece);
}  // namespace attnscope::tokenizer
