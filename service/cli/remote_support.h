// Helpers for the commands that can run against a server (attnscope
// --server HOST:PORT analyze|generate|models): the prompt flags as a
// request, and the flags that only make sense locally.
#pragma once

#include <functional>
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

// --deadline SECONDS: 0 when absent; InvalidArgument (a usage error) unless
// a finite number > 0.
absl::StatusOr<double> ParseDeadline(const Flags& flags);

// The call options of `attnscope <command> --server SERVER`: the deadline,
// and a line on stderr when the server has not answered within a second
// ("waiting for SERVER: queued behind other requests or still computing").
rpc::CallOptions RemoteCallOptions(const std::string& command, const std::string& server,
                                   double deadline_seconds);

// A deadline that passed (DeadlineExceeded remotely, Cancelled by the local
// deadline) as a message naming --deadline; other errors unchanged.
absl::Status ExplainDeadline(const absl::Status& status, double deadline_seconds);

// A stop condition that turns true `deadline_seconds` after this call (never
// when 0), for local runs.
std::function<bool()> LocalDeadline(double deadline_seconds);

}  // namespace attnscope::cli
