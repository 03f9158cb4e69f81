// attnscope-server: the Analyzer gRPC service and its Prometheus metrics.
// Prints "attnscope-server listening on HOST:PORT" and "metrics on
// HOST:PORT" once both are up (so port 0 can be used), and on SIGTERM or
// SIGINT stops accepting calls, drains in-flight requests and exits 0. A
// second SIGTERM or SIGINT during the drain exits at once with 128 + the
// signal's number (130 for SIGINT, 143 for SIGTERM).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
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
    model::ModelLoadOptions options;
    options.device = flags.device;
    auto bundle = engine::LoadModelBundle(dir, options);
    if (!bundle.ok()) {
      return absl::Status(bundle.status().code(),
                          absl::StrCat("--model ", name, "=", dir, ": ", bundle.status().message()));
    }
    // A tokenizer or chat template that fails to load leaves the model
    // serving id prompts; say why once here (requests repeat it).
    const engine::ModelBundle& b = **bundle;
    if (!b.tokenizer_status.ok() && !absl::IsNotFound(b.tokenizer_status)) {
      std::cerr << "attnscope-server: model '" << name << "': text prompts disabled: "
                << b.tokenizer_status.message() << "\n";
    }
    if (!b.chat_template_status.ok() && !absl::IsNotFound(b.chat_template_status)) {
      std::cerr << "attnscope-server: model '" << name << "': chat prompts disabled: "
                << b.chat_template_status.message() << "\n";
    }
    if (absl::Status added = registry->Add(name, *std::move(bundle)); !added.ok()) return added;
  }
  return absl::OkStatus();
}

// What the operator should know about who can reach the ports.
void ReportSecurity(const ServerFlags& flags) {
  const rpc::ServerSecurity& security = flags.rpc.security;
  std::cerr << "attnscope-server: gRPC "
            << (!security.tls()                   ? "in plaintext"
                : security.client_ca_pem.empty() ? "over TLS"
                                                  : "over mutual TLS (client certificates required)")
            << ", " << (security.token.empty() ? "no token required" : "bearer token required")
            << "; the health service is open to all" << std::endl;
  if (!security.token.empty() && !security.tls() && !IsLoopbackAddress(flags.rpc.listen)) {
    std::cerr << "attnscope-server: warning: --auth-token-file without --tls-cert on "
              << flags.rpc.listen
              << ": the token crosses the network in clear text; add --tls-cert/--tls-key "
                 "unless a TLS proxy fronts this port"
              << std::endl;
  }
  if ((security.tls() || !security.token.empty()) && !IsLoopbackAddress(flags.metrics_listen)) {
    std::cerr << "attnscope-server: warning: /metrics on " << flags.metrics_listen
              << " has neither TLS nor a token: anyone who reaches it reads the counters and "
                 "model names (never prompts); keep it on loopback or behind a network policy"
              << std::endl;
  }
}

const char* SignalName(int signal_number) {
  return signal_number == SIGINT ? "SIGINT" : "SIGTERM";
}

// Waits (on a detached thread) for a second SIGTERM/SIGINT during the drain
// and then exits at once: an operator pressing Ctrl-C twice means "now".
void ExitOnSecondSignal(const sigset_t& signals) {
  std::thread([signals] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::cerr << "attnscope-server: second " << SignalName(signal_number)
              << " during the drain: exiting now without waiting for in-flight requests"
              << std::endl;
    std::_Exit(128 + signal_number);
  }).detach();
}

int Serve(ServerFlags flags, const sigset_t& signals) {
  const int threads = model::SetComputeThreads(flags.threads);
  if (!flags.max_concurrent_set) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    flags.rpc.service.max_concurrent = std::max(1, cores / std::max(1, threads));
  }
  rpc::ModelRegistry registry;
  // Loaded on a thread that then ends, and with it the OpenMP team its
  // parallel work started: an idle team left on this thread would make
  // libgomp count more threads than cores and stop spinning between the
  // compute threads' parallel regions (docs/performance.md, "The service").
  absl::Status loaded;
  std::thread([&] { loaded = LoadModels(flags, &registry); }).join();
  if (!loaded.ok()) return Fail(std::string(loaded.message()));
  metrics::ServiceMetrics metrics;
  auto metrics_server = metrics::MetricsServer::Start(flags.metrics_listen, metrics);
  if (!metrics_server.ok()) return Fail(std::string(metrics_server.status().message()));
  auto server = rpc::RpcServer::Start(registry, metrics, flags.rpc);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  ReportSecurity(flags);
  std::cerr << "attnscope-server: " << registry.Describe().size() << " model(s), default '"
            << registry.default_name() << "'; " << threads << " compute threads; --max-concurrent "
            << flags.rpc.service.max_concurrent << ", --max-queue " << flags.rpc.service.max_queue
            << std::endl;
  std::cerr << "attnscope-server: matrix products: " << model::MatrixProductsDescription()
            << std::endl;
  if (const std::string advice = model::BlasAdvice(); !advice.empty()) {
    std::cerr << "attnscope-server: " << advice << std::endl;
  }
  std::cout << "attnscope-server listening on " << (*server)->address() << "\n"
            << "metrics on " << rpc::WithPort(flags.metrics_listen, (*metrics_server)->port())
            << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "attnscope-server: " << SignalName(signal_number)
            << ", draining in-flight requests (at most " << flags.drain_seconds
            << " s; send it again to exit now)" << std::endl;
  const auto drain = std::chrono::milliseconds(static_cast<int64_t>(flags.drain_seconds * 1e3));
  ExitOnSecondSignal(signals);
  (*server)->Shutdown(drain);
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
  auto security = attnscope::rpc::LoadServerSecurity(flags->tls_cert_file, flags->tls_key_file,
                                                     flags->tls_client_ca_file,
                                                     flags->auth_token_file);
  if (!security.ok()) {
    std::cerr << "attnscope-server: " << security.status().message() << "\n";
    return attnscope::server::kExitUsage;
  }
  flags->rpc.security = *std::move(security);
  // Blocked before any thread starts, so only sigwait() ever sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return attnscope::server::Serve(*flags, signals);
}
