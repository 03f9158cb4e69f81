// The added tokens of a tokenizer.json ("added_tokens": special tokens such
// as <|begin_of_text|>, and ordinary ones such as GPT-NeoX's space runs):
// found in the text leftmost-longest before the model runs, honouring
// single_word, lstrip and rstrip.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// Parses the "added_tokens" array (null or absent gives none); errors name
// `file` and the entry's JSON path.
absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const nlohmann::json& json,
                                                         const std::string& file);

// Finds one group of added tokens (those with normalized false, matched on
// the raw text, or those with normalized true, matched on normalized text).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  struct Match {
    size_t begin;  // including whitespace absorbed by lstrip
    size_t end;    // including whitespace absorbed by rstrip
    int32_t id;
  };

  // The matches in `text`, left to right, non-overlapping: at the leftmost
  // position where a token starts, the longest one; a single_word token only
  // where it is not inside a word.
  std::vector<Match> FindAll(std::string_view text) const;

  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;  // longest content first
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace attnscope::tokenizer
