#include "service/tokenizer/hf_added_tokens.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/tokenizer/hf_json.h"

namespace attnscope::tokenizer {
namespace {

bool IsWordByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

bool IsSpaceByte(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const nlohmann::json& json,
                                                         const std::string& file) {
  std::vector<AddedToken> out;
  if (json.is_null()) return out;
  if (!json.is_array()) return Malformed(file, "added_tokens", "expected an array");
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& e = json[i];
    const std::string path = absl::StrCat("added_tokens[", i, "]");
    if (!e.is_object()) return Malformed(file, path, "expected an object");
    AddedToken t;
    auto id = e.find("id");
    if (id == e.end() || !id->is_number_unsigned() ||
        id->get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId)) {
      return Malformed(file, path + ".id",
                       absl::StrCat("expected an integer in [0, ", kMaxTokenId, "]"));
    }
    t.id = id->get<int32_t>();
    ATTNSCOPE_ASSIGN_OR_RETURN(t.content, StringField(e, "content", path, file));
    if (t.content.empty()) return Malformed(file, path + ".content", "is empty");
    ATTNSCOPE_ASSIGN_OR_RETURN(t.single_word, BoolField(e, "single_word", path, file, false));
    ATTNSCOPE_ASSIGN_OR_RETURN(t.lstrip, BoolField(e, "lstrip", path, file, false));
    ATTNSCOPE_ASSIGN_OR_RETURN(t.rstrip, BoolField(e, "rstrip", path, file, false));
    ATTNSCOPE_ASSIGN_OR_RETURN(t.special, BoolField(e, "special", path, file, false));
    ATTNSCOPE_ASSIGN_OR_RETURN(t.normalized, BoolField(e, "normalized", path, file, !t.special));
    out.push_back(std::move(t));
  }
  return out;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::FindAll(std::string_view text) const {
  std::vector<Match> out;
  size_t previous_end = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* found = nullptr;
    for (uint32_t k : candidates) {
      const AddedToken& t = tokens_[k];
      if (text.compare(pos, t.content.size(), t.content) == 0) {
        found = &t;
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + found->content.size();
    pos = end;
    if (found->single_word) {
      const bool word_before = begin > 0 && IsWordByte(static_cast<unsigned char>(text[begin - 1]));
      const bool word_after = end < text.size() && IsWordByte(static_cast<unsigned char>(text[end]));
      if (word_before || word_after) continue;
    }
    if (found->lstrip) {
      while (begin > previous_end && IsSpaceByte(static_cast<unsigned char>(text[begin - 1]))) --begin;
    }
    if (found->rstrip) {
      while (end < text.size() && IsSpaceByte(static_cast<unsigned char>(text[end]))) ++end;
      pos = end;
    }
    out.push_back({begin, end, found->id});
    previous_end = end;
  }
  return out;
}

}  // namespace attnscope::tokenizer
