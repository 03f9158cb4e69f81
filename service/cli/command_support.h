// Helpers shared by the subcommands: usage errors, loading the model named by
// --model, and turning --text / --ids into a prompt.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/flags.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// Prints "attnscope <command>: <message>" and a pointer to --help; returns 2.
int UsageError(const std::string& command, const absl::Status& status);
// Prints "attnscope <command>: <message>"; returns 1.
int RuntimeError(const std::string& command, const absl::Status& status);

// True if the arguments ask for help ("--help" or "-h" anywhere).
bool WantsHelp(const std::vector<std::string>& args);

// The model of --model (default: the bundled model), with --threads applied.
absl::StatusOr<std::unique_ptr<engine::ModelBundle>> LoadModelFromFlags(const Flags& flags);

// The prompt flags shared by analyze, generate and tokenize, for Flags::Parse.
inline const std::vector<FlagSpec>& PromptFlagSpecs() {
  static const std::vector<FlagSpec> specs = {{"text"}, {"ids"}, {"chat"},
                                              {"add-generation-prompt", false},
                                              {"no-special-tokens", false}};
  return specs;
}

// `specs` plus PromptFlagSpecs().
inline std::vector<FlagSpec> WithPromptFlags(std::vector<FlagSpec> specs) {
  specs.insert(specs.end(), PromptFlagSpecs().begin(), PromptFlagSpecs().end());
  return specs;
}

// --text, --ids or --chat (exactly one of them; --add-generation-prompt only
// with --chat, --no-special-tokens only with --text). InvalidArgument
// otherwise is a usage error the caller reports with UsageError.
absl::Status CheckPromptFlags(const Flags& flags);

// The messages of --chat FILE (chat_template::ParseMessages); errors name
// the file.
absl::StatusOr<nlohmann::json> ChatFromFlags(const Flags& flags);
absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags);

}  // namespace attnscope::cli
