#include "service/chat_template/renderer.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/chat_template/builtins.h"
#include "service/core/status_macros.h"

namespace attnscope::chat_template {
namespace {

constexpr size_t kMaxOutputBytes = 16 << 20;
constexpr int kMaxMacroDepth = 64;
// Loop items one rendering may visit, all loops together. Real templates loop
// over the messages (and their tool calls); a template from a model directory
// must not keep a request busy for minutes (nested range(1000) loops did).
constexpr int64_t kMaxLoopItems = 100000;

absl::Status AtLine(int line, const absl::Status& status) {
  if (status.ok() || absl::StartsWith(status.message(), "chat template line ")) return status;
  return absl::Status(status.code(), absl::StrCat("chat template line ", line, ": ", status.message()));
}

absl::Status Bad(int line, std::string_view what) {
  return AtLine(line, absl::InvalidArgumentError(std::string(what)));
}

// Python's floor division (div) or modulo of int64s into *r; true when the
// result does not fit (-2^63 // -1). j is not 0.
bool FloorDivMod(bool div, int64_t i, int64_t j, int64_t* r) {
  if (i == std::numeric_limits<int64_t>::min() && j == -1) {
    *r = 0;
    return div;  // -2^63 // -1 = 2^63; -2^63 % -1 = 0
  }
  const int64_t q = i / j, m = i % j;
  // Python floors: the remainder takes the divisor's sign.
  const bool adjust = m != 0 && ((m < 0) != (j < 0));
  *r = div ? q - adjust : m + (adjust ? j : 0);
  return false;
}

// base ** exp (exp >= 0) into *r by squaring; true on int64 overflow.
bool CheckedPow(int64_t base, int64_t exp, int64_t* r) {
  bool overflow = false;
  *r = 1;
  for (int64_t k = exp; k > 0 && !overflow; k >>= 1) {
    if (k & 1) overflow = __builtin_mul_overflow(*r, base, r);
    if (k > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
  }
  return overflow;
}

// Integers exactly (a bool is 0 or 1), every result checked: Python's
// integers do not overflow, so a template whose arithmetic leaves int64 is
// refused with an error rather than given a wrapped value. j is not 0 for
// //, %.
absl::StatusOr<Value> IntArith(const Expr& e, int64_t i, int64_t j) {
  const std::string& op = e.name;
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(i, j, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(i, j, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(i, j, &r);
  } else if (op == "//" || op == "%") {
    overflow = FloorDivMod(op == "//", i, j, &r);
  } else if (op == "**") {
    if (j < 0) return Value::Float(std::pow(static_cast<double>(i), static_cast<double>(j)));
    overflow = CheckedPow(i, j, &r);
  } else {
    return Bad(e.line, absl::StrCat("unsupported operator ", op));
  }
  if (overflow) {
    return Bad(e.line, absl::StrCat("integer overflow in ", i, " ", op, " ", j,
                                    " (beyond 64-bit integers)"));
  }
  return Value::Int(r);
}

// Arithmetic and comparisons of numbers and bools (True is 1).
absl::StatusOr<Value> NumberArith(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  const auto num = [](const Value& v) { return v.IsNumber() || v.kind == Value::Kind::kBool; };
  if (!num(a) || !num(b)) {
    return Bad(e.line, absl::StrCat("unsupported operand types for ", op, ": ", KindName(a), " and ", KindName(b)));
  }
  const double x = a.kind == Value::Kind::kBool ? a.b : a.AsDouble();
  const double y = b.kind == Value::Kind::kBool ? b.b : b.AsDouble();
  if (op == "<") return Value::Bool(x < y);
  if (op == ">") return Value::Bool(x > y);
  if (op == "<=") return Value::Bool(x <= y);
  if (op == ">=") return Value::Bool(x >= y);
  if ((op == "/" || op == "//" || op == "%") && y == 0) return Bad(e.line, "division by zero");
  if (op == "/") return Value::Float(x / y);
  if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) {
    return IntArith(e, a.kind == Value::Kind::kBool ? a.b : a.i, b.kind == Value::Kind::kBool ? b.b : b.i);
  }
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "//") return Value::Float(std::floor(x / y));
  if (op == "%") return Value::Float(x - y * std::floor(x / y));
  if (op == "**") return Value::Float(std::pow(x, y));
  return Bad(e.line, absl::StrCat("unsupported operator ", op));
}

// s * n, refused up front beyond the output limit.
absl::StatusOr<Value> RepeatString(const Expr& e, const Value& s, int64_t n) {
  // Refused up front: building 16 MiB piece by piece is slow, and a string
  // cut at the limit would be a wrong value, not an error.
  if (n > 0 && !s.s.empty() && static_cast<uint64_t>(n) > kMaxOutputBytes / s.s.size()) {
    return Bad(e.line, absl::StrCat("a string of ", s.s.size(), " bytes repeated ", n,
                                    " times is larger than 16 MiB"));
  }
  Value out = Value::Str("");
  for (int64_t k = 0; k < n && out.s.size() < kMaxOutputBytes; ++k) AppendStr(out, s);
  return out;
}

// a op b for a binary operator (Expr::Type::kBinary), with Python's meaning.
absl::StatusOr<Value> Arith(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  if (op == "~") return Concat(ToStr(a), ToStr(b));
  if (op == "==") return Value::Bool(Equal(a, b));
  if (op == "!=") return Value::Bool(!Equal(a, b));
  if (op == "in" || op == "not in") {
    ATTNSCOPE_ASSIGN_OR_RETURN(bool in, ApplyTest("in", a, {b}));
    return Value::Bool(in == (op == "in"));
  }
  if (op == "+" && a.IsString() && b.IsString()) return Concat(a, b);
  if (op == "+" && a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
    List items = *a.list;
    items.insert(items.end(), b.list->begin(), b.list->end());
    return Value::MakeList(std::move(items));
  }
  if (op == "*" && a.IsString() && b.kind == Value::Kind::kInt) return RepeatString(e, a, b.i);
  if ((op == "<" || op == ">" || op == "<=" || op == ">=") && a.IsString() && b.IsString()) {
    const int c = a.s.compare(b.s);
    return Value::Bool(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  return NumberArith(e, a, b);
}

class Renderer {
 public:
  explicit Renderer(const Value& globals) { scopes_.push_back(Frame(globals)); scopes_.emplace_back(); }

  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> Exec(const Body& body, Value& out) {
    for (const NodePtr& n : body) {
      ATTNSCOPE_ASSIGN_OR_RETURN(Flow flow, ExecNode(*n, out));
      if (flow != Flow::kNormal) return flow;
      if (out.s.size() > kMaxOutputBytes) return Bad(n->line, "output larger than 16 MiB");
    }
    return Flow::kNormal;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  static Scope Frame(const Value& dict) {
    Scope scope;
    for (const auto& [k, v] : *dict.dict) scope[k] = v;
    return scope;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto hit = it->find(name);
      if (hit != it->end()) return hit->second;
    }
    return Value{};
  }

  absl::StatusOr<Flow> ExecNode(const Node& n, Value& out) {
    switch (n.type) {
      case Node::Type::kText: AppendStr(out, Value::Str(n.text)); return Flow::kNormal;
      case Node::Type::kOutput: return ExecOutput(n, out);
      case Node::Type::kIf: return ExecIf(n, out);
      case Node::Type::kFor: return ExecFor(n, out);
      case Node::Type::kSet: return ExecSet(n);
      case Node::Type::kSetBlock: return ExecSetBlock(n);
      case Node::Type::kMacro: scopes_.back()[n.targets[0]] = MakeMacro(n); return Flow::kNormal;
      case Node::Type::kBreak: return Flow::kBreak;
      case Node::Type::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  // {{ expr }}
  absl::StatusOr<Flow> ExecOutput(const Node& n, Value& out) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
    AppendStr(out, ToStr(v));
    return Flow::kNormal;
  }

  // if / elif / else: the first branch whose condition holds (else: none).
  absl::StatusOr<Flow> ExecIf(const Node& n, Value& out) {
    for (const auto& [cond, branch] : n.branches) {
      bool take = cond == nullptr;
      if (!take) {
        ATTNSCOPE_ASSIGN_OR_RETURN(Value c, Eval(*cond));
        take = Truthy(c);
      }
      if (take) return Exec(branch, out);
    }
    return Flow::kNormal;
  }

  // set x = expr, set ns.attr = expr, set a, b = expr
  absl::StatusOr<Flow> ExecSet(const Node& n) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
    ATTNSCOPE_RETURN_IF_ERROR(AtLine(n.line, Assign(n, std::move(v))));
    return Flow::kNormal;
  }

  // set x %}...{% endset: the body's output.
  absl::StatusOr<Flow> ExecSetBlock(const Node& n) {
    Value captured = Value::Str("");
    ATTNSCOPE_RETURN_IF_ERROR(Exec(n.body, captured).status());
    ATTNSCOPE_RETURN_IF_ERROR(AtLine(n.line, Assign(n, std::move(captured))));
    return Flow::kNormal;
  }

  absl::Status Assign(const Node& n, Value v) {
    if (!n.attr.empty()) {
      Value ns = Lookup(n.targets[0]);
      if (!ns.is_namespace) {
        return absl::InvalidArgumentError(absl::StrCat("cannot set attribute of '", n.targets[0],
                                                       "': it is not a namespace()"));
      }
      ns.Set(n.attr, std::move(v));  // shares the dict with the variable
      return absl::OkStatus();
    }
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = std::move(v);
      return absl::OkStatus();
    }
    if (v.kind != Value::Kind::kList || v.list->size() != n.targets.size()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot unpack into ", n.targets.size(), " names"));
    }
    for (size_t k = 0; k < n.targets.size(); ++k) scopes_.back()[n.targets[k]] = (*v.list)[k];
    return absl::OkStatus();
  }

  absl::Status Bind(const Node& n, const Value& item, Scope& scope) {
    if (n.targets.size() == 1) {
      scope[n.targets[0]] = item;
      return absl::OkStatus();
    }
    if (item.kind != Value::Kind::kList || item.list->size() != n.targets.size()) {
      return Bad(n.line, absl::StrCat("cannot unpack a ", KindName(item), " into ", n.targets.size(), " loop variables"));
    }
    for (size_t k = 0; k < n.targets.size(); ++k) scope[n.targets[k]] = (*item.list)[k];
    return absl::OkStatus();
  }

  // Charges `items` against kMaxLoopItems (InvalidArgument naming the line
  // once the rendering has used it up).
  absl::Status CountLoopItems(const Node& n, int64_t items) {
    loop_items_ += items;
    if (loop_items_ <= kMaxLoopItems) return absl::OkStatus();
    return Bad(n.line, absl::StrCat("loops visited more than ", kMaxLoopItems,
                                    " items in one rendering"));
  }

  // for targets in iterable [if filter] ... else ... endfor
  absl::StatusOr<Flow> ExecFor(const Node& n, Value& out) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value iterable, Eval(*n.expr));
    ATTNSCOPE_ASSIGN_OR_RETURN(List items, LoopItems(n, iterable));
    ATTNSCOPE_RETURN_IF_ERROR(CountLoopItems(n, static_cast<int64_t>(items.size())));
    scopes_.emplace_back();  // the loop's variables
    absl::StatusOr<List> kept = std::move(items);
    if (n.filter != nullptr) kept = KeepFiltered(n, *std::move(kept));
    absl::StatusOr<Flow> flow = kept.ok() ? RunLoop(n, *kept, out) : kept.status();
    scopes_.pop_back();
    if (!flow.ok()) return flow.status();
    if (kept->empty() && !n.else_body.empty()) return Exec(n.else_body, out);
    return Flow::kNormal;
  }

  // What a for loop visits: a dict's keys, a list's items, a string's
  // characters; nothing for undefined.
  absl::StatusOr<List> LoopItems(const Node& n, const Value& iterable) {
    List items;
    if (iterable.kind == Value::Kind::kDict) {
      for (const auto& [k, v] : *iterable.dict) items.push_back(Value::Str(k));
    } else if (iterable.kind == Value::Kind::kList) {
      items = *iterable.list;
    } else if (iterable.kind == Value::Kind::kString) {
      std::vector<Value> no_args;
      Kwargs no_kwargs;
      ATTNSCOPE_ASSIGN_OR_RETURN(Value chars, ApplyFilter("list", iterable, no_args, no_kwargs));
      items = *chars.list;
    } else if (!iterable.IsUndefined() && iterable.kind != Value::Kind::kNone) {
      return Bad(n.line, absl::StrCat("cannot loop over a ", KindName(iterable)));
    } else if (iterable.kind == Value::Kind::kNone) {
      return Bad(n.line, "cannot loop over none");
    }
    return items;
  }

  // The items for which the loop's "if" holds, each bound to the loop
  // variables in the loop's scope (scopes_.back()).
  absl::StatusOr<List> KeepFiltered(const Node& n, List items) {
    List kept;
    for (const Value& item : items) {
      ATTNSCOPE_RETURN_IF_ERROR(Bind(n, item, scopes_.back()));
      ATTNSCOPE_ASSIGN_OR_RETURN(Value pass, Eval(*n.filter));
      if (Truthy(pass)) kept.push_back(item);
    }
    return kept;
  }

  // Runs the loop's body once per item, with the loop variables and `loop`
  // bound in the loop's scope (scopes_.back()).
  absl::StatusOr<Flow> RunLoop(const Node& n, const List& items, Value& out) {
    const auto length = static_cast<int64_t>(items.size());
    // One loop object per loop, updated in place at every step (as Jinja's
    // LoopContext is): rebuilding its nine entries at every step made loops
    // near the budget slow.
    Value loop = Value::MakeDict({{"index", Value::Int(0)},
                                  {"index0", Value::Int(0)},
                                  {"revindex", Value::Int(0)},
                                  {"revindex0", Value::Int(0)},
                                  {"first", Value::Bool(false)},
                                  {"last", Value::Bool(false)},
                                  {"length", Value::Int(length)},
                                  {"previtem", Value()},
                                  {"nextitem", Value()}});
    Dict& fields = *loop.dict;
    for (int64_t k = 0; k < length; ++k) {
      scopes_.back().clear();
      fields[0].second.i = k + 1;
      fields[1].second.i = k;
      fields[2].second.i = length - k;
      fields[3].second.i = length - k - 1;
      fields[4].second.b = k == 0;
      fields[5].second.b = k == length - 1;
      fields[7].second = k > 0 ? items[k - 1] : Value();  // undefined on the first step
      fields[8].second = k + 1 < length ? items[k + 1] : Value();  // and on the last
      scopes_.back()["loop"] = loop;
      ATTNSCOPE_RETURN_IF_ERROR(Bind(n, items[k], scopes_.back()));
      ATTNSCOPE_ASSIGN_OR_RETURN(Flow flow, Exec(n.body, out));
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value MakeMacro(const Node& n) {
    return Value::Func([this, &n](std::vector<Value>& args, Kwargs& kwargs) -> absl::StatusOr<Value> {
      if (depth_ >= kMaxMacroDepth) return Bad(n.line, "macros nested too deeply");
      Scope params;
      for (size_t k = 0; k < n.params.size(); ++k) {
        const std::string& name = n.params[k].first;
        Value v;
        if (k < args.size()) {
          v = args[k];
        } else if (auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kw) { return kw.first == name; });
                   it != kwargs.end()) {
          v = it->second;
        } else if (n.params[k].second != nullptr) {
          ATTNSCOPE_ASSIGN_OR_RETURN(v, Eval(*n.params[k].second));
        }
        params[name] = std::move(v);
      }
      std::vector<Scope> saved = std::move(scopes_);
      scopes_ = {saved.front(), saved[1], std::move(params)};
      ++depth_;
      Value out = Value::Str("");
      auto flow = Exec(n.body, out);
      --depth_;
      scopes_ = std::move(saved);
      if (!flow.ok()) return flow.status();
      return out;
    });
  }

  // An expression's arguments, evaluated in order: the callee, filtered or
  // tested value (args[0]), then the arguments and keyword arguments.
  struct Call {
    Value target;
    std::vector<Value> args;
    Kwargs kwargs;
  };

  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> EvalAttr(const Expr& e);
  absl::StatusOr<Value> EvalItem(const Expr& e);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Call> EvalCallParts(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<Value> EvalFilter(const Expr& e);
  absl::StatusOr<Value> EvalTest(const Expr& e);
  absl::StatusOr<Value> EvalUnary(const Expr& e);
  absl::StatusOr<Value> EvalAndOr(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalCond(const Expr& e);
  absl::StatusOr<Value> EvalList(const Expr& e);
  absl::StatusOr<Value> EvalDict(const Expr& e);

  std::vector<Scope> scopes_;
  int depth_ = 0;
  int64_t loop_items_ = 0;  // see kMaxLoopItems
};

absl::StatusOr<Value> Renderer::Eval(const Expr& e) {
  switch (e.type) {
    case Expr::Type::kLiteral: return e.value;
    case Expr::Type::kName: return Lookup(e.name);
    case Expr::Type::kAttr: return EvalAttr(e);
    case Expr::Type::kItem: return EvalItem(e);
    case Expr::Type::kSlice: return EvalSlice(e);
    case Expr::Type::kCall: return EvalCall(e);
    case Expr::Type::kFilter: return EvalFilter(e);
    case Expr::Type::kTest: return EvalTest(e);
    case Expr::Type::kUnary: return EvalUnary(e);
    case Expr::Type::kAnd:
    case Expr::Type::kOr: return EvalAndOr(e);
    case Expr::Type::kBinary: return EvalBinary(e);
    case Expr::Type::kCond: return EvalCond(e);
    case Expr::Type::kList: return EvalList(e);
    case Expr::Type::kDict: return EvalDict(e);
  }
  return Bad(e.line, "unknown expression");
}

absl::StatusOr<Value> Renderer::EvalAttr(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
  if (obj.IsUndefined()) return Bad(e.line, absl::StrCat("'", e.name, "' of an undefined value"));
  return GetAttr(obj, e.name);
}

absl::StatusOr<Value> Renderer::EvalItem(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
  ATTNSCOPE_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
  if (obj.IsUndefined()) return Bad(e.line, absl::StrCat("[", Repr(key), "] of an undefined value"));
  return GetItem(obj, key);
}

absl::StatusOr<Value> Renderer::EvalSlice(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[k + 1] != nullptr) {
      ATTNSCOPE_ASSIGN_OR_RETURN(parts[k], Eval(*e.args[k + 1]));
    }
  }
  auto out = Slice(obj, parts[0], parts[1], parts[2]);
  if (!out.ok()) return AtLine(e.line, out.status());
  return out;
}

absl::StatusOr<Renderer::Call> Renderer::EvalCallParts(const Expr& e) {
  Call call;
  ATTNSCOPE_ASSIGN_OR_RETURN(call.target, Eval(*e.args[0]));
  for (size_t k = 1; k < e.args.size(); ++k) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value a, Eval(*e.args[k]));
    call.args.push_back(std::move(a));
  }
  for (const auto& [name, expr] : e.kwargs) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value a, Eval(*expr));
    call.kwargs.emplace_back(name, std::move(a));
  }
  return call;
}

absl::StatusOr<Value> Renderer::EvalCall(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Call call, EvalCallParts(e));
  if (call.target.kind != Value::Kind::kFunction) {
    return Bad(e.line, absl::StrCat("a ", KindName(call.target), " is not callable"));
  }
  auto out = (*call.target.fn)(call.args, call.kwargs);
  if (!out.ok()) return AtLine(e.line, out.status());
  return out;
}

absl::StatusOr<Value> Renderer::EvalFilter(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Call call, EvalCallParts(e));
  auto out = ApplyFilter(e.name, call.target, call.args, call.kwargs);
  if (!out.ok()) return AtLine(e.line, out.status());
  return out;
}

absl::StatusOr<Value> Renderer::EvalTest(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Call call, EvalCallParts(e));
  auto pass = ApplyTest(e.name, call.target, call.args);
  if (!pass.ok()) return AtLine(e.line, pass.status());
  return Value::Bool(*pass != e.negate);
}

absl::StatusOr<Value> Renderer::EvalUnary(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
  if (e.name == "not") return Value::Bool(!Truthy(v));
  if (!v.IsNumber()) return Bad(e.line, absl::StrCat("bad operand for unary ", e.name, ": ", KindName(v)));
  if (e.name == "+") return v;
  if (v.kind != Value::Kind::kInt) return Value::Float(-v.f);
  if (v.i == std::numeric_limits<int64_t>::min()) {
    return Bad(e.line, absl::StrCat("integer overflow in -(", v.i, ") (beyond 64-bit integers)"));
  }
  return Value::Int(-v.i);
}

// and / or: Python's short circuit, returning the deciding operand.
absl::StatusOr<Value> Renderer::EvalAndOr(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
  if (Truthy(left) == (e.type == Expr::Type::kOr)) return left;
  return Eval(*e.args[1]);
}

absl::StatusOr<Value> Renderer::EvalBinary(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
  ATTNSCOPE_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
  auto out = Arith(e, a, b);
  if (!out.ok()) return AtLine(e.line, out.status());
  return out;
}

absl::StatusOr<Value> Renderer::EvalCond(const Expr& e) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1]));
  if (Truthy(c)) return Eval(*e.args[0]);
  return e.args[2] != nullptr ? Eval(*e.args[2]) : Value{};
}

absl::StatusOr<Value> Renderer::EvalList(const Expr& e) {
  List items;
  for (const auto& a : e.args) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value v, Eval(*a));
    items.push_back(std::move(v));
  }
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> Renderer::EvalDict(const Expr& e) {
  Value dict = Value::MakeDict();
  for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
    ATTNSCOPE_ASSIGN_OR_RETURN(Value key, Eval(*e.args[k]));
    ATTNSCOPE_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1]));
    dict.Set(ToStr(key).s, std::move(v));
  }
  return dict;
}

}  // namespace

absl::StatusOr<Value> Render(const Body& body, const Value& globals) {
  Renderer renderer(globals);
  Value out = Value::Str("");
  ATTNSCOPE_RETURN_IF_ERROR(renderer.Exec(body, out).status());
  return out;
}

}  // namespace attnscope::chat_template
