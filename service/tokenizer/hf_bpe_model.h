// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), as
// Hugging Face's tokenizers runs it: characters looked up in the vocabulary
// (byte fallback to <0xNN> tokens, or the unknown token, fused if asked),
// merges applied lowest rank first with ties to the leftmost, ignore_merges,
// and a bounded cache of results per pre-token.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::tokenizer {

class BpeModel {
 public:
  // One token of a pre-token: its id and the [begin, end) bytes of the
  // pre-token it covers.
  struct Token {
    int32_t id;
    int32_t begin;
    int32_t end;
  };

  // Reads `json` (the "model" object). InvalidArgument naming `file` and the
  // JSON path for a type other than BPE, dropout > 0, a malformed vocab or
  // merge, or a merge whose parts are not in the vocabulary.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Parse(const nlohmann::json& json,
                                                         const std::string& file);
  ~BpeModel();

  // The tokens of one pre-token (non-empty, valid UTF-8). Thread-safe.
  std::vector<Token> Encode(std::string_view word) const;

  // Vocabulary id of `token`, or -1.
  int32_t Find(const std::string& token) const;

  // id -> vocabulary string, "" for ids the model does not define.
  const std::vector<std::string>& id_to_token() const;

 private:
  struct Impl;
  explicit BpeModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::tokenizer
