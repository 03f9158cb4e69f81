// A tokenizer as Hugging Face's tokenizers library runs a tokenizer.json:
// added tokens split off first (leftmost-longest, on raw text or on the
// normalized text as each token asks), the normalizer on every remaining
// piece, the pre-tokenizer, the BPE model, the post-processor for
// add_special_tokens, and the decoder chain for decoding.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/tokenizer/tokenizer.h"

namespace attnscope::tokenizer {

class HfTokenizer : public Tokenizer {
 public:
  // Reads the tokenizer.json at `path`. NotFound / InvalidArgument naming
  // the file (and the JSON path, e.g. `tokenizer.json:
  // normalizer.normalizers[1].type "Precompiled" is not supported`) for a
  // missing or malformed file or a component attnscope does not implement.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);
  // The same from the file's text; `file` names it in messages.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Parse(std::string_view json_text,
                                                            const std::string& file);
  ~HfTokenizer() override;

  absl::StatusOr<Encoding> Encode(std::string_view text) const override;
  Encoding AddSpecialTokens(Encoding encoding) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids) const override;
  absl::StatusOr<std::string> TokenBytes(int64_t id) const override;
  absl::StatusOr<std::string> TokenString(int64_t id) const override;
  bool IsSpecial(int64_t id) const override;
  int64_t vocab_size() const override;

  // Id of a token string (model vocabulary or added token), or -1.
  int64_t TokenToId(const std::string& token) const;

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::tokenizer
