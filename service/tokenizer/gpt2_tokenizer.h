// GPT-2's byte-level BPE (vocab.json + merges.txt), as OpenAI released it
// and as Hugging Face runs it: the GPT-2 regex pre-split (Unicode classes via
// PCRE2), every UTF-8 byte mapped to a printable symbol, merges applied
// lowest rank first, and <|endoftext|> matched as a special token anywhere in
// the text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "service/tokenizer/tokenizer.h"

namespace attnscope::tokenizer {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Reads `dir`/vocab.json and `dir`/merges.txt. NotFound / InvalidArgument
  // naming the file for a missing file, invalid JSON, or a malformed merge
  // line.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Load(const std::string& dir);

  ~Gpt2Tokenizer() override;

  absl::StatusOr<Encoding> Encode(std::string_view text) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids) const override;
  absl::StatusOr<std::string> TokenBytes(int64_t id) const override;
  absl::StatusOr<std::string> TokenString(int64_t id) const override;
  bool IsSpecial(int64_t id) const override;
  int64_t vocab_size() const override;

  // Id of <|endoftext|> (50256 for GPT-2's vocabulary).
  int64_t end_of_text_id() const;

 private:
  struct Impl;
  explicit Gpt2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::tokenizer
