// A checkpoint that ships only tokenizer.model: SentencePiece itself (Debian's
// libsentencepiece) encodes and decodes. add_special_tokens prepends the
// model's BOS, as LlamaTokenizer does by default.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/tokenizer/tokenizer.h"

namespace attnscope::tokenizer {

class SpmBackend;

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads the model file at `path`. InvalidArgument / NotFound naming it.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);
  ~SentencePieceTokenizer() override;

  absl::StatusOr<Encoding> Encode(std::string_view text) const override;
  Encoding AddSpecialTokens(Encoding encoding) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids) const override;
  absl::StatusOr<std::string> TokenBytes(int64_t id) const override;
  absl::StatusOr<std::string> TokenString(int64_t id) const override;
  bool IsSpecial(int64_t id) const override;
  int64_t vocab_size() const override;

 private:
  SentencePieceTokenizer(std::unique_ptr<SpmBackend> backend, std::string path);
  absl::Status CheckId(int64_t id) const;
  std::unique_ptr<SpmBackend> backend_;
  std::string path_;
};

// The tokenizer of a model directory: tokenizer.json if present, else
// vocab.json + merges.txt (GPT-2), else tokenizer.model (SentencePiece).
// NotFound naming the directory when it has none of them; otherwise the
// loader's own error (naming the file).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& directory);

// True if `directory` holds any tokenizer file LoadTokenizer reads.
bool HasTokenizerFiles(const std::string& directory);

}  // namespace attnscope::tokenizer
