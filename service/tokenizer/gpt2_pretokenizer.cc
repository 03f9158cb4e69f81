#include "service/tokenizer/gpt2_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"
#include "service/tokenizer/regex.h"

namespace attnscope::tokenizer {
namespace {

// GPT-2's pattern with \s spelled out as Python's `regex` module has it
// (the Unicode White_Space property). PCRE2's \s differs: it lacks U+0085
// NEXT LINE and has U+180E MONGOLIAN VOWEL SEPARATOR.
std::string Gpt2Pattern() {
  const std::string ws =
      R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
      R"(\x{205F}\x{3000})";
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" + ws + R"(\p{L}\p{N}]+)" +
         "|[" + ws + "]+(?![^" + ws + "])|[" + ws + "]+";
}

}  // namespace

struct Gpt2PreTokenizer::Pcre {
  pcre2_code* code = nullptr;
  ~Pcre() { pcre2_code_free(code); }
};

Gpt2PreTokenizer::Gpt2PreTokenizer(std::unique_ptr<Pcre> pcre) : pcre_(std::move(pcre)) {}
Gpt2PreTokenizer::~Gpt2PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<Gpt2PreTokenizer>> Gpt2PreTokenizer::Create() {
  auto pcre = std::make_unique<Pcre>();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string pattern = Gpt2Pattern();
  pcre->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (pcre->code == nullptr) {
    return absl::InternalError(absl::StrCat("GPT-2 pre-split pattern: ",
                                            Pcre2ErrorMessage(error_code), " at offset ",
                                            error_offset));
  }
  // JIT is an optimisation only: without it (unsupported platform) the
  // interpreter gives the same matches.
  pcre2_jit_compile(pcre->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Gpt2PreTokenizer>(new Gpt2PreTokenizer(std::move(pcre)));
}

absl::Status Gpt2PreTokenizer::Split(std::string_view text, size_t base,
                                     std::vector<std::pair<size_t, size_t>>* pieces) const {
  if (text.empty()) return absl::OkStatus();
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(pcre_->code, nullptr), pcre2_match_data_free);
  if (match == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    // The caller validated the UTF-8 once; re-checking on every call would
    // make splitting quadratic in the text length.
    const int rc = pcre2_match(pcre_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                               match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError(absl::StrCat("GPT-2 pre-split at byte ", base + pos, ": ",
                                              Pcre2ErrorMessage(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    size_t begin = ovector[0];
    size_t end = ovector[1];
    // Every character matches some alternative, so there are no gaps and no
    // empty matches; should that ever fail, keep the tiling and progress.
    if (begin > pos) pieces->emplace_back(base + pos, base + begin);
    if (begin >= text.size()) break;
    if (end <= begin) end = begin + Utf8SequenceLength(static_cast<unsigned char>(text[begin]));
    pieces->emplace_back(base + begin, base + end);
    pos = end;
  }
  if (pos < text.size()) pieces->emplace_back(base + pos, base + text.size());
  return absl::OkStatus();
}

}  // namespace attnscope::tokenizer
