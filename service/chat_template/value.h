// Values of the chat-template interpreter: Python/Jinja's None, bools,
// numbers, strings, lists, dicts (insertion-ordered), namespaces and
// callables. A string also records, byte by byte, whether it came from a
// message's content (what the conversation said) or from the template.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::chat_template {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<absl::StatusOr<Value>(std::vector<Value>&, Kwargs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // Empty when no byte of s came from message content; else s.size() bytes,
  // 1 where the byte came from content.
  std::string mask;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> fn;
  bool is_namespace = false;  // a namespace() object: a dict with attributes

  static Value None();
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Float(double v);
  // A template-produced string; with `content`, every byte counts as content.
  static Value Str(std::string v, bool content = false);
  static Value MakeList(List items = {});
  static Value MakeDict(Dict items = {});
  static Value Func(Function fn);

  bool IsString() const { return kind == Kind::kString; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool IsUndefined() const { return kind == Kind::kUndefined; }
  double AsDouble() const { return kind == Kind::kInt ? static_cast<double>(i) : f; }

  // Dict entry (nullptr if absent or not a dict).
  const Value* Find(std::string_view key) const;
  // Sets a dict entry, replacing an existing one.
  void Set(const std::string& key, Value v);
};

// Python truthiness (undefined, None, 0, "", [] and {} are false).
bool Truthy(const Value& v);

// Python ==, deep for lists and dicts; ints and floats compare by value.
bool Equal(const Value& a, const Value& b);

// What {{ v }} prints: str(v) in Python (None -> "None", True -> "True",
// lists and dicts as repr). Strings keep their content mask.
Value ToStr(const Value& v);

// Python's repr (strings quoted with ').
std::string Repr(const Value& v);

// json.dumps(v, ensure_ascii=False, indent=indent) as Hugging Face's tojson
// filter calls it (indent < 0: none, ", " and ": " separators).
absl::StatusOr<std::string> ToJson(const Value& v, int indent);

// Converts a JSON document into values; strings are marked as content when
// `content` is set.
Value FromJson(const nlohmann::json& json, bool content = false);

// Type names for messages ("string", "list", ...).
std::string KindName(const Value& v);

// String helpers that carry the content mask along.
Value Concat(const Value& a, const Value& b);        // both strings
Value Substr(const Value& v, size_t begin, size_t end);  // byte range
void AppendStr(Value& out, const Value& piece);          // out += piece

}  // namespace attnscope::chat_template
