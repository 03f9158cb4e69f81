// attnscope --server TARGET health: a grpc.health.v1 check, for container
// HEALTHCHECKs and scripts (Debian has no grpc_health_probe).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/remote_support.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] =
    R"(Usage: attnscope --server TARGET health [--service NAME] [--timeout SECONDS]

Asks the server's grpc.health.v1 health service whether it serves and prints
the answer (SERVING, NOT_SERVING, ...). Exit code 0 only for SERVING, 1 for
any other answer or when nothing answers within the timeout.

  --service NAME     the service to check (default "": the whole server;
                     the server also registers attnscope.v1.Analyzer)
  --timeout SECONDS  deadline of the check (default 5)
)";

constexpr double kMaxTimeoutSeconds = 3600;

}  // namespace

int RunHealth(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto flags = Flags::Parse(args, {{"service"}, {"timeout"}});
  if (!flags.ok()) return UsageError("health", flags.status());
  if (server.empty()) {
    return UsageError("health", absl::InvalidArgumentError(
                                    "health checks a server: give --server TARGET before it"));
  }
  auto timeout = flags->GetDouble("timeout", 5);
  if (!timeout.ok()) return UsageError("health", timeout.status());
  if (!(*timeout > 0 && *timeout <= kMaxTimeoutSeconds)) {
    return UsageError("health", absl::InvalidArgumentError(
                                    absl::StrCat("--timeout must be in (0, ", kMaxTimeoutSeconds,
                                                 "] seconds, got ", flags->Get("timeout"))));
  }
  auto status = rpc::RemoteClient(server, RemoteSecurity()).CheckHealth(flags->Get("service"), *timeout);
  if (!status.ok()) return RuntimeError("health", status.status());
  std::cout << *status << "\n";
  return *status == "SERVING" ? kExitOk : kExitError;
}

}  // namespace attnscope::cli
