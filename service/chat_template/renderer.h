// Runs a parsed chat template against a set of variables, producing text
// whose bytes remember whether they came from message content.
#pragma once

#include "absl/status/statusor.h"
#include "service/chat_template/ast.h"
#include "service/chat_template/value.h"

namespace attnscope::chat_template {

// Renders `body` with `globals` (a dict: messages, add_generation_prompt,
// special tokens, functions). The result is a string value with its mask.
// InvalidArgument "chat template line N: ..." for a runtime error
// (raise_exception, an undefined variable's attribute, a type mismatch, an
// unsupported filter or test, output over 16 MiB).
absl::StatusOr<Value> Render(const Body& body, const Value& globals);

}  // namespace attnscope::chat_template
