// The parsed form of a chat template: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "service/chat_template/value.h"

namespace attnscope::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,   // value
    kName,      // name
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (missing parts are nullptr)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..])
    kUnary,     // op args[0]: "-", "+", "not"
    kBinary,    // args[0] op args[1]: + - * / // % ** ~ == != < > <= >= in "not in"
    kAnd,
    kOr,
    kCond,      // args[0] if args[1] else args[2] (args[2] may be nullptr)
    kList,      // [args...] and tuples
    kDict,      // {args[0]: args[1], ...}
  };
  Type type = Type::kLiteral;
  int line = 0;
  std::string name;  // name, attribute, filter, test or operator
  bool negate = false;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Type { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Type type = Type::kText;
  int line = 0;
  std::string text;                 // kText
  ExprPtr expr;                     // kOutput, kSet value, kFor iterable
  ExprPtr filter;                   // kFor's "if" condition
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf (else: nullptr condition)
  std::vector<std::string> targets;  // kFor loop variables; kSet/kSetBlock/kMacro name
  std::string attr;                  // kSet "ns.attr": the attribute
  Body body;                         // kFor, kSetBlock, kMacro
  Body else_body;                    // kFor
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be nullptr)
};

}  // namespace attnscope::chat_template
