// Rank-ordered BPE merges (merges.txt) over token ids, and the merge loop of
// OpenAI's GPT-2 encoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace attnscope::tokenizer {

class BpeMerges {
 public:
  struct Merge {
    int32_t rank;       // lower merges first (merges.txt line number)
    int32_t merged_id;  // vocabulary id of left + right
  };

  // Parses the text of a merges.txt: an optional first line "#version...",
  // then one merge per line, "left right" (two vocabulary strings separated
  // by a space), rank = line order. Empty lines are skipped; a trailing '\r'
  // is ignored. A pair listed twice keeps its later rank (as GPT-2's encoder
  // and Hugging Face do). InvalidArgument naming `path` and the line number
  // for a line without exactly two symbols, or a symbol or merged result
  // missing from `vocab` (token string -> id).
  static absl::StatusOr<BpeMerges> Parse(
      std::string_view text, std::string_view path,
      const std::unordered_map<std::string, int32_t>& vocab);

  // The merge of adjacent tokens `left`, `right`, or nullptr if none.
  const Merge* Find(int32_t left, int32_t right) const;

  // Runs BPE over `symbols` (the ids of one pre-token's byte symbols, in
  // order): repeatedly takes the lowest-ranked adjacent pair present and
  // merges every occurrence of it left to right, until no pair has a merge.
  // Returns the final ids. O(n log n) in the number of symbols.
  std::vector<int32_t> Apply(const std::vector<int32_t>& symbols) const;

  // Number of distinct merges.
  size_t size() const { return merges_.size(); }

 private:
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  absl::flat_hash_map<uint64_t, Merge> merges_;
};

}  // namespace attnscope::tokenizer
