// The prompts of a dataset file for `attnscope batch`: JSONL, one prompt per
// line ({"id", "text"}, {"id", "messages"} or {"id", "ids"}), or plain text,
// one prompt per line. See docs/datasets.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

enum class InputFormat { kAuto, kJsonl, kText };

// "auto", "jsonl" or "text"; InvalidArgument naming --format otherwise.
absl::StatusOr<InputFormat> ParseInputFormat(const std::string& name);

// One non-blank line of the input.
struct BatchItem {
  int64_t line = 0;       // 1-based line number in the file
  nlohmann::json id;      // the line's "id" (a string or an integer), else its line number
  std::string key;        // id.dump(): what duplicates and --resume compare
  rpc::PromptSpec prompt;  // valid when `error` is empty
  std::string error;      // why the line cannot run: it becomes an error line
};

// Reads every non-blank line of `path`. kAuto: JSONL when the first
// non-blank line starts with '{', plain text otherwise. A JSONL line must
// be an object with exactly one of "text" (a non-empty string), "messages"
// (a conversation, [{"role", "content"}, ...]) or "ids" (token ids); it may
// add "add_generation_prompt", "chat_template_kwargs" (an object of template
// variables) and "tools" (an array) with messages, and "add_special_tokens"
// with text; other keys are ignored. A line that breaks these rules is an item
// with `error` set (the run records it and goes on). A plain-text line is a
// prompt whose id is its line number (a trailing CR is dropped).
// Errors (nothing runs): the file cannot be read, or two lines have the same
// id (the message names both lines).
absl::StatusOr<std::vector<BatchItem>> ReadBatchInput(const std::string& path,
                                                      InputFormat format);

// One of `count` disjoint parts of a dataset (--shard INDEX/COUNT): the items
// whose 0-based position among the input's non-blank lines is INDEX modulo
// COUNT, so that COUNT runs (a Kubernetes indexed Job) cover every line once.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};

// "INDEX/COUNT" with 0 <= INDEX < COUNT <= 1,000,000; InvalidArgument naming
// --shard otherwise.
absl::StatusOr<Shard> ParseShard(const std::string& text);

// The items of `shard`, in input order.
std::vector<BatchItem> TakeShard(std::vector<BatchItem> items, const Shard& shard);

}  // namespace attnscope::cli
