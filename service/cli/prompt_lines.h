// `tokenize --input FILE` and `analyze --input FILE`: every prompt of a
// dataset file (the format of `attnscope batch`, docs/datasets.md) in one
// process, one JSON line of output per prompt on stdout, so that a script
// pays the start-up and the model load once for many prompts.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/batch_input.h"
#include "service/cli/flags.h"

namespace attnscope::cli {

// --input FILE and --format F, for Flags::Parse.
std::vector<FlagSpec> InputFileFlagSpecs();

// Whether the command line gives --input.
bool HasInputFile(const Flags& flags);

// The usage check (InvalidArgument) of a command line with --input: no prompt
// flag but --no-special-tokens (it applies to the text lines that do not set
// "add_special_tokens"), no flag of `one_prompt_only` (a flag and why it
// needs a single prompt), --format only with --input.
absl::Status CheckInputFileFlags(
    const Flags& flags, const std::vector<std::pair<std::string, std::string>>& one_prompt_only);

// The prompts of --input (read as --format says), --no-special-tokens
// applied. Errors name the file; a bad line is an item with its error.
absl::StatusOr<std::vector<BatchItem>> ReadInputFile(const Flags& flags);

// Writes one line per item to stdout, in input order, flushed line by line:
// run(item), or the item's error line ({"id", "line", "error"}) when the
// line could not be read. `run` returns a result line (whose first key is
// "id") or an error line. Returns 0 when no line is an error line, else 1.
int PrintInputLines(const std::vector<BatchItem>& items,
                    const std::function<nlohmann::ordered_json(const BatchItem&)>& run);

// {"id": id} followed by the keys of `fields` in their order.
nlohmann::ordered_json LineWithId(const nlohmann::json& id, const nlohmann::json& fields);

}  // namespace attnscope::cli
