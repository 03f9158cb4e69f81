// Parses a chat template into statements (see ast.h). Supported: text,
// {{ expr }}, if/elif/else, for (with tuple targets, "if" filter, else),
// set (name, ns.attr, a, b = ...; block set), macro, break/continue,
// generation blocks, comments, and expressions with literals, lists, dicts,
// attribute/item access, slicing, calls, filters, tests, arithmetic, ~,
// comparisons, in / not in, and/or/not and inline if.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "service/chat_template/ast.h"

namespace attnscope::chat_template {

// InvalidArgument "chat template line N: ..." naming the construct it does
// not support (e.g. "unsupported statement 'include'") or the syntax error.
absl::StatusOr<Body> ParseTemplate(std::string_view source);

}  // namespace attnscope::chat_template
