#include "service/cli/prompt_lines.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "service/cli/batch_output.h"
#include "service/cli/commands.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {

std::vector<FlagSpec> InputFileFlagSpecs() { return {{"input"}, {"format"}}; }

bool HasInputFile(const Flags& flags) { return flags.Has("input"); }

absl::Status CheckInputFileFlags(
    const Flags& flags, const std::vector<std::pair<std::string, std::string>>& one_prompt_only) {
  if (!flags.Has("input")) {
    if (flags.Has("format")) return absl::InvalidArgumentError("--format needs --input FILE");
    return absl::OkStatus();
  }
  if (flags.Get("input").empty()) return absl::InvalidArgumentError("--input needs a file name");
  for (const char* name : {"text", "text-file", "ids", "ids-file", "chat", "add-generation-prompt",
                           "chat-template-kwargs"}) {
    if (flags.Has(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, " describes one prompt; with --input FILE every line of the file is a "
          "prompt (chat lines carry \"add_generation_prompt\" and \"chat_template_kwargs\")"));
    }
  }
  for (const auto& [name, why] : one_prompt_only) {
    if (flags.Has(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " applies to one prompt, not to --input FILE: ", why));
    }
  }
  return ParseInputFormat(flags.Get("format", "auto")).status();
}

absl::StatusOr<std::vector<BatchItem>> ReadInputFile(const Flags& flags) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const InputFormat format,
                             ParseInputFormat(flags.Get("format", "auto")));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<BatchItem> items,
                             ReadBatchInput(flags.Get("input"), format));
  if (flags.Has("no-special-tokens")) {
    for (BatchItem& item : items) {
      if (item.prompt.text && !item.prompt.add_special_tokens) item.prompt.add_special_tokens = false;
    }
  }
  return items;
}

int PrintInputLines(const std::vector<BatchItem>& items,
                    const std::function<nlohmann::ordered_json(const BatchItem&)>& run) {
  bool failed = false;
  for (const BatchItem& item : items) {
    const nlohmann::ordered_json line =
        item.error.empty() ? run(item) : BatchErrorLine(item.id, item.line, item.error);
    failed = failed || line.contains("error");
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"
              << std::flush;
  }
  return failed ? kExitError : kExitOk;
}

nlohmann::ordered_json LineWithId(const nlohmann::json& id, const nlohmann::json& fields) {
  nlohmann::ordered_json line = {{"id", id}};
  for (const auto& [key, value] : fields.items()) line[key] = value;
  return line;
}

}  // namespace attnscope::cli
