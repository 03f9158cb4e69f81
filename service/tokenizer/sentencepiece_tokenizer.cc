#include "service/tokenizer/sentencepiece_tokenizer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/tokenizer/gpt2_tokenizer.h"
#include "service/tokenizer/hf_decoder.h"
#include "service/tokenizer/hf_tokenizer.h"
#include "service/tokenizer/spm_backend.h"

namespace attnscope::tokenizer {

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<SpmBackend> backend,
                                               std::string path)
    : backend_(std::move(backend)), path_(std::move(path)) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  std::string error;
  std::unique_ptr<SpmBackend> backend = SpmBackend::Load(path, &error);
  if (backend == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a SentencePiece model (", error, ")"));
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(backend), path));
}

absl::Status SentencePieceTokenizer::CheckId(int64_t id) const {
  if (id >= 0 && id < vocab_size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary of ",
                                                 path_, " [0, ", vocab_size(), ")"));
}

absl::StatusOr<Encoding> SentencePieceTokenizer::Encode(std::string_view text) const {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
  std::vector<SpmBackend::Piece> pieces;
  std::string error;
  if (!backend_->Encode(std::string(text), &pieces, &error)) {
    return absl::InternalError(absl::StrCat(path_, ": SentencePiece: ", error));
  }
  Encoding out;
  for (const auto& p : pieces) {
    out.ids.push_back(p.id);
    out.offsets.emplace_back(p.begin, p.end);
  }
  return out;
}

Encoding SentencePieceTokenizer::AddSpecialTokens(Encoding encoding) const {
  if (backend_->bos_id() < 0) return encoding;
  encoding.ids.insert(encoding.ids.begin(), backend_->bos_id());
  encoding.offsets.insert(encoding.offsets.begin(), {0, 0});
  return encoding;
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(const std::vector<int64_t>& ids) const {
  std::vector<int> narrow;
  for (int64_t id : ids) {
    ATTNSCOPE_RETURN_IF_ERROR(CheckId(id));
    narrow.push_back(static_cast<int>(id));
  }
  return SanitizeUtf8(backend_->Decode(narrow));
}

absl::StatusOr<std::string> SentencePieceTokenizer::TokenBytes(int64_t id) const {
  ATTNSCOPE_RETURN_IF_ERROR(CheckId(id));
  const std::string piece = backend_->IdToPiece(static_cast<int>(id));
  if (backend_->IsByte(static_cast<int>(id))) {
    const int b = ByteFallbackValue(piece);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  if (IsSpecial(id)) return piece;
  std::string bytes;
  constexpr std::string_view kMarker = "\xE2\x96\x81";
  for (size_t k = 0; k < piece.size();) {
    if (piece.compare(k, kMarker.size(), kMarker) == 0) {
      bytes += ' ';
      k += kMarker.size();
    } else {
      bytes += piece[k++];
    }
  }
  return bytes;
}

absl::StatusOr<std::string> SentencePieceTokenizer::TokenString(int64_t id) const {
  ATTNSCOPE_RETURN_IF_ERROR(CheckId(id));
  return backend_->IdToPiece(static_cast<int>(id));
}

bool SentencePieceTokenizer::IsSpecial(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  return backend_->IsControl(static_cast<int>(id)) || backend_->IsUnknown(static_cast<int>(id));
}

int64_t SentencePieceTokenizer::vocab_size() const { return backend_->size(); }

bool HasTokenizerFiles(const std::string& directory) {
  const std::filesystem::path dir(directory);
  std::error_code ec;
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model"}) {
    if (std::filesystem::exists(dir / name, ec)) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& directory) {
  const std::filesystem::path dir(directory);
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(auto tok, HfTokenizer::Load((dir / "tokenizer.json").string()));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (std::filesystem::exists(dir / "vocab.json", ec) ||
      std::filesystem::exists(dir / "merges.txt", ec)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::Load(directory));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (std::filesystem::exists(dir / "tokenizer.model", ec)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(auto tok,
                               SentencePieceTokenizer::Load((dir / "tokenizer.model").string()));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  return absl::NotFoundError(absl::StrCat(
      directory, " has no tokenizer (tokenizer.json, vocab.json + merges.txt, or tokenizer.model)"));
}

}  // namespace attnscope::tokenizer
