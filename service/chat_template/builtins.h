// Jinja's filters, tests, string/dict methods and global functions as far as
// chat templates use them (see README, "Chat templates").
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/chat_template/value.h"

namespace attnscope::chat_template {

// value | name(args, kwargs). InvalidArgument "unsupported filter 'x'" for
// one not implemented, or naming the bad argument.
absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& value,
                                  std::vector<Value>& args, Kwargs& kwargs);

// value is name(args). InvalidArgument "unsupported test 'x'".
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& value,
                               const std::vector<Value>& args);

// obj.name: a dict entry, a bound method of a string or dict, or undefined.
Value GetAttr(const Value& obj, const std::string& name);

// obj[key] for lists, strings and dicts (undefined when absent).
Value GetItem(const Value& obj, const Value& key);

// obj[start:stop:step] on lists and strings (characters, not bytes).
absl::StatusOr<Value> Slice(const Value& obj, const Value& start, const Value& stop,
                            const Value& step);

// The global functions Hugging Face provides: namespace(), raise_exception(),
// range(), dict(), strftime_now() (added to `globals`).
void AddGlobalFunctions(Value& globals);

// The error raise_exception() produces: its message starts with this.
inline constexpr char kRaisedPrefix[] = "the template raised an exception: ";

}  // namespace attnscope::chat_template
