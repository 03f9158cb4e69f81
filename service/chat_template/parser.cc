#include "service/chat_template/parser.h"

#include <set>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "service/chat_template/lexer.h"
#include "service/core/status_macros.h"

namespace attnscope::chat_template {
namespace {

absl::Status Error(int line, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", line, ": ", absl::string_view(what.data(), what.size())));
}

ExprPtr Make(Expr::Type type, int line, std::string name = "") {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->line = line;
  e->name = std::move(name);
  return e;
}

// Tests that take one argument without parentheses ("is divisibleby 3").
const std::set<std::string>& ArgTests() {
  static const std::set<std::string> tests = {"eq", "equalto", "ne", "sameas", "divisibleby",
                                              "lt", "gt", "le", "ge", "in", "lessthan", "greaterthan"};
  return tests;
}

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  int line() const { return Peek().line; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }

  absl::Status Expect(const char* op) {
    if (!IsOp(op)) return Error(line(), absl::StrCat("expected '", op, "', got '", Peek().text, "'"));
    ++i_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Error(line(), absl::StrCat("expected a name, got '", Peek().text, "'"));
    return Next().text;
  }
  absl::Status ExpectEnd() {
    if (!AtEnd()) return Error(line(), absl::StrCat("unexpected '", Peek().text, "'"));
    return absl::OkStatus();
  }

  // with_cond false: stop before a top-level "if" (for-loop filters).
  absl::StatusOr<ExprPtr> Expression(bool with_cond = true) {
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr e, Or());
    while (with_cond && IsName("if")) {
      auto cond = Make(Expr::Type::kCond, Next().line);
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr test, Or());
      ExprPtr other;
      if (IsName("else")) {
        Next();
        ATTNSCOPE_ASSIGN_OR_RETURN(other, Expression());
      }
      cond->args.push_back(std::move(e));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(other));
      e = std::move(cond);
    }
    return e;
  }

  // A comma-separated tuple without brackets ("a, b" in set/for targets
  // is handled by the statement parser; this is for "set x = a, b").
  absl::StatusOr<ExprPtr> TupleOrExpression() {
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr first, Expression());
    if (!IsOp(",")) return first;
    auto list = Make(Expr::Type::kList, first->line);
    list->args.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (AtEnd()) break;
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr item, Expression());
      list->args.push_back(std::move(item));
    }
    return list;
  }

 private:
  using Sub = absl::StatusOr<ExprPtr> (ExprParser::*)();

  absl::StatusOr<ExprPtr> Binary(Sub sub, std::initializer_list<const char*> ops, Expr::Type type) {
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr left, (this->*sub)());
    while (true) {
      const char* found = nullptr;
      for (const char* op : ops) {
        if ((type == Expr::Type::kBinary && IsOp(op)) || (type != Expr::Type::kBinary && IsName(op))) found = op;
      }
      if (found == nullptr) return left;
      auto e = Make(type, Next().line, found);
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr right, (this->*sub)());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
  }
  // Each nesting level (parentheses, brackets, call arguments, "not", unary
  // signs) recurses; a template of a few thousand '(' overflowed the stack.
  static constexpr int kMaxNesting = 200;
  struct Nested {
    explicit Nested(int& depth) : depth_(depth) { ++depth_; }
    ~Nested() { --depth_; }
    int& depth_;
  };
  absl::Status CheckNesting() {
    if (depth_ < kMaxNesting) return absl::OkStatus();
    return Error(line(), absl::StrCat("expression nested more than ", kMaxNesting, " deep"));
  }

  absl::StatusOr<ExprPtr> Or() {
    ATTNSCOPE_RETURN_IF_ERROR(CheckNesting());
    Nested nested(depth_);
    return Binary(&ExprParser::And, {"or"}, Expr::Type::kOr);
  }
  absl::StatusOr<ExprPtr> And() { return Binary(&ExprParser::Not, {"and"}, Expr::Type::kAnd); }
  absl::StatusOr<ExprPtr> Not() {
    if (!IsName("not")) return Compare();
    ATTNSCOPE_RETURN_IF_ERROR(CheckNesting());
    Nested nested(depth_);
    auto e = Make(Expr::Type::kUnary, Next().line, "not");
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr operand, Not());
    e->args.push_back(std::move(operand));
    return e;
  }
  absl::StatusOr<ExprPtr> Compare() {
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr left, Math1());
    while (true) {
      std::string op;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
           Peek().text == "<=" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        op = Next().text;
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        return left;
      }
      auto e = Make(Expr::Type::kBinary, line(), op);
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr right, Math1());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
  }
  absl::StatusOr<ExprPtr> Math1() { return Binary(&ExprParser::Concat, {"+", "-"}, Expr::Type::kBinary); }
  absl::StatusOr<ExprPtr> Concat() { return Binary(&ExprParser::Math2, {"~"}, Expr::Type::kBinary); }
  absl::StatusOr<ExprPtr> Math2() {
    return Binary(&ExprParser::Pow, {"*", "/", "//", "%"}, Expr::Type::kBinary);
  }
  absl::StatusOr<ExprPtr> Pow() { return Binary(&ExprParser::Unary, {"**"}, Expr::Type::kBinary); }
  absl::StatusOr<ExprPtr> Unary() {
    if (IsOp("-") || IsOp("+")) {
      ATTNSCOPE_RETURN_IF_ERROR(CheckNesting());
      Nested nested(depth_);
      auto e = Make(Expr::Type::kUnary, line(), Next().text);
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr operand, Unary());
      e->args.push_back(std::move(operand));
      return e;
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr primary, Primary());
    return Postfix(std::move(primary));
  }

  absl::Status Args(Expr& call, const char* close) {
    while (!IsOp(close)) {
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr value, Expression());
        call.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr value, Expression());
        call.args.push_back(std::move(value));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(close);
  }

  absl::StatusOr<ExprPtr> Subscript(ExprPtr target) {
    const int at = Next().line;  // '['
    std::vector<ExprPtr> parts(3);
    size_t part = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Next();
        is_slice = true;
        if (++part > 2) return Error(at, "too many ':' in a slice");
        continue;
      }
      ATTNSCOPE_ASSIGN_OR_RETURN(parts[part], Expression());
      if (!IsOp(":") && !IsOp("]")) return Error(line(), absl::StrCat("unexpected '", Peek().text, "' in []"));
    }
    Next();
    auto e = Make(is_slice ? Expr::Type::kSlice : Expr::Type::kItem, at);
    e->args.push_back(std::move(target));
    if (!is_slice && parts[0] == nullptr) return Error(at, "empty []");
    for (size_t k = 0; k < (is_slice ? 3u : 1u); ++k) e->args.push_back(std::move(parts[k]));
    return e;
  }

  absl::StatusOr<ExprPtr> Postfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        Next();
        ATTNSCOPE_ASSIGN_OR_RETURN(std::string name, ExpectName());
        auto attr = Make(Expr::Type::kAttr, line(), name);
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (IsOp("[")) {
        ATTNSCOPE_ASSIGN_OR_RETURN(e, Subscript(std::move(e)));
      } else if (IsOp("(")) {
        auto call = Make(Expr::Type::kCall, Next().line);
        call->args.push_back(std::move(e));
        ATTNSCOPE_RETURN_IF_ERROR(Args(*call, ")"));
        e = std::move(call);
      } else if (IsOp("|")) {
        Next();
        ATTNSCOPE_ASSIGN_OR_RETURN(std::string name, ExpectName());
        auto filter = Make(Expr::Type::kFilter, line(), name);
        filter->args.push_back(std::move(e));
        if (IsOp("(")) {
          Next();
          ATTNSCOPE_RETURN_IF_ERROR(Args(*filter, ")"));
        }
        e = std::move(filter);
      } else if (IsName("is")) {
        Next();
        auto test = Make(Expr::Type::kTest, line());
        if (IsName("not")) {
          Next();
          test->negate = true;
        }
        ATTNSCOPE_ASSIGN_OR_RETURN(test->name, ExpectName());
        test->args.push_back(std::move(e));
        if (IsOp("(")) {
          Next();
          ATTNSCOPE_RETURN_IF_ERROR(Args(*test, ")"));
        } else if (ArgTests().count(test->name) != 0) {
          ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
          test->args.push_back(std::move(arg));
        }
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprPtr> Primary() {
    const Token& tok = Peek();
    switch (tok.kind) {
      case Token::Kind::kString: return StringLiteral();
      case Token::Kind::kInt:
      case Token::Kind::kFloat: return NumberLiteral();
      case Token::Kind::kName: return NameOrConstant();
      case Token::Kind::kOp:
        if (tok.text == "(") return Parenthesized();
        if (tok.text == "[") return ListLiteral();
        if (tok.text == "{") return DictLiteral();
        break;
      default: break;
    }
    return Error(tok.line, absl::StrCat("unexpected '", tok.text.empty() ? "end of expression" : tok.text, "'"));
  }

  static ExprPtr Literal(int line, Value v) {
    auto e = Make(Expr::Type::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  // "a" 'b': adjacent strings are one.
  absl::StatusOr<ExprPtr> StringLiteral() {
    const int at = line();
    std::string s;
    while (Peek().kind == Token::Kind::kString) s += Next().text;
    return Literal(at, Value::Str(std::move(s)));
  }

  // stoll/stod throw for literals beyond int64 or double (an uncaught
  // exception ended the process); such a literal is a template error.
  absl::StatusOr<ExprPtr> NumberLiteral() {
    const Token& number = Next();
    const int at = number.line;
    try {
      if (number.kind == Token::Kind::kInt) return Literal(at, Value::Int(std::stoll(number.text)));
      return Literal(at, Value::Float(std::stod(number.text)));
    } catch (const std::out_of_range&) {
      return Error(at, absl::StrCat("the number ", number.text.substr(0, 40),
                                    number.text.size() > 40 ? "..." : "", " is out of range"));
    }
  }

  // true/True, false/False, none/None, or a variable.
  absl::StatusOr<ExprPtr> NameOrConstant() {
    const int at = line();
    const std::string name = Next().text;
    if (name == "true" || name == "True") return Literal(at, Value::Bool(true));
    if (name == "false" || name == "False") return Literal(at, Value::Bool(false));
    if (name == "none" || name == "None") return Literal(at, Value::None());
    return Make(Expr::Type::kName, at, name);
  }

  // ( expr ) or a tuple ( a, b ).
  absl::StatusOr<ExprPtr> Parenthesized() {
    Next();
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr inner, TupleOrExpression());
    ATTNSCOPE_RETURN_IF_ERROR(Expect(")"));
    return inner;
  }

  absl::StatusOr<ExprPtr> ListLiteral() {
    const int at = Next().line;
    auto list = Make(Expr::Type::kList, at);
    ATTNSCOPE_RETURN_IF_ERROR(Args(*list, "]"));
    if (!list->kwargs.empty()) return Error(at, "'=' inside a list literal");
    return list;
  }

  absl::StatusOr<ExprPtr> DictLiteral() {
    const int at = Next().line;
    auto dict = Make(Expr::Type::kDict, at);
    while (!IsOp("}")) {
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr key, Expression());
      ATTNSCOPE_RETURN_IF_ERROR(Expect(":"));
      ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr value, Expression());
      dict->args.push_back(std::move(key));
      dict->args.push_back(std::move(value));
      if (!IsOp(",")) break;
      Next();
    }
    ATTNSCOPE_RETURN_IF_ERROR(Expect("}"));
    return dict;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;  // see kMaxNesting
};

}  // namespace

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : segs_(std::move(segments)) {}

  // Parses statements until one of `ends` (returned in *ended, its parser
  // positioned after the keyword) or the end of the template.
  absl::StatusOr<Body> ParseBody(const std::set<std::string>& ends, std::string* ended,
                                 std::unique_ptr<ExprParser>* end_tokens) {
    Body body;
    while (pos_ < segs_.size()) {
      const Segment& seg = segs_[pos_++];
      if (seg.kind == Segment::Kind::kText) {
        auto node = std::make_unique<Node>();
        node->type = Node::Type::kText;
        node->text = seg.text;
        node->line = seg.line;
        body.push_back(std::move(node));
        continue;
      }
      ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(seg.text, seg.line));
      auto p = std::make_unique<ExprParser>(std::move(tokens));
      if (seg.kind == Segment::Kind::kExpr) {
        auto node = std::make_unique<Node>();
        node->type = Node::Type::kOutput;
        node->line = seg.line;
        ATTNSCOPE_ASSIGN_OR_RETURN(node->expr, p->Expression());
        ATTNSCOPE_RETURN_IF_ERROR(p->ExpectEnd());
        body.push_back(std::move(node));
        continue;
      }
      ATTNSCOPE_ASSIGN_OR_RETURN(std::string keyword, p->ExpectName());
      if (ends.count(keyword) != 0) {
        *ended = keyword;
        *end_tokens = std::move(p);
        return body;
      }
      ATTNSCOPE_RETURN_IF_ERROR(Statement(keyword, seg.line, *p, body));
    }
    if (!ends.empty()) {
      return Error(segs_.empty() ? 1 : segs_.back().line,
                   absl::StrCat("missing '", *ends.rbegin(), "' at the end of the template"));
    }
    return body;
  }

 private:
  // The statement `keyword ...` whose tag starts at `line`, appended to `body`.
  absl::Status Statement(const std::string& keyword, int line, ExprParser& p, Body& body) {
    absl::StatusOr<NodePtr> node;
    if (keyword == "if") {
      node = If(p);
    } else if (keyword == "for") {
      node = For(line, p);
    } else if (keyword == "set") {
      node = Set(line, p);
    } else if (keyword == "macro") {
      node = Macro(p);
    } else if (keyword == "break" || keyword == "continue") {
      node = MakeNode(keyword == "break" ? Node::Type::kBreak : Node::Type::kContinue);
    } else if (keyword == "generation") {
      // Hugging Face's assistant-mask marker: renders its body unchanged.
      ATTNSCOPE_ASSIGN_OR_RETURN(Body inner, BodyUntil({"endgeneration"}));
      for (auto& n : inner) body.push_back(std::move(n));
      return absl::OkStatus();
    } else {
      return Error(line, absl::StrCat("unsupported statement '", keyword, "'"));
    }
    if (!node.ok()) return node.status();
    (*node)->line = line;
    body.push_back(*std::move(node));
    return absl::OkStatus();
  }

  static NodePtr MakeNode(Node::Type type) {
    auto node = std::make_unique<Node>();
    node->type = type;
    return node;
  }

  // The body up to one of `ends` (the keyword that ended it in *ended, when
  // given; the rest of that tag is not read).
  absl::StatusOr<Body> BodyUntil(const std::set<std::string>& ends, std::string* ended = nullptr,
                                 std::unique_ptr<ExprParser>* end_tokens = nullptr) {
    std::string keyword;
    std::unique_ptr<ExprParser> rest;
    ATTNSCOPE_ASSIGN_OR_RETURN(Body body, ParseBody(ends, &keyword, &rest));
    if (ended != nullptr) *ended = keyword;
    if (end_tokens != nullptr) *end_tokens = std::move(rest);
    return body;
  }

  // if cond %}...{% elif cond %}...{% else %}...{% endif
  absl::StatusOr<NodePtr> If(ExprParser& p) {
    NodePtr node = MakeNode(Node::Type::kIf);
    ATTNSCOPE_ASSIGN_OR_RETURN(ExprPtr cond, p.Expression());
    ATTNSCOPE_RETURN_IF_ERROR(p.ExpectEnd());
    std::string ended;
    std::unique_ptr<ExprParser> rest;
    while (true) {
      ATTNSCOPE_ASSIGN_OR_RETURN(Body branch, BodyUntil({"elif", "else", "endif"}, &ended, &rest));
      node->branches.emplace_back(std::move(cond), std::move(branch));
      if (ended == "endif") return node;
      if (ended == "else") break;
      ATTNSCOPE_ASSIGN_OR_RETURN(cond, rest->Expression());  // elif
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(Body last, BodyUntil({"endif"}));
    node->branches.emplace_back(nullptr, std::move(last));
    return node;
  }

  // for a, b in iterable [if filter] %}...{% else %}...{% endfor
  absl::StatusOr<NodePtr> For(int line, ExprParser& p) {
    NodePtr node = MakeNode(Node::Type::kFor);
    do {
      ATTNSCOPE_ASSIGN_OR_RETURN(std::string target, p.ExpectName());
      node->targets.push_back(std::move(target));
    } while (p.IsOp(",") && (p.Next(), true));
    if (!p.IsName("in")) return Error(line, "expected 'in' in for");
    p.Next();
    ATTNSCOPE_ASSIGN_OR_RETURN(node->expr, p.Expression(false));
    if (p.IsName("if")) {
      p.Next();
      ATTNSCOPE_ASSIGN_OR_RETURN(node->filter, p.Expression(false));
    }
    if (p.IsName("recursive")) return Error(line, "unsupported: recursive for loops");
    ATTNSCOPE_RETURN_IF_ERROR(p.ExpectEnd());
    std::string ended;
    ATTNSCOPE_ASSIGN_OR_RETURN(node->body, BodyUntil({"else", "endfor"}, &ended));
    if (ended == "else") {
      ATTNSCOPE_ASSIGN_OR_RETURN(node->else_body, BodyUntil({"endfor"}));
    }
    return node;
  }

  // set x = expr, set ns.attr = expr, set a, b = expr, or a block set
  // (set x %}...{% endset).
  absl::StatusOr<NodePtr> Set(int line, ExprParser& p) {
    NodePtr node = MakeNode(Node::Type::kSet);
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string target, p.ExpectName());
    node->targets.push_back(std::move(target));
    if (p.IsOp(".")) {
      p.Next();
      ATTNSCOPE_ASSIGN_OR_RETURN(node->attr, p.ExpectName());
    }
    while (p.IsOp(",")) {
      p.Next();
      ATTNSCOPE_ASSIGN_OR_RETURN(std::string more, p.ExpectName());
      node->targets.push_back(std::move(more));
    }
    if (p.AtEnd()) {
      if (node->targets.size() != 1 || !node->attr.empty()) return Error(line, "block set needs one plain name");
      node->type = Node::Type::kSetBlock;
      ATTNSCOPE_ASSIGN_OR_RETURN(node->body, BodyUntil({"endset"}));
      return node;
    }
    ATTNSCOPE_RETURN_IF_ERROR(p.Expect("="));
    ATTNSCOPE_ASSIGN_OR_RETURN(node->expr, p.TupleOrExpression());
    ATTNSCOPE_RETURN_IF_ERROR(p.ExpectEnd());
    return node;
  }

  // macro name(param, param=default) %}...{% endmacro
  absl::StatusOr<NodePtr> Macro(ExprParser& p) {
    NodePtr node = MakeNode(Node::Type::kMacro);
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string name, p.ExpectName());
    node->targets.push_back(std::move(name));
    ATTNSCOPE_RETURN_IF_ERROR(p.Expect("("));
    while (!p.IsOp(")")) {
      ATTNSCOPE_ASSIGN_OR_RETURN(std::string param, p.ExpectName());
      ExprPtr fallback;
      if (p.IsOp("=")) {
        p.Next();
        ATTNSCOPE_ASSIGN_OR_RETURN(fallback, p.Expression());
      }
      node->params.emplace_back(std::move(param), std::move(fallback));
      if (!p.IsOp(",")) break;
      p.Next();
    }
    ATTNSCOPE_RETURN_IF_ERROR(p.Expect(")"));
    ATTNSCOPE_ASSIGN_OR_RETURN(node->body, BodyUntil({"endmacro"}));
    return node;
  }

  std::vector<Segment> segs_;
  size_t pos_ = 0;
};

absl::StatusOr<Body> ParseTemplate(std::string_view source) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<Segment> segments, SplitTemplate(source));
  TemplateParser parser(std::move(segments));
  std::string ended;
  std::unique_ptr<ExprParser> rest;
  return parser.ParseBody({}, &ended, &rest);
}

}  // namespace attnscope::chat_template
