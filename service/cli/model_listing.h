// `attnscope models` without a server: a local model directory described
// from its config.json, its checkpoint's headers and its tokenizer, never its
// weights; and the table and JSON both local and remote listings print.
// Free of libtorch and gRPC: the CLI's front binary (front_main.cc) answers
// `models --model DIR` with it without starting the engine.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/flags.h"
#include "service/rpc/model_description.h"

namespace attnscope::cli {

extern const char kModelsHelp[];

// The flags of `attnscope models`.
std::vector<FlagSpec> ModelsFlagSpecs();

// The model of a local directory, named after its last path component. A
// tokenizer that is there but does not load is a warning on stderr (the
// model still serves id prompts); no config.json, an unsupported config or
// no safetensors checkpoint is an error naming the file.
absl::StatusOr<rpc::ModelDescription> DescribeModelDirectory(const std::string& dir);

// A JSON array of objects, one per model, with every field.
nlohmann::json ModelsJson(const std::vector<rpc::ModelDescription>& models);

// One row per model under a header.
std::string ModelsTable(const std::vector<rpc::ModelDescription>& models);

// `attnscope models` on parsed flags without --server: prints the model of
// --model DIR (default: the bundled one) and returns the exit code.
int RunLocalModels(const Flags& flags);

}  // namespace attnscope::cli
