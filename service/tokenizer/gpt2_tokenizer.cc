#include "service/tokenizer/gpt2_tokenizer.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/tokenizer/bpe.h"
#include "service/tokenizer/byte_level.h"
#include "service/tokenizer/gpt2_pretokenizer.h"

namespace attnscope::tokenizer {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr char kEndOfTextCStr[] = "<|endoftext|>";
// The cache is bounded so a server fed endless distinct words cannot grow
// without limit; long pieces are rare and not worth keeping.
constexpr size_t kMaxCacheEntries = 1 << 16;
constexpr size_t kMaxCachedPieceBytes = 64;

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": no such file"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (!in || !contents) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot read"));
  }
  return std::move(contents).str();
}

using Vocab = std::unordered_map<std::string, int32_t>;

// vocab.json: a JSON object token string -> id, ids exactly 0..size-1.
absl::StatusOr<Vocab> ParseVocab(const std::string& text, const std::string& path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
  if (!json.is_object() || json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a non-empty JSON object {token: id}, got ",
                     json.is_object() ? "an empty object" : json.type_name()));
  }
  constexpr size_t kMaxEntries = std::numeric_limits<int32_t>::max();
  if (json.size() > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", json.size(), " entries, more than the limit ", kMaxEntries));
  }
  const auto size = static_cast<int64_t>(json.size());
  Vocab vocab;
  std::vector<bool> seen(json.size(), false);
  for (const auto& [token, value] : json.items()) {
    if (!value.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": id of token \"", token,
                                                     "\" is not an integer: ", value.dump()));
    }
    const auto id = value.get<int64_t>();
    if (id < 0 || id >= size || seen[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": id ", id, " of token \"", token, "\" is ",
          (id < 0 || id >= size) ? "outside [0, " + std::to_string(size) + ")" : "a duplicate",
          "; ids must be 0..number of entries - 1"));
    }
    seen[id] = true;
    vocab.emplace(token, static_cast<int32_t>(id));
  }
  return vocab;
}

}  // namespace

struct Gpt2Tokenizer::Impl {
  std::vector<std::string> token_strings;  // id -> vocab.json spelling
  std::vector<std::string> token_bytes;    // id -> raw bytes it stands for
  std::array<int32_t, 256> byte_ids{};     // byte -> id of its one-symbol token
  BpeMerges merges;
  std::unique_ptr<Gpt2PreTokenizer> pre_tokenizer;
  int32_t end_of_text_id = -1;

  mutable std::shared_mutex cache_mutex;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache;

  absl::Status BuildTokenTables(const Vocab& vocab, const std::string& path);
  absl::Status CheckId(int64_t id, std::string_view what) const;
  std::vector<int32_t> EncodePiece(std::string_view piece) const;
  absl::Status EncodeOrdinary(std::string_view text, size_t base, Encoding* out) const;
};

absl::Status Gpt2Tokenizer::Impl::BuildTokenTables(const Vocab& vocab, const std::string& path) {
  token_strings.resize(vocab.size());
  token_bytes.resize(vocab.size());
  for (const auto& [token, id] : vocab) {
    token_strings[id] = token;
    // A token that is not made of byte symbols (an added token such as
    // <|endoftext|> spelled in plain text) stands for its own UTF-8 bytes.
    if (!SymbolsToBytes(token, &token_bytes[id])) token_bytes[id] = token;
  }
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = ByteSymbolUtf8(static_cast<uint8_t>(b));
    auto it = vocab.find(symbol);
    if (it == vocab.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": no token for byte 0x", absl::Hex(b, absl::kZeroPad2), " (symbol \"", symbol,
          "\"); a byte-level BPE vocabulary needs all 256"));
    }
    byte_ids[b] = it->second;
  }
  auto eot = vocab.find(std::string(kEndOfText));
  if (eot == vocab.end()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no ", kEndOfTextCStr, " token"));
  }
  end_of_text_id = eot->second;
  return absl::OkStatus();
}

absl::Status Gpt2Tokenizer::Impl::CheckId(int64_t id, std::string_view what) const {
  if (id >= 0 && id < static_cast<int64_t>(token_strings.size())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()),
                                                 ": token id ", id,
                                                 " is outside the vocabulary [0, ",
                                                 token_strings.size(), ")"));
}

std::vector<int32_t> Gpt2Tokenizer::Impl::EncodePiece(std::string_view piece) const {
  if (piece.size() == 1) return {byte_ids[static_cast<uint8_t>(piece[0])]};
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::shared_lock<std::shared_mutex> lock(cache_mutex);
    auto it = cache.find(absl::string_view(piece.data(), piece.size()));
    if (it != cache.end()) return it->second;
  }
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(byte_ids[static_cast<uint8_t>(c)]);
  std::vector<int32_t> ids = merges.Apply(symbols);
  if (cacheable) {
    std::unique_lock<std::shared_mutex> lock(cache_mutex);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(std::string(piece), ids);
  }
  return ids;
}

absl::Status Gpt2Tokenizer::Impl::EncodeOrdinary(std::string_view text, size_t base,
                                                 Encoding* out) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  ATTNSCOPE_RETURN_IF_ERROR(pre_tokenizer->Split(text, base, &pieces));
  for (const auto& [begin, end] : pieces) {
    auto offset = static_cast<int64_t>(begin);
    for (int32_t id : EncodePiece(text.substr(begin - base, end - begin))) {
      // A BPE token spells as many bytes as it has symbols, so offsets tile.
      const auto length = static_cast<int64_t>(token_bytes[id].size());
      out->ids.push_back(id);
      out->offsets.emplace_back(offset, offset + length);
      offset += length;
    }
  }
  return absl::OkStatus();
}

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Load(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::string vocab_path = (root / "vocab.json").string();
  const std::string merges_path = (root / "merges.txt").string();
  auto impl = std::make_unique<Impl>();
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string vocab_text, ReadFile(vocab_path));
  ATTNSCOPE_ASSIGN_OR_RETURN(const Vocab vocab, ParseVocab(vocab_text, vocab_path));
  ATTNSCOPE_RETURN_IF_ERROR(impl->BuildTokenTables(vocab, vocab_path));
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string merges_text, ReadFile(merges_path));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->merges, BpeMerges::Parse(merges_text, merges_path, vocab));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->pre_tokenizer, Gpt2PreTokenizer::Create());
  return std::unique_ptr<Gpt2Tokenizer>(new Gpt2Tokenizer(std::move(impl)));
}

absl::StatusOr<Encoding> Gpt2Tokenizer::Encode(std::string_view text) const {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
  Encoding out;
  size_t pos = 0;
  while (true) {
    const size_t special = text.find(kEndOfText, pos);
    const size_t end = special == std::string_view::npos ? text.size() : special;
    ATTNSCOPE_RETURN_IF_ERROR(impl_->EncodeOrdinary(text.substr(pos, end - pos), pos, &out));
    if (special == std::string_view::npos) break;
    out.ids.push_back(impl_->end_of_text_id);
    out.offsets.emplace_back(special, special + kEndOfText.size());
    pos = special + kEndOfText.size();
  }
  return out;
}

absl::StatusOr<std::string> Gpt2Tokenizer::Decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTNSCOPE_RETURN_IF_ERROR(impl_->CheckId(ids[i], absl::StrCat("Decode: ids[", i, "]")));
    bytes += impl_->token_bytes[ids[i]];
  }
  return SanitizeUtf8(bytes);
}

absl::StatusOr<std::string> Gpt2Tokenizer::TokenBytes(int64_t id) const {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->CheckId(id, "TokenBytes"));
  return impl_->token_bytes[id];
}

absl::StatusOr<std::string> Gpt2Tokenizer::TokenString(int64_t id) const {
  ATTNSCOPE_RETURN_IF_ERROR(impl_->CheckId(id, "TokenString"));
  return impl_->token_strings[id];
}

bool Gpt2Tokenizer::IsSpecial(int64_t id) const { return id == impl_->end_of_text_id; }

int64_t Gpt2Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->token_strings.size());
}

int64_t Gpt2Tokenizer::end_of_text_id() const { return impl_->end_of_text_id; }

}  // namespace attnscope::tokenizer
