// The cost of serving: Analyze through gRPC (the real attnscope-server on
// loopback, every event received) against the same analysis called in this
// process, for the bundled model at T = 64 and 512; then throughput with 1,
// 4 and 16 concurrent clients (each on its own channel) against the server's
// default admission limits (4 computing, the rest queued).
//
// Usage: rpc_bench [--quick] [--model DIR] [--tokens 64,512] [--runs N]
//                  [--threads N] [--latency-only] [-- server flags...]
//   --quick: fewer runs and 1 s per throughput row; --model: another model
//   directory (a real-size checkpoint: real_size_bench --dir writes one);
//   --threads: the compute threads of both sides (the server's --threads);
//   flags after "--" go to attnscope-server (e.g. -- --max-concurrent 1).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/engine/analysis_run.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"
#include "service/model/language_model.h"

extern char** environ;

namespace attnscope::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = ::attnscope::v1;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int64_t> RandomIds(int64_t n, int64_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}

// The real server as a child process; its address from its first line.
struct Server {
  pid_t pid = -1;
  std::string address;

  bool Start(const std::vector<std::string>& extra) {
    const std::string binary = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server";
    int out[2];
    if (pipe(out) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<std::string> args = {binary, "--listen", "127.0.0.1:0", "--metrics-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const bool spawned =
        posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    std::string line;
    char c = 0;
    while (spawned && read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    const std::string prefix = "attnscope-server listening on ";
    if (line.rfind(prefix, 0) != 0) return false;
    address = line.substr(prefix.size());
    return true;  // the pipe stays open: the server writes one more line
  }

  ~Server() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

// One whole Analyze call; false on any error. `timings`: the server's own,
// from the summary.
bool AnalyzeOnce(v1::Analyzer::Stub& stub, const v1::AnalyzeRequest& request,
                 v1::Timings* timings = nullptr) {
  grpc::ClientContext context;
  auto reader = stub.Analyze(&context, request);
  v1::AnalyzeEvent event;
  bool summary = false;
  while (reader->Read(&event)) {
    if (!event.has_summary()) continue;
    summary = true;
    if (timings != nullptr) *timings = event.summary().timings();
  }
  return reader->Finish().ok() && summary;
}

v1::AnalyzeRequest Request(const std::vector<int64_t>& ids) {
  v1::AnalyzeRequest request;
  request.mutable_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  return request;
}

// In-process and served runs alternating; the medians of the in-process
// wall, the client's wall and the server's compute_seconds and
// total_seconds (from receipt to the last event) of the same calls.
void Latency(const engine::ModelBundle& bundle, v1::Analyzer::Stub& stub, int64_t t, int runs) {
  const std::vector<int64_t> ids = RandomIds(t, bundle.config().vocab_size);
  const engine::Prompt prompt = *engine::PromptFromIds(bundle, ids);
  const v1::AnalyzeRequest request = Request(ids);
  std::vector<double> local, remote, compute, total;
  (void)engine::RunAnalysis(bundle, prompt, {});  // warm-up
  (void)AnalyzeOnce(stub, request);
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    if (!engine::RunAnalysis(bundle, prompt, {}).ok()) return;
    local.push_back(Since(start));
    start = Clock::now();
    v1::Timings timings;
    if (!AnalyzeOnce(stub, request, &timings)) return;
    remote.push_back(Since(start));
    compute.push_back(timings.compute_seconds());
    total.push_back(timings.total_seconds());
  }
  const double l = Median(local) * 1e3, r = Median(remote) * 1e3;
  std::printf("%5ld %14.2f %12.2f %13.2f %9.1f%% %8.3f %12.2f %10.2f\n", static_cast<long>(t), l,
              r, r - l, 100.0 * (r - l) / l, r / l, Median(compute) * 1e3, Median(total) * 1e3);
  std::fflush(stdout);
}

void Throughput(const std::string& address, int64_t t, int64_t vocab, int clients,
                double seconds) {
  const v1::AnalyzeRequest request = Request(RandomIds(t, vocab));
  std::atomic<int64_t> done{0}, failed{0};
  std::vector<double> latencies;
  std::mutex mu;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = v1::Analyzer::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
      while (Since(start) < seconds) {
        const auto begin = Clock::now();
        const bool ok = AnalyzeOnce(*stub, request);
        const double latency = Since(begin);
        (ok ? done : failed)++;
        std::lock_guard<std::mutex> lock(mu);
        latencies.push_back(latency);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const double elapsed = Since(start);
  std::printf("%5ld %8d %12.1f %14.1f %8ld\n", static_cast<long>(t), clients,
              static_cast<double>(done) / elapsed, Median(latencies) * 1e3,
              static_cast<long>(failed.load()));
}

struct Options {
  bool quick = false, latency_only = false;
  std::string model = engine::DefaultModelDirectory();
  std::vector<int64_t> tokens = {64, 512};
  int runs = 0;     // 0: 3 with --quick, else 15
  int threads = 0;  // 0: each side's default
};

int Main(const Options& o, std::vector<std::string> server_flags) {
  if (o.threads > 0) {
    model::SetComputeThreads(o.threads);
    server_flags.push_back("--threads");
    server_flags.push_back(std::to_string(o.threads));
  }
  server_flags.push_back("--model");
  server_flags.push_back("bench=" + o.model);
  const bool quick = o.quick;
  const int runs = o.runs > 0 ? o.runs : quick ? 3 : 15;
  auto bundle = engine::LoadModelBundle(o.model);
  if (!bundle.ok()) {
    std::fprintf(stderr, "rpc_bench: %s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  Server server;
  if (!server.Start(server_flags)) {
    std::fprintf(stderr, "rpc_bench: attnscope-server did not start\n");
    return 1;
  }
  auto stub = v1::Analyzer::NewStub(
      grpc::CreateChannel(server.address, grpc::InsecureChannelCredentials()));
  const auto& config = (*bundle)->config();
  std::string flags;
  for (const std::string& f : server_flags) flags += " " + f;
  std::printf("rpc_bench: %s (%ld layers, %ld heads), server on %s, flags:%s\n\n",
              o.model.c_str(), static_cast<long>(config.num_layers),
              static_cast<long>(config.num_heads), server.address.c_str(),
              flags.empty() ? " (defaults)" : flags.c_str());
  std::printf("Analyze latency, median of %d runs (alternating); compute and total ms: the "
              "server's own timings of the served runs\n", runs);
  std::printf("%5s %14s %12s %13s %10s %8s %12s %10s\n", "T", "in-process ms", "gRPC ms",
              "overhead ms", "overhead", "ratio", "compute ms", "total ms");
  for (int64_t t : o.tokens) Latency(**bundle, *stub, t, runs);
  if (o.latency_only) return 0;
  std::printf("\nThroughput over gRPC (clients send for %.0f s, then finish their call)\n",
              quick ? 1.0 : 4.0);
  std::printf("%5s %8s %12s %14s %8s\n", "T", "clients", "requests/s", "median ms", "failed");
  for (int64_t t : o.tokens) {
    for (int clients : {1, 4, 16}) {
      Throughput(server.address, t, config.vocab_size, clients, quick ? 1.0 : 4.0);
    }
  }
  return 0;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  attnscope::bench::Options o;
  std::vector<std::string> server_flags;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--quick") {
      o.quick = true;
    } else if (flag == "--latency-only") {
      o.latency_only = true;
    } else if (flag == "--model" && has_value) {
      o.model = argv[++i];
    } else if (flag == "--tokens" && has_value) {
      o.tokens.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        o.tokens.push_back(std::stoll(list.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (flag == "--runs" && has_value) {
      o.runs = std::stoi(argv[++i]);
    } else if (flag == "--threads" && has_value) {
      o.threads = std::stoi(argv[++i]);
    } else if (flag == "--") {
      server_flags.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr,
                   "usage: rpc_bench [--quick] [--model DIR] [--tokens 64,512] [--runs N] "
                   "[--threads N] [--latency-only] [-- server flags...]\n");
      return 2;
    }
  }
  return attnscope::bench::Main(o, server_flags);
}
