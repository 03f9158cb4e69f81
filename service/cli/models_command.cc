// attnscope models: the model a local --model directory holds, or every
// model a server has loaded.
#include <iostream>

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/model_listing.h"
#include "service/cli/remote_support.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

int RunModels(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kModelsHelp;
    return kExitOk;
  }
  auto flags = Flags::Parse(args, ModelsFlagSpecs());
  if (!flags.ok()) return UsageError("models", flags.status());
  if (server.empty()) return RunLocalModels(*flags);
  if (absl::Status s = RejectLocalOnlyFlags(*flags, {"model"}); !s.ok()) {
    return UsageError("models", s);
  }
  auto listed = rpc::RemoteClient(server, RemoteSecurity()).ListModels();
  if (!listed.ok()) return RuntimeError("models", listed.status());
  std::cout << (flags->Has("json") ? ModelsJson(*listed).dump() + "\n" : ModelsTable(*listed));
  return kExitOk;
}

}  // namespace attnscope::cli
