// attnscope-server's command line.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/model/compute_options.h"
#include "service/rpc/rpc_server.h"

namespace attnscope::server {

struct ServerFlags {
  bool help = false;
  std::string metrics_listen = "127.0.0.1:9464";
  std::vector<std::pair<std::string, std::string>> models;  // (NAME, DIR); empty: the default
  int threads = 0;          // libtorch intra-op threads; 0: all cores
  model::DeviceKind device = model::DeviceKind::kCpu;  // where every model is loaded
  // --max-concurrent given? If not, the server picks cores / threads, so that
  // concurrent forward passes never oversubscribe the cores.
  bool max_concurrent_set = false;
  double drain_seconds = 10;
  // The files behind rpc.security (read by LoadServerSecurity after parsing).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string auth_token_file;
  rpc::RpcServerOptions rpc;
};

// The usage text printed by --help.
extern const char kUsage[];

// InvalidArgument naming the flag, the value and the accepted range for an
// unknown flag, a missing or malformed value, an address whose port is not
// in 0..65535 (--listen, --metrics-listen), or --model without NAME=DIR.
absl::StatusOr<ServerFlags> ParseServerFlags(const std::vector<std::string>& args);

// True for an address only this machine can reach: 127.0.0.0/8, [::1] or
// localhost (any port).
bool IsLoopbackAddress(const std::string& listen);

}  // namespace attnscope::server
