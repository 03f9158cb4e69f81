#include "service/cli/remote_support.h"

#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {

absl::StatusOr<rpc::PromptSpec> PromptSpecFromFlags(const Flags& flags) {
  rpc::PromptSpec spec;
  if (flags.Has("text")) {
    spec.text = flags.Get("text");
    if (flags.Has("no-special-tokens")) spec.add_special_tokens = false;
    return spec;
  }
  if (flags.Has("chat")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(spec.chat, ChatFromFlags(flags));
    spec.add_generation_prompt = flags.Has("add-generation-prompt");
    return spec;
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(spec.ids, ParseIdList(flags.Get("ids"), "--ids"));
  return spec;
}

absl::Status RejectLocalOnlyFlags(const Flags& flags,
                                  const std::vector<std::string>& local_only) {
  for (const std::string& name : local_only) {
    if (flags.Has(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, " works only without --server (the server runs the model); drop one"));
    }
  }
  return absl::OkStatus();
}

std::string RemoteModelName(const Flags& flags) { return flags.Get("model"); }

}  // namespace attnscope::cli
