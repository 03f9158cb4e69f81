#include "service/chat_template/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
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

// Splits a template's source into segments, one tag at a time, applying
// Hugging Face's whitespace control to the text between tags.
class Splitter {
 public:
  explicit Splitter(std::string src) : src_(std::move(src)) {}

  absl::StatusOr<std::vector<Segment>> Split() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t open = src_.find('{', pos);
      const bool is_tag = open != std::string::npos && open + 1 < src_.size() &&
                          (src_[open + 1] == '{' || src_[open + 1] == '%' || src_[open + 1] == '#');
      const size_t text_end = open == std::string::npos ? src_.size() : open + (is_tag ? 0 : 1);
      AddText(pos, text_end);
      pos = text_end;
      if (!is_tag) continue;
      ATTNSCOPE_ASSIGN_OR_RETURN(pos, AddTag(open));
    }
    FlushText();
    return std::move(out_);
  }

 private:
  // The text src_[begin, end), less what the previous tag's whitespace
  // control strips from its start.
  void AddText(size_t begin, size_t end) {
    std::string chunk = src_.substr(begin, end - begin);
    if (strip_next_) {
      size_t k = 0;
      while (k < chunk.size() && IsSpace(chunk[k])) ++k;
      chunk.erase(0, k);
    } else if (trim_newline_ && !chunk.empty()) {
      if (chunk[0] == '\n') {
        chunk.erase(0, 1);
      } else if (chunk.compare(0, 2, "\r\n") == 0) {
        chunk.erase(0, 2);
      }
    }
    if (!chunk.empty()) {
      strip_next_ = false;
      trim_newline_ = false;
    }
    text_ += chunk;
    line_ += LinesIn(std::string_view(src_).substr(begin, end - begin));
  }

  // The tag starting at `open` ("{{", "{%" or "{#"); returns the position
  // after it.
  absl::StatusOr<size_t> AddTag(size_t open) {
    const char kind = src_[open + 1];
    const std::string close = kind == '{' ? "}}" : (kind == '%' ? "%}" : "#}");
    const size_t end = src_.find(close, open + 2);
    if (end == std::string::npos) return Error(line_, absl::StrCat("unclosed \"{", std::string(1, kind), "\""));
    size_t inner_begin = open + 2;
    size_t inner_end = end;
    const bool strip_before = inner_begin < end && src_[inner_begin] == '-';
    const bool keep_before = inner_begin < end && src_[inner_begin] == '+';
    if (strip_before || keep_before) ++inner_begin;
    const bool strip_after = inner_end > inner_begin && src_[inner_end - 1] == '-';
    if (strip_after) --inner_end;
    if (strip_before) {
      RStripAll(text_);
    } else if (kind != '{' && !keep_before) {
      LStripLine(src_, open, text_);
    }
    FlushText();
    const int tag_line = line_;
    line_ += LinesIn(std::string_view(src_).substr(open, end + 2 - open));
    if (kind != '#') {
      out_.push_back({kind == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt,
                      src_.substr(inner_begin, inner_end - inner_begin), tag_line});
    }
    strip_next_ = strip_after;
    trim_newline_ = kind != '{';  // trim_blocks after a block tag or comment
    text_line_ = line_;
    return end + 2;
  }

  void FlushText() {
    if (!text_.empty()) out_.push_back({Segment::Kind::kText, text_, text_line_});
    text_.clear();
  }

  const std::string src_;
  std::vector<Segment> out_;
  std::string text_;  // text not yet emitted
  int line_ = 1;
  int text_line_ = 1;
  bool strip_next_ = false;  // "-" on the previous closing tag
  bool trim_newline_ = false;  // trim_blocks after a block tag or comment
};

// Splits an expression or statement into tokens, one at a time.
class Lexer {
 public:
  Lexer(std::string_view src, int line) : src_(src), line_(line) {}

  absl::StatusOr<std::vector<Token>> Tokens() {
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (IsSpace(c)) {
        line_ += c == '\n';
        ++i_;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        Name();
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        Number();
      } else if (c == '\'' || c == '"') {
        ATTNSCOPE_RETURN_IF_ERROR(String(c));
      } else {
        ATTNSCOPE_RETURN_IF_ERROR(Operator());
      }
    }
    out_.push_back({Token::Kind::kEnd, "", line_});
    return std::move(out_);
  }

 private:
  static bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

  void Name() {
    size_t j = i_;
    while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
    out_.push_back({Token::Kind::kName, std::string(src_.substr(i_, j - i_)), line_});
    i_ = j;
  }

  // 12, 1_000, 2.5 (a '.' counts only before a digit).
  void Number() {
    size_t j = i_;
    bool is_float = false;
    while (j < src_.size() &&
           (IsDigit(src_[j]) || src_[j] == '_' ||
            (src_[j] == '.' && !is_float && j + 1 < src_.size() && IsDigit(src_[j + 1])))) {
      is_float = is_float || src_[j] == '.';
      ++j;
    }
    std::string digits;
    for (size_t k = i_; k < j; ++k) {
      if (src_[k] != '_') digits += src_[k];
    }
    out_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits, line_});
    i_ = j;
  }

  // A string literal quoted with `quote`, its escapes decoded.
  absl::Status String(char quote) {
    std::string value;
    size_t j = i_ + 1;
    for (; j < src_.size() && src_[j] != quote; ++j) {
      if (src_[j] != '\\' || j + 1 >= src_.size()) {
        line_ += src_[j] == '\n';
        value += src_[j];
        continue;
      }
      ATTNSCOPE_RETURN_IF_ERROR(Escape(++j, value));
    }
    if (j >= src_.size()) return Error(line_, "unclosed string literal");
    out_.push_back({Token::Kind::kString, value, line_});
    i_ = j + 1;
    return absl::OkStatus();
  }

  // The escape whose letter is at src_[j] (after its backslash), appended to
  // `value`; j is left on its last character.
  absl::Status Escape(size_t& j, std::string& value) {
    const char e = src_[j];
    switch (e) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case '0': value += '\0'; break;
      case '\\': case '\'': case '"': value += e; break;
      case 'u': return UnicodeEscape(j, value);
      default: value += '\\'; value += e;
    }
    return absl::OkStatus();
  }

  // \uXXXX with src_[j] on the 'u': exactly four hex digits, as Python
  // requires (it refuses the template otherwise; std::stoul threw on non-hex
  // digits and ended the process: found by chat_template_fuzz).
  absl::Status UnicodeEscape(size_t& j, std::string& value) {
    uint32_t code = 0;
    size_t digits = 0;
    for (; digits < 4 && j + 1 + digits < src_.size(); ++digits) {
      const char h = src_[j + 1 + digits];
      const int v = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (v < 0) break;
      code = code * 16 + static_cast<uint32_t>(v);
    }
    if (digits < 4) return Error(line_, "truncated \\uXXXX escape in a string literal");
    AppendUtf8(code, &value);
    j += 4;
    return absl::OkStatus();
  }

  absl::Status Operator() {
    static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                 "<",  ">",  "=",  "(",  ")",  "[",  "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (src_.compare(i_, n, op) == 0) {
        out_.push_back({Token::Kind::kOp, op, line_});
        i_ += n;
        return absl::OkStatus();
      }
    }
    return Error(line_, absl::StrCat("unexpected character '", std::string(1, src_[i_]), "'"));
  }

  const std::string_view src_;
  int line_;
  size_t i_ = 0;
  std::vector<Token> out_;
};

}  // namespace

absl::StatusOr<std::vector<Segment>> SplitTemplate(std::string_view source) {
  std::string src(source);
  if (src.size() >= 2 && src.compare(src.size() - 2, 2, "\r\n") == 0) {
    src.resize(src.size() - 2);
  } else if (!src.empty() && src.back() == '\n') {
    src.pop_back();
  }
  return Splitter(std::move(src)).Split();
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view src, int line) {
  return Lexer(src, line).Tokens();
}

}  // namespace attnscope::chat_template
