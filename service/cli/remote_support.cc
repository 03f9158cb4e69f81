#include "service/cli/remote_support.h"

#include <chrono>
#include <iostream>

#include "absl/status/status.h"
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

absl::StatusOr<double> ParseDeadline(const Flags& flags) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const double seconds, flags.GetDouble("deadline", 0.0));
  if (flags.Has("deadline") && !(seconds > 0.0 && seconds < 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline must be a number of seconds > 0, got '", flags.Get("deadline"), "'"));
  }
  return seconds;
}

rpc::CallOptions RemoteCallOptions(const std::string& command, const std::string& server,
                                   double deadline_seconds) {
  rpc::CallOptions options;
  options.deadline_seconds = deadline_seconds;
  options.slow_start_seconds = 1.0;
  options.on_slow_start = [command, server] {
    std::cerr << "attnscope " << command << ": waiting for " << server
              << ": no reply after 1 s (queued behind other requests, or still computing)\n";
  };
  return options;
}

absl::Status ExplainDeadline(const absl::Status& status, double deadline_seconds) {
  if (deadline_seconds <= 0) return status;
  if (absl::IsDeadlineExceeded(status) || absl::IsCancelled(status)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no complete answer within --deadline ", deadline_seconds, " s; gave up (", status.message(),
        ")"));
  }
  return status;
}

std::function<bool()> LocalDeadline(double deadline_seconds) {
  if (deadline_seconds <= 0) return nullptr;
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(deadline_seconds));
  return [end] { return std::chrono::steady_clock::now() > end; };
}

}  // namespace attnscope::cli
