#include "service/cli/command_support.h"

#include <iostream>

#include "service/core/status_macros.h"
#include "service/model/language_model.h"

namespace attnscope::cli {

int UsageError(const std::string& command, const absl::Status& status) {
  std::cerr << "attnscope " << command << ": " << status.message() << "\n"
            << "Run 'attnscope " << command << " --help' for usage.\n";
  return 2;
}

int RuntimeError(const std::string& command, const absl::Status& status) {
  std::cerr << "attnscope " << command << ": " << status.message() << "\n";
  return 1;
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<engine::ModelBundle>> LoadModelFromFlags(const Flags& flags) {
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0, 0, 1024));
  model::SetComputeThreads(static_cast<int>(threads));
  return engine::LoadModelBundle(flags.Get("model", engine::DefaultModelDirectory()));
}

absl::Status CheckPromptFlags(const Flags& flags) {
  if (flags.Has("text") == flags.Has("ids")) {
    return absl::InvalidArgumentError("give exactly one of --text TEXT or --ids 1,2,3");
  }
  if (flags.Has("ids")) return ParseIdList(flags.Get("ids"), "--ids").status();
  return absl::OkStatus();
}

absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags) {
  if (flags.Has("text")) return engine::PromptFromText(bundle, flags.Get("text"));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(flags.Get("ids"), "--ids"));
  return engine::PromptFromIds(bundle, std::move(ids));
}

}  // namespace attnscope::cli
