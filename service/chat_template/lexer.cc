#include "service/chat_template/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"

namespace attnscope::chat_template {
namespace {

int LinesIn(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void RStripAll(std::string& s) {
  while (!s.empty() && IsSpace(s.back())) s.pop_back();
}

// lstrip_blocks: when only spaces and tabs precede the tag at `open` on its
// source line, drop them from the text.
void LStripLine(std::string_view src, size_t open, std::string& text) {
  size_t k = open;
  while (k > 0 && IsBlank(src[k - 1])) --k;
  if (k > 0 && src[k - 1] != '\n') return;
  for (size_t n = open - k; n > 0 && !text.empty() && IsBlank(text.back()); --n) text.pop_back();
}

absl::Status Error(int line, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", line, ": ", absl::string_view(what.data(), what.size())));
}

}  // namespace

absl::StatusOr<std::vector<Segment>> SplitTemplate(std::string_view source) {
  std::string src(source);
  if (src.size() >= 2 && src.compare(src.size() - 2, 2, "\r\n") == 0) {
    src.resize(src.size() - 2);
  } else if (!src.empty() && src.back() == '\n') {
    src.pop_back();
  }
  std::vector<Segment> out;
  std::string text;
  int line = 1;
  int text_line = 1;
  bool strip_next = false;  // "-" on the previous closing tag
  bool trim_newline = false;  // trim_blocks after a block tag or comment
  size_t pos = 0;
  while (pos < src.size()) {
    const size_t open = src.find('{', pos);
    const bool is_tag = open != std::string::npos && open + 1 < src.size() &&
                        (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#');
    const size_t text_end = open == std::string::npos ? src.size() : open + (is_tag ? 0 : 1);
    std::string chunk = src.substr(pos, text_end - pos);
    if (strip_next) {
      size_t k = 0;
      while (k < chunk.size() && IsSpace(chunk[k])) ++k;
      chunk.erase(0, k);
    } else if (trim_newline && !chunk.empty()) {
      if (chunk[0] == '\n') {
        chunk.erase(0, 1);
      } else if (chunk.compare(0, 2, "\r\n") == 0) {
        chunk.erase(0, 2);
      }
    }
    if (!chunk.empty()) {
      strip_next = false;
      trim_newline = false;
    }
    text += chunk;
    line += LinesIn(src.substr(pos, text_end - pos));
    pos = text_end;
    if (!is_tag) continue;
    const char kind = src[open + 1];
    const std::string close = kind == '{' ? "}}" : (kind == '%' ? "%}" : "#}");
    const size_t end = src.find(close, open + 2);
    if (end == std::string::npos) return Error(line, absl::StrCat("unclosed \"{", std::string(1, kind), "\""));
    size_t inner_begin = open + 2;
    size_t inner_end = end;
    const bool strip_before = inner_begin < end && src[inner_begin] == '-';
    const bool keep_before = inner_begin < end && src[inner_begin] == '+';
    if (strip_before || keep_before) ++inner_begin;
    bool strip_after = inner_end > inner_begin && src[inner_end - 1] == '-';
    if (strip_after) --inner_end;
    if (strip_before) {
      RStripAll(text);
    } else if (kind != '{' && !keep_before) {
      LStripLine(src, open, text);
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
    text.clear();
    const int tag_line = line;
    line += LinesIn(src.substr(open, end + 2 - open));
    if (kind != '#') {
      out.push_back({kind == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt,
                     src.substr(inner_begin, inner_end - inner_begin), tag_line});
    }
    strip_next = strip_after;
    trim_newline = kind != '{';
    text_line = line;
    pos = end + 2;
  }
  if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
  return out;
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view src, int line) {
  std::vector<Token> out;
  size_t i = 0;
  static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                               "<",  ">",  "=",  "(",  ")",  "[",  "]", "{", "}", ",", ".", ":", "|"};
  while (i < src.size()) {
    const char c = src[i];
    if (IsSpace(c)) {
      line += c == '\n';
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, std::string(src.substr(i, j - i)), line});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < src.size() && (std::isdigit(static_cast<unsigned char>(src[j])) || src[j] == '_' ||
                                (src[j] == '.' && !is_float && j + 1 < src.size() &&
                                 std::isdigit(static_cast<unsigned char>(src[j + 1]))))) {
        is_float = is_float || src[j] == '.';
        ++j;
      }
      std::string digits;
      for (size_t k = i; k < j; ++k) {
        if (src[k] != '_') digits += src[k];
      }
      out.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits, line});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < src.size() && src[j] != c; ++j) {
        if (src[j] != '\\' || j + 1 >= src.size()) {
          line += src[j] == '\n';
          value += src[j];
          continue;
        }
        const char e = src[++j];
        switch (e) {
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          case '0': value += '\0'; break;
          case '\\': case '\'': case '"': value += e; break;
          case 'u': {
            // Exactly four hex digits, as Python requires (it refuses the
            // template otherwise; std::stoul threw on non-hex digits and
            // ended the process: found by chat_template_fuzz).
            uint32_t code = 0;
            size_t digits = 0;
            for (; digits < 4 && j + 1 + digits < src.size(); ++digits) {
              const char h = src[j + 1 + digits];
              const int v = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
              if (v < 0) break;
              code = code * 16 + static_cast<uint32_t>(v);
            }
            if (digits < 4) return Error(line, "truncated \\uXXXX escape in a string literal");
            AppendUtf8(code, &value);
            j += 4;
            break;
          }
          default: value += '\\'; value += e;
        }
      }
      if (j >= src.size()) return Error(line, "unclosed string literal");
      out.push_back({Token::Kind::kString, value, line});
      i = j + 1;
      continue;
    }
    bool matched = false;
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (src.compare(i, n, op) == 0) {
        out.push_back({Token::Kind::kOp, op, line});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) return Error(line, absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }
  out.push_back({Token::Kind::kEnd, "", line});
  return out;
}

}  // namespace attnscope::chat_template
