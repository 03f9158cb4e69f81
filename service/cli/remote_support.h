// Helpers for the commands that can run against a server (attnscope
// --server HOST:PORT analyze|generate|models): the prompt flags as a
// request, and the flags that only make sense locally.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/cli/flags.h"
#include "service/rpc/client_security.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

// The connection flags that come before the command, with --server:
// --tls-ca FILE, --tls-cert FILE, --tls-key FILE and --auth-token-file FILE
// (no token file: $ATTNSCOPE_TOKEN). Each is taken off the front of `args`
// (also as --flag=FILE) into *security; the token is read from its file. A
// usage error (InvalidArgument naming the flag) for a missing value, an
// unreadable file, --tls-cert without --tls-key (or the reverse), or any of
// them without `has_server`.
absl::Status TakeConnectionFlags(std::vector<std::string>& args, bool has_server,
                                 rpc::ClientSecurity* security);

// The security every remote command uses, set once by main before it runs
// a command (plaintext, no token until then).
void SetRemoteSecurity(rpc::ClientSecurity security);
const rpc::ClientSecurity& RemoteSecurity();

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

// The layers and heads of a served model as the server describes it: the
// model named NAME, or the default (the first listed) for "". NotFound
// naming NAME when the server has no such model.
absl::StatusOr<std::pair<int64_t, int64_t>> RemoteShape(rpc::RemoteClient& client,
                                                        const std::string& name);

// A stop condition that turns true `deadline_seconds` after this call (never
// when 0), for local runs.
std::function<bool()> LocalDeadline(double deadline_seconds);

}  // namespace attnscope::cli
