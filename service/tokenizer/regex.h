// A compiled tokenizer.json regex (Oniguruma syntax, as Hugging Face's
// tokenizers uses) run on PCRE2 with UTF and Unicode properties.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace attnscope::tokenizer {

class Regex {
 public:
  // Compiles `pattern` (Oniguruma syntax: \s, \S spelled as Unicode
  // White_Space like Oniguruma's, \p{..}, (?i:..), lookahead). InvalidArgument
  // naming `where` and PCRE2's complaint if it does not compile.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern,
                                                        std::string_view where);
  // A pattern that matches `literal` exactly (tokenizer.json's {"String":..}).
  static absl::StatusOr<std::unique_ptr<Regex>> Literal(std::string_view literal,
                                                        std::string_view where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The [begin, end) byte spans of all non-overlapping matches of the
  // pattern in `text` (valid UTF-8), left to right; an empty match advances
  // by one character. Internal error if PCRE2 fails (resource limits).
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(std::string_view text) const;

 private:
  struct Pcre;
  explicit Regex(std::unique_ptr<Pcre> pcre);
  std::unique_ptr<Pcre> pcre_;
};

// Oniguruma -> PCRE2 rewrite used by Compile: \s and \S become explicit
// White_Space classes (PCRE2's \s differs on U+0085 and U+180E). Exposed for
// tests.
std::string OnigurumaToPcre2(std::string_view pattern);

// PCRE2's message for error `code` ("PCRE2 error N" when it has none).
std::string Pcre2ErrorMessage(int code);

}  // namespace attnscope::tokenizer
