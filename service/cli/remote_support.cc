#include "service/cli/remote_support.h"

#include <chrono>
#include <iostream>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/core/status_macros.h"
#include "service/rpc/transport_security.h"

namespace attnscope::cli {

namespace {

rpc::ClientSecurity& MutableRemoteSecurity() {
  static rpc::ClientSecurity security;
  return security;
}

// Checks that a PEM file is there and readable now, so a typo is a usage
// error before any connection is tried.
absl::Status CheckPem(const std::string& path, const std::string& flag) {
  if (path.empty()) return absl::OkStatus();
  return rpc::ReadSecretFile(path, flag, /*pem=*/true).status();
}

}  // namespace

absl::Status TakeConnectionFlags(std::vector<std::string>& args, bool has_server,
                                 rpc::ClientSecurity* security) {
  std::string token_file;
  const std::map<std::string, std::string*> targets = {{"--tls-ca", &security->tls_ca_file},
                                                       {"--tls-cert", &security->tls_cert_file},
                                                       {"--tls-key", &security->tls_key_file},
                                                       {"--auth-token-file", &token_file}};
  while (!args.empty()) {
    std::string name = args.front(), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto target = targets.find(name);
    if (target == targets.end()) break;
    if (eq == std::string::npos) {
      if (args.size() < 2) return absl::InvalidArgumentError(name + " needs a FILE");
      value = args[1];
      args.erase(args.begin());
    }
    args.erase(args.begin());
    if (value.empty()) return absl::InvalidArgumentError(name + " needs a FILE");
    if (!has_server) {
      return absl::InvalidArgumentError(
          name + " is for connecting to a server: give --server TARGET before it");
    }
    *target->second = value;
  }
  if (security->tls_cert_file.empty() != security->tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both (the client certificate and its key) "
        "or neither");
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckPem(security->tls_ca_file, "--tls-ca"));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPem(security->tls_cert_file, "--tls-cert"));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPem(security->tls_key_file, "--tls-key"));
  if (!has_server) return absl::OkStatus();
  ATTNSCOPE_ASSIGN_OR_RETURN(security->token, rpc::ClientToken(token_file));
  return absl::OkStatus();
}

void SetRemoteSecurity(rpc::ClientSecurity security) {
  MutableRemoteSecurity() = std::move(security);
}

const rpc::ClientSecurity& RemoteSecurity() { return MutableRemoteSecurity(); }

absl::StatusOr<rpc::PromptSpec> PromptSpecFromFlags(const Flags& flags) {
  rpc::PromptSpec spec;
  if (flags.Has("text")) {
    spec.text = flags.Get("text");
    if (flags.Has("no-special-tokens")) spec.add_special_tokens = false;
    return spec;
  }
  if (flags.Has("chat")) {
    ATTNSCOPE_RETURN_IF_ERROR(ChatFromFlags(flags, &spec));
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

absl::StatusOr<std::pair<int64_t, int64_t>> RemoteShape(rpc::RemoteClient& client,
                                                        const std::string& name) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::vector<rpc::ModelDescription> models,
                             client.ListModels());
  for (const rpc::ModelDescription& m : models) {
    if (name.empty() || m.name == name) return std::make_pair(m.num_layers, m.num_heads);
  }
  return absl::NotFoundError(absl::StrCat("the server has no model '", name,
                                          "' (see 'attnscope --server ... models')"));
}

}  // namespace attnscope::cli
