#include "service/tokenizer/hf_normalizer.h"

#include <utf8proc.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/tokenizer/hf_json.h"
#include "service/tokenizer/regex.h"

namespace attnscope::tokenizer {
namespace {

// Decodes the UTF-8 character at text[i] (valid UTF-8), advancing i.
int32_t NextChar(const std::string& text, size_t& i) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                  static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
  i += n > 0 ? static_cast<size_t>(n) : 1;
  return cp;
}

void AppendChar(int32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

absl::StatusOr<std::string> MapForm(const std::string& text, UnicodeForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case UnicodeForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case UnicodeForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case UnicodeForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out,
                              static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Unicode normalization failed: ", utf8proc_errmsg(n)));
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  free(out);
  return result;
}

// Rebuilds `piece` from per-character replacements: each entry is the
// [begin, end) of the old text and what replaces it.
struct Rewrite {
  Piece out;
  void Emit(const Piece& from, size_t begin, size_t end, const std::string& with) {
    const auto span = from.Span(begin, end);
    out.text += with;
    out.align.insert(out.align.end(), with.size(), span);
  }
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form) : form_(form) {}
  absl::Status Apply(Piece& piece) const override { return NormalizeUnicode(piece, form_); }

 private:
  UnicodeForm form_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  absl::Status Apply(Piece& piece) const override {
    for (const auto& p : parts_) ATTNSCOPE_RETURN_IF_ERROR(p->Apply(piece));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  absl::Status Apply(Piece& piece) const override {
    if (piece.text.empty()) return absl::OkStatus();
    const auto first = piece.align.front();
    piece.text.insert(0, prepend_);
    piece.align.insert(piece.align.begin(), prepend_.size(), first);
    return absl::OkStatus();
  }

 private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::Status Apply(Piece& piece) const override {
    return ReplaceAll(*pattern_, content_, piece);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Lowercase and StripAccents: a per-character map.
class CharMapNormalizer : public Normalizer {
 public:
  explicit CharMapNormalizer(bool lowercase) : lowercase_(lowercase) {}
  absl::Status Apply(Piece& piece) const override {
    if (!lowercase_) ATTNSCOPE_RETURN_IF_ERROR(NormalizeUnicode(piece, UnicodeForm::kNfd));
    Rewrite r;
    for (size_t i = 0; i < piece.text.size();) {
      const size_t begin = i;
      const int32_t cp = NextChar(piece.text, i);
      std::string with;
      if (lowercase_) {
        AppendChar(utf8proc_tolower(cp), with);
      } else if (utf8proc_category(cp) != UTF8PROC_CATEGORY_MN) {
        AppendChar(cp, with);
      }
      r.Emit(piece, begin, i, with);
    }
    r.out.origin = piece.origin;
    piece = std::move(r.out);
    return absl::OkStatus();
  }

 private:
  bool lowercase_;
};

bool IsWhiteSpace(int32_t cp) {
  const auto cat = utf8proc_category(cp);
  return cp == '\t' || cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || cp == 0x85 ||
         cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  absl::Status Apply(Piece& piece) const override {
    size_t begin = 0;
    size_t end = piece.text.size();
    if (left_) {
      for (size_t i = 0; i < piece.text.size();) {
        if (!IsWhiteSpace(NextChar(piece.text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      end = begin;  // end of the last non-whitespace character
      for (size_t i = begin; i < piece.text.size();) {
        if (!IsWhiteSpace(NextChar(piece.text, i))) end = i;
      }
    }
    if (begin > end) begin = end;
    const int64_t origin = piece.origin;
    piece = piece.Sub(begin, end);
    piece.origin = origin;
    return absl::OkStatus();
  }

 private:
  bool left_;
  bool right_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Regex>> ParsePattern(const nlohmann::json& json,
                                                    const std::string& path,
                                                    const std::string& file) {
  if (json.is_object() && json.size() == 1) {
    if (auto it = json.find("String"); it != json.end() && it->is_string()) {
      return Regex::Literal(it->get<std::string>(), absl::StrCat(file, ": ", path));
    }
    if (auto it = json.find("Regex"); it != json.end() && it->is_string()) {
      return Regex::Compile(it->get<std::string>(), absl::StrCat(file, ": ", path));
    }
  }
  return Malformed(file, path, "expected {\"String\": ...} or {\"Regex\": ...}");
}

absl::Status ReplaceAll(const Regex& pattern, const std::string& content, Piece& piece) {
  ATTNSCOPE_ASSIGN_OR_RETURN(auto matches, pattern.FindAll(piece.text));
  if (matches.empty()) return absl::OkStatus();
  Piece out;
  out.origin = piece.origin;
  size_t pos = 0;
  for (const auto& [begin, end] : matches) {
    out.text.append(piece.text, pos, begin - pos);
    out.align.insert(out.align.end(), piece.align.begin() + static_cast<std::ptrdiff_t>(pos),
                     piece.align.begin() + static_cast<std::ptrdiff_t>(begin));
    const auto span = piece.Span(begin, end);
    out.text += content;
    out.align.insert(out.align.end(), content.size(), span);
    pos = end;
  }
  out.text.append(piece.text, pos, std::string::npos);
  out.align.insert(out.align.end(), piece.align.begin() + static_cast<std::ptrdiff_t>(pos),
                   piece.align.end());
  piece = std::move(out);
  return absl::OkStatus();
}

absl::Status NormalizeUnicode(Piece& piece, UnicodeForm form) {
  bool ascii = true;
  for (char c : piece.text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return absl::OkStatus();
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string whole, MapForm(piece.text, form));
  if (whole == piece.text) return absl::OkStatus();
  // Runs starting at each character of combining class 0 normalize
  // independently in all but rare cases (Hangul jamo, some Indic vowels);
  // when they do, each run keeps its own alignment, else the whole piece
  // shares one span.
  Rewrite r;
  size_t run_begin = 0;
  for (size_t i = 0; i <= piece.text.size();) {
    const size_t at = i;
    const bool end = i == piece.text.size();
    const bool starter = end || utf8proc_get_property(NextChar(piece.text, i))->combining_class == 0;
    if (starter && at > run_begin) {
      ATTNSCOPE_ASSIGN_OR_RETURN(std::string run,
                                 MapForm(piece.text.substr(run_begin, at - run_begin), form));
      r.Emit(piece, run_begin, at, run);
      run_begin = at;
    }
    if (end) break;
  }
  if (r.out.text != whole) {
    r.out = Piece{};
    r.Emit(piece, 0, piece.text.size(), whole);
  }
  r.out.origin = piece.origin;
  piece = std::move(r.out);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& json,
                                                            const std::string& path,
                                                            const std::string& file) {
  if (json.is_null()) return nullptr;
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, path, file));
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<CharMapNormalizer>(true);
  if (type == "StripAccents") return std::make_unique<CharMapNormalizer>(false);
  if (type == "Sequence") {
    ATTNSCOPE_ASSIGN_OR_RETURN(const nlohmann::json* list,
                               ArrayField(json, "normalizers", path, file));
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      ATTNSCOPE_ASSIGN_OR_RETURN(
          auto part, ParseNormalizer((*list)[i], absl::StrCat(path, ".normalizers[", i, "]"), file));
      if (part != nullptr) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "Prepend") {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string prepend, StringField(json, "prepend", path, file));
    return std::make_unique<PrependNormalizer>(std::move(prepend));
  }
  if (type == "Replace") {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string content, StringField(json, "content", path, file));
    ATTNSCOPE_ASSIGN_OR_RETURN(
        auto pattern, ParsePattern(json.value("pattern", nlohmann::json()), path + ".pattern", file));
    return std::make_unique<ReplaceNormalizer>(std::move(pattern), std::move(content));
  }
  if (type == "Strip") {
    ATTNSCOPE_ASSIGN_OR_RETURN(bool left, BoolField(json, "strip_left", path, file, true));
    ATTNSCOPE_ASSIGN_OR_RETURN(bool right, BoolField(json, "strip_right", path, file, true));
    return std::make_unique<StripNormalizer>(left, right);
  }
  return UnsupportedType(file, path, type);
}

}  // namespace attnscope::tokenizer
