// Helpers shared by the subcommands: usage errors, loading the model named by
// --model, and turning --text / --text-file / --ids / --ids-file into a
// prompt.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/commands.h"
#include "service/cli/flags.h"
#include "service/engine/analysis_run.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

// --color auto|always|never (auto: when stdout is a terminal): whether to
// paint the text output.
absl::StatusOr<bool> ParseColorFlag(const Flags& flags);

// Prints "attnscope <command>: <message>" and a pointer to --help; returns 2.
int UsageError(const std::string& command, const absl::Status& status);
// Prints "attnscope <command>: <message>"; returns 1.
int RuntimeError(const std::string& command, const absl::Status& status);

// How a command starts: --help prints `help` (exit 0), flags that do not
// parse are a usage error (exit 2). Returns the parsed flags, or nullopt
// with *exit_code set to what the command returns.
template <typename Parsed>
std::optional<Parsed> StartCommand(const std::string& command,
                                   const std::vector<std::string>& args, const char* help,
                                   absl::StatusOr<Parsed> (*parse)(const std::vector<std::string>&),
                                   int* exit_code) {
  if (WantsHelp(args)) {
    std::cout << help;
    *exit_code = kExitOk;
    return std::nullopt;
  }
  absl::StatusOr<Parsed> parsed = parse(args);
  if (!parsed.ok()) {
    *exit_code = UsageError(command, parsed.status());
    return std::nullopt;
  }
  return std::move(*parsed);
}

// --FLAG FILE names a file that can be written (its directory exists, it is
// not a directory): checked before a model loads and a pass runs, so that a
// long run does not end on a wrong path. OK when the flag is absent.
absl::Status CheckPageFile(const Flags& flags, const std::string& flag);

// Writes `page` to --FLAG's file and says so on stderr ("wrote FILE (N kB)").
absl::Status WritePage(const Flags& flags, const std::string& flag, const std::string& page);

// The model of --model (default: the bundled model), with --threads applied
// (a warning on stderr when it exceeds the machine's cores), on the device of
// --device (default cpu; FailedPrecondition for cuda on a build without it).
absl::StatusOr<std::unique_ptr<engine::ModelBundle>> LoadModelFromFlags(const Flags& flags);

// --precision float32|bf16 and --device cpu|cuda|auto, for Flags::Parse.
std::vector<FlagSpec> ComputeFlagSpecs();

// The precision of --precision (default float32), after checking --device
// too: InvalidArgument (a usage error) naming the flag, the value and the
// accepted ones.
absl::StatusOr<model::Precision> ParseComputeFlags(const Flags& flags);

// The analysis flags of analyze and batch, for Flags::Parse: --threshold,
// --sink-epsilon, --template, --block-size, --threads, plus ComputeFlagSpecs().
std::vector<FlagSpec> AnalysisSettingsFlagSpecs();

// Those flags as settings (InvalidArgument, a usage error, naming the flag
// and the value): --threshold X (a positive z-score, default 6.0),
// --sink-epsilon X (in [0, 1], default 0.3), --template T (default auto),
// --block-size N (>= 0), --threads N (1..1024; checked only), --precision
// (set only when given) and --device (checked).
absl::StatusOr<engine::AnalysisSettings> ParseAnalysisSettings(const Flags& flags);

// The prompt flags shared by analyze, generate and tokenize, for Flags::Parse:
// --text, --text-file, --ids, --ids-file, --chat, --add-generation-prompt,
// --no-special-tokens.
std::vector<FlagSpec> PromptFlagSpecs();

// `specs` plus PromptFlagSpecs().
std::vector<FlagSpec> WithPromptFlags(std::vector<FlagSpec> specs);

// The usage check of the prompt flags (InvalidArgument, reported with
// UsageError): exactly one of --text TEXT (TEXT "-" reads stdin),
// --text-file FILE, --ids 1,2,3, --ids-file FILE ("-": stdin) or --chat FILE;
// --text "" and a malformed --ids are refused; --add-generation-prompt only
// with --chat, --no-special-tokens only with a text prompt.
absl::Status CheckPromptFlags(const Flags& flags);

// Reads the prompt of --text -, --text-file or --ids-file into --text or
// --ids (the others pass unchanged). The text may be any UTF-8, NUL
// included (Hugging Face's tokenizers encode it). InvalidArgument (a runtime
// error: the input is bad, not the command line) naming the file (or
// "stdin") for a file that cannot be read, no content, invalid UTF-8 (with
// the byte offset), or a malformed id list.
absl::Status LoadPromptSources(Flags& flags);

// The conversation of --chat FILE into `spec`: its messages
// (chat_template::ParseMessages), --add-generation-prompt, and its template
// variables: the file's "chat_template_kwargs" and "tools" when it is an
// object, then --chat-template-kwargs over them. Errors name the file or
// the flag.
absl::Status ChatFromFlags(const Flags& flags, rpc::PromptSpec* spec);

// A prompt as a request spells it (text, chat or ids) resolved against a
// local model, as the server resolves it.
absl::StatusOr<engine::Prompt> PromptFromSpec(const engine::ModelBundle& bundle,
                                              const rpc::PromptSpec& spec);

// The prompt of --text, --ids or --chat (after LoadPromptSources).
absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags);

}  // namespace attnscope::cli
