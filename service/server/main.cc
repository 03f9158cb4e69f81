// attnscope-server: the Analyzer gRPC service and its Prometheus metrics.
// Prints "attnscope-server listening on HOST:PORT" and "metrics on
// HOST:PORT" once both are up (so port 0 can be used), and on SIGTERM or
// SIGINT stops accepting calls, drains in-flight requests and exits 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "attnscope_version.h"
#include "absl/strings/str_cat.h"
#include "service/engine/model_bundle.h"
#include "service/metrics/service_metrics.h"
#include "service/model/blas_info.h"
#include "service/model/language_model.h"
#include "service/rpc/model_registry.h"
#include "service/rpc/rpc_server.h"
#include "service/server/server_flags.h"

namespace attnscope::server {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int Fail(const std::string& message) {
  std::cerr << "attnscope-server: " << message << "\n";
  return kExitError;
}

absl::Status LoadModels(const ServerFlags& flags, rpc::ModelRegistry* registry) {
  std::vector<std::pair<std::string, std::string>> models = flags.models;
  if (models.empty()) models.emplace_back("tiny-gpt2", engine::DefaultModelDirectory());
  for (const auto& [name, dir] : models) {
    auto bundle = engine::LoadModelBundle(dir);
    if (!bundle.ok()) {
      return absl::Status(bundle.status().code(),
                          absl::StrCat("--model ", name, "=", dir, ": ", bundle.status().message()));
    }
    if (absl::Status added = registry->Add(name, *std::move(bundle)); !added.ok()) return added;
  }
  return absl::OkStatus();
}

int Serve(ServerFlags flags, const sigset_t& signals) {
  const int threads = model::SetComputeThreads(flags.threads);
  if (!flags.max_concurrent_set) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    flags.rpc.service.max_concurrent = std::max(1, cores / std::max(1, threads));
  }
  rpc::ModelRegistry registry;
  if (absl::Status loaded = LoadModels(flags, &registry); !loaded.ok()) {
    return Fail(std::string(loaded.message()));
  }
  metrics::ServiceMetrics metrics;
  auto metrics_server = metrics::MetricsServer::Start(flags.metrics_listen, metrics);
  if (!metrics_server.ok()) return Fail(std::string(metrics_server.status().message()));
  auto server = rpc::RpcServer::Start(registry, metrics, flags.rpc);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  std::cerr << "attnscope-server: " << registry.Describe().size() << " model(s), default '"
            << registry.default_name() << "'; " << threads << " compute threads; --max-concurrent "
            << flags.rpc.service.max_concurrent << ", --max-queue " << flags.rpc.service.max_queue
            << std::endl;
  if (const std::string advice = model::BlasAdvice(); !advice.empty()) {
    std::cerr << "attnscope-server: " << advice << std::endl;
  }
  std::cout << "attnscope-server listening on " << (*server)->address() << "\n"
            << "metrics on " << rpc::WithPort(flags.metrics_listen, (*metrics_server)->port())
            << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "attnscope-server: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
            << ", draining in-flight requests (at most " << flags.drain_seconds << " s)"
            << std::endl;
  (*server)->Shutdown(std::chrono::milliseconds(static_cast<int64_t>(flags.drain_seconds * 1e3)));
  std::cerr << "attnscope-server: stopped" << std::endl;
  return 0;
}

}  // namespace
}  // namespace attnscope::server

int main(int argc, char** argv) {
  using attnscope::server::kUsage;
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::cout << "attnscope-server " << attnscope::kAttnscopeVersion << " (git "
              << attnscope::kAttnscopeGitRevision << ")\n";
    return 0;
  }
  auto flags = attnscope::server::ParseServerFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::cerr << "attnscope-server: " << flags.status().message() << "\n"
              << "Run 'attnscope-server --help' for usage.\n";
    return attnscope::server::kExitUsage;
  }
  if (flags->help) {
    std::cout << kUsage;
    return 0;
  }
  // Blocked before any thread starts, so only sigwait() ever sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return attnscope::server::Serve(*flags, signals);
}
