#include "service/cli/command_support.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "service/chat_template/chat_template.h"
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
  if (flags.Has("text") + flags.Has("ids") + flags.Has("chat") != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --text TEXT, --ids 1,2,3 or --chat FILE");
  }
  if (flags.Has("add-generation-prompt") && !flags.Has("chat")) {
    return absl::InvalidArgumentError("--add-generation-prompt needs --chat FILE");
  }
  if (flags.Has("no-special-tokens") && !flags.Has("text")) {
    return absl::InvalidArgumentError(
        "--no-special-tokens applies to --text only (a chat template writes its own special "
        "tokens; ids are taken as given)");
  }
  if (flags.Has("ids")) return ParseIdList(flags.Get("ids"), "--ids").status();
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ChatFromFlags(const Flags& flags) {
  const std::string path = flags.Get("chat");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--chat ", path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  return chat_template::ParseMessages(text.str(), path);
}

absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags) {
  if (flags.Has("text")) {
    return engine::PromptFromText(bundle, flags.Get("text"), !flags.Has("no-special-tokens"));
  }
  if (flags.Has("chat")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(nlohmann::json messages, ChatFromFlags(flags));
    return engine::PromptFromChat(bundle, messages, flags.Has("add-generation-prompt"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(flags.Get("ids"), "--ids"));
  return engine::PromptFromIds(bundle, std::move(ids));
}

}  // namespace attnscope::cli
