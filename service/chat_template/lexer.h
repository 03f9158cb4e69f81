// Splits a chat template into text, {{ expression }} and {% statement %}
// segments the way Hugging Face's Jinja environment does (trim_blocks and
// lstrip_blocks on, "-" whitespace control, comments dropped, one trailing
// newline removed), and splits expressions into tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace attnscope::chat_template {

struct Segment {
  enum class Kind { kText, kExpr, kStmt };
  Kind kind;
  std::string text;  // the text, or the source between the delimiters
  int line;          // 1-based line where it starts
};

// InvalidArgument "chat template line N: ..." for an unclosed tag.
absl::StatusOr<std::vector<Segment>> SplitTemplate(std::string_view source);

struct Token {
  enum class Kind { kName, kInt, kFloat, kString, kOp, kEnd };
  Kind kind;
  std::string text;  // a string token's decoded value
  int line;
};

// InvalidArgument naming the line for an unknown character or an unclosed
// string.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, int line);

}  // namespace attnscope::chat_template
