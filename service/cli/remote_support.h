// Helpers for the commands that can run against a server (attnscope
// --server HOST:PORT analyze|generate|models): the prompt flags as a
// request, and the flags that only make sense locally.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/cli/flags.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

// --text or --ids (already checked by CheckPromptFlags) as a request prompt.
absl::StatusOr<rpc::PromptSpec> PromptSpecFromFlags(const Flags& flags);

// InvalidArgument naming the first of `local_only` that is set: with
// --server those flags have no meaning (the server owns the model files).
absl::Status RejectLocalOnlyFlags(const Flags& flags, const std::vector<std::string>& local_only);

// The name of the model to ask the server for: --model NAME ("" = the
// server's default).
std::string RemoteModelName(const Flags& flags);

}  // namespace attnscope::cli
