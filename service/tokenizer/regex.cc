#include "service/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"

namespace attnscope::tokenizer {
namespace {

// The Unicode White_Space property, as the inside of a character class.
constexpr char kWhiteSpace[] =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
    R"(\x{205F}\x{3000})";

absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

std::string Pcre2ErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) {
    return absl::StrCat("PCRE2 error ", code);
  }
  return reinterpret_cast<const char*>(buffer);
}

std::string OnigurumaToPcre2(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : absl::StrCat("[", kWhiteSpace, "]");
      } else if (e == 'S' && !in_class) {
        out += absl::StrCat("[^", kWhiteSpace, "]");
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' or '^]' right after the opening bracket is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Pcre {
  pcre2_code* code = nullptr;
  ~Pcre() { pcre2_code_free(code); }
};

Regex::Regex(std::unique_ptr<Pcre> pcre) : pcre_(std::move(pcre)) {}
Regex::~Regex() = default;

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern,
                                                      std::string_view where) {
  const std::string converted = OnigurumaToPcre2(pattern);
  auto pcre = std::make_unique<Pcre>();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(converted.data()), converted.size(),
                             PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (pcre->code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Absl(where), ": regex \"", Absl(pattern),
                                                   "\" does not compile: ",
                                                   Pcre2ErrorMessage(error_code)));
  }
  pcre2_jit_compile(pcre->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Regex>(new Regex(std::move(pcre)));
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::Literal(std::string_view literal,
                                                      std::string_view where) {
  // \Q..\E quotes everything except a literal "\E", which is spelled apart.
  std::string pattern = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'E') {
      pattern += "\\E\\\\\\Q";
      continue;
    }
    pattern += literal[i];
  }
  pattern += "\\E";
  auto pcre = std::make_unique<Pcre>();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF, &error_code, &error_offset, nullptr);
  if (pcre->code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Absl(where), ": string pattern: ", Pcre2ErrorMessage(error_code)));
  }
  return std::unique_ptr<Regex>(new Regex(std::move(pcre)));
}

absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(
    std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (text.empty()) return matches;
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(pcre_->code, nullptr), pcre2_match_data_free);
  if (match == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(pcre_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                               match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError(absl::StrCat("regex match at byte ", pos, ": ",
                                              Pcre2ErrorMessage(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      pos = end;
    } else {
      if (begin >= text.size()) break;
      pos = begin + Utf8SequenceLength(static_cast<unsigned char>(text[begin]));
    }
  }
  return matches;
}

}  // namespace attnscope::tokenizer
