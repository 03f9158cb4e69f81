// tokenizer.json pre-tokenizers: ByteLevel, Split, Metaspace, Sequence,
// Whitespace, WhitespaceSplit, Digits, Punctuation. Each turns a list of
// pieces into a finer one; the model then encodes every piece separately.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/tokenizer/hf_piece.h"

namespace attnscope::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their split (and rewritten) form, in order.
  virtual absl::Status Split(std::vector<Piece>& pieces) const = 0;
};

// Builds the pre-tokenizer described by `json` (null gives nullptr); errors
// name `file` and the JSON `path` ("pre_tokenizer.pretokenizers[0]").
absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& json,
                                                                const std::string& path,
                                                                const std::string& file);

// How Split treats the matches of its pattern (Hugging Face's
// SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The [begin, end) spans `text` splits into, given the spans of the
// pattern's matches in it (sorted, non-overlapping); empty spans are dropped.
std::vector<std::pair<size_t, size_t>> SplitSpans(
    size_t length, const std::vector<std::pair<size_t, size_t>>& matches, SplitBehavior behavior,
    bool invert);

}  // namespace attnscope::tokenizer
