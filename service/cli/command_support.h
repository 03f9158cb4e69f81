// Helpers shared by the subcommands: usage errors, loading the model named by
// --model, and turning --text / --ids into a prompt.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// --text or --ids (exactly one of them; InvalidArgument otherwise is a usage
// error the caller reports with UsageError).
absl::Status CheckPromptFlags(const Flags& flags);
absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags);

}  // namespace attnscope::cli
