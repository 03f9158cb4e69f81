// Soak: the real attnscope-server on loopback under 32 concurrent clients
// for a fixed time: 24 request clients, each sending Analyze (T = 32) or
// Generate (16 prompt tokens + 8 new) at random, one at a time, and 8
// subscribers that each follow the feed for a few seconds, then leave and
// subscribe again. The same load runs for a warm-up first (thread pools and
// allocator arenas grow to the load's working set); then, over the measured
// window, it prints throughput, latency percentiles and errors per RPC
// (admission refusals apart: they are the server protecting itself), the
// feed events received and dropped, the server's RSS at the window's start,
// middle and end (and before the warm-up), and the load average.
//
// Usage: soak_bench [--seconds S] [--warmup W] [--max-requests N]
//                   [-- server flags...]
//   S in [1, 600] (default 60), W in [0, 120] (default 10); N in [1, 10^7]
//   (default 10^6): the run ends at whichever comes first. The server is
//   always started here, on 127.0.0.1: the tool cannot be pointed at another
//   machine.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/rpc/client_channel.h"

extern char** environ;

namespace attnscope::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = ::attnscope::v1;

constexpr int kRequestClients = 24;
constexpr int kSubscribers = 8;
constexpr int64_t kVocab = 50257;  // the bundled tiny-gpt2

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The server as a child process on 127.0.0.1:0; its address from stdout.
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
                                     "127.0.0.1:0", "--max-streams-per-client", "64"};
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
    return true;
  }

  // VmRSS of the server in MiB (0 if unreadable).
  double RssMiB() const {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    while (status >> key) {
      if (key == "VmRSS:") {
        double kib = 0;
        status >> kib;
        return kib / 1024.0;
      }
    }
    return 0;
  }

  ~Server() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::vector<int64_t> RandomIds(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int64_t> pick(0, kVocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}

// What every client records, under one lock.
struct Tally {
  std::mutex mu;
  std::map<std::string, std::vector<double>> latencies;  // rpc -> seconds of OK calls
  std::map<std::string, int64_t> refused;                // admission: RESOURCE_EXHAUSTED
  std::map<std::string, std::vector<std::string>> errors;  // anything else
  int64_t feed_events = 0;
  uint64_t feed_dropped = 0;  // summed over subscriptions (FeedEvent.dropped, last seen)
  int64_t subscriptions = 0;
  Clock::time_point measure_from;  // calls that started earlier are the warm-up's

  void Record(const std::string& rpc, const grpc::Status& status, double seconds,
              Clock::time_point started) {
    std::lock_guard<std::mutex> lock(mu);
    if (started < measure_from) return;
    if (status.ok()) {
      latencies[rpc].push_back(seconds);
    } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
               status.error_message().find("server busy") != std::string::npos) {
      ++refused[rpc];
    } else {
      errors[rpc].push_back(std::to_string(status.error_code()) + ": " + status.error_message());
    }
  }
};

template <typename Event, typename Reader>
grpc::Status Drain(Reader& reader) {
  Event event;
  while (reader->Read(&event)) {
  }
  return reader->Finish();
}

void RequestClient(const std::string& address, int index, Clock::time_point end,
                   std::atomic<int64_t>& budget, Tally& tally) {
  auto stub = v1::Analyzer::NewStub(rpc::CreateClientChannel(address));
  std::mt19937 rng(static_cast<uint32_t>(1000 + index));
  while (Clock::now() < end && budget.fetch_sub(1) > 0) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    const auto start = Clock::now();
    if (rng() % 2 == 0) {
      v1::AnalyzeRequest request;
      const std::vector<int64_t> ids = RandomIds(rng, 32);
      request.mutable_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
      auto reader = stub->Analyze(&context, request);
      const grpc::Status status = Drain<v1::AnalyzeEvent>(reader);
      tally.Record("Analyze", status, Since(start), start);
    } else {
      v1::GenerateRequest request;
      const std::vector<int64_t> ids = RandomIds(rng, 16);
      request.mutable_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
      request.set_max_new_tokens(8);
      request.set_stop_at_eos(false);
      auto reader = stub->Generate(&context, request);
      const grpc::Status status = Drain<v1::GenerateEvent>(reader);
      tally.Record("Generate", status, Since(start), start);
    }
  }
}

// Follows the feed for 2-6 s at a time until `end`.
void Subscriber(const std::string& address, int index, Clock::time_point end, Tally& tally) {
  auto stub = v1::Analyzer::NewStub(rpc::CreateClientChannel(address));
  std::mt19937 rng(static_cast<uint32_t>(2000 + index));
  while (Clock::now() < end) {
    const auto stay = std::chrono::milliseconds(2000 + rng() % 4000);
    const auto started = Clock::now();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::min<std::chrono::steady_clock::duration>(stay, end - Clock::now()));
    v1::SubscribeRequest request;
    request.set_include_token_entropy(index % 2 == 0);
    auto reader = stub->Subscribe(&context, request);
    v1::FeedEvent event;
    int64_t events = 0;
    uint64_t dropped = 0;
    while (reader->Read(&event)) {
      ++events;
      dropped = event.dropped();
    }
    const grpc::Status status = reader->Finish();
    // A subscription ends by its own deadline: that is its normal end.
    const grpc::Status outcome =
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? grpc::Status::OK : status;
    tally.Record("Subscribe", outcome, 0, started);
    std::lock_guard<std::mutex> lock(tally.mu);
    if (started < tally.measure_from) continue;
    tally.feed_events += events;
    tally.feed_dropped += dropped;
    ++tally.subscriptions;
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

void Report(Tally& tally, double seconds) {
  std::printf("\n%-10s %9s %8s %9s %9s %9s %9s %8s %7s\n", "rpc", "ok", "req/s", "p50 ms",
              "p90 ms", "p99 ms", "max ms", "refused", "errors");
  for (const char* rpc : {"Analyze", "Generate"}) {
    const std::vector<double>& l = tally.latencies[rpc];
    std::printf("%-10s %9zu %8.1f %9.1f %9.1f %9.1f %9.1f %8ld %7zu\n", rpc, l.size(),
                static_cast<double>(l.size()) / seconds, Percentile(l, 0.5) * 1e3,
                Percentile(l, 0.9) * 1e3, Percentile(l, 0.99) * 1e3, Percentile(l, 1.0) * 1e3,
                static_cast<long>(tally.refused[rpc]), tally.errors[rpc].size());
  }
  std::printf("%-10s %9ld subscriptions, %ld feed events received, %lu dropped, %zu errors\n",
              "Subscribe", static_cast<long>(tally.subscriptions),
              static_cast<long>(tally.feed_events), static_cast<unsigned long>(tally.feed_dropped),
              tally.errors["Subscribe"].size());
  for (auto& [rpc, errors] : tally.errors) {
    for (size_t i = 0; i < errors.size() && i < 5; ++i) {
      std::printf("  %s error: %s\n", rpc.c_str(), errors[i].c_str());
    }
  }
}

struct SoakOptions {
  double seconds = 60;
  double warmup = 10;
  int64_t max_requests = 1000000;
  std::vector<std::string> server_flags;  // after "--"
};

// False (with the usage on stderr) for an unknown flag or a value out of
// range.
bool ParseOptions(int argc, char** argv, SoakOptions* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      o->server_flags.assign(argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--seconds" && i + 1 < argc) {
      o->seconds = std::atof(argv[++i]);
    } else if (arg == "--warmup" && i + 1 < argc) {
      o->warmup = std::atof(argv[++i]);
    } else if (arg == "--max-requests" && i + 1 < argc) {
      o->max_requests = std::atoll(argv[++i]);
    } else {
      o->seconds = -1;
      break;
    }
  }
  if (!(o->seconds >= 1 && o->seconds <= 600) || !(o->warmup >= 0 && o->warmup <= 120) ||
      o->max_requests < 1 || o->max_requests > 10000000) {
    std::fprintf(stderr,
                 "usage: soak_bench [--seconds S in [1, 600]] [--warmup W in [0, 120]] "
                 "[--max-requests N in [1, 10000000]] [-- server flags]\n");
    return false;
  }
  return true;
}

int Run(int argc, char** argv) {
  SoakOptions options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  const double seconds = options.seconds, warmup = options.warmup;
  const int64_t max_requests = options.max_requests;
  Server server;
  if (!server.Start(options.server_flags)) {
    std::fprintf(stderr, "soak_bench: attnscope-server did not start\n");
    return 1;
  }
  // Two calls first, so that "before the warm-up" is a serving process.
  Tally first_calls;
  std::atomic<int64_t> two{2};
  RequestClient(server.address, 0, Clock::now() + std::chrono::seconds(60), two, first_calls);
  const double rss_cold = server.RssMiB();
  std::printf("soak: %d request clients + %d subscribers, %.0f s warm-up then %.0f s measured "
              "(at most %ld requests) on %s; load average at start %s\n",
              kRequestClients, kSubscribers, warmup, seconds, static_cast<long>(max_requests),
              server.address.c_str(), LoadAverage().c_str());
  Tally tally;
  std::atomic<int64_t> budget{max_requests};
  const auto to_duration = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const auto start = Clock::now() + to_duration(warmup);
  const auto end = start + to_duration(seconds);
  tally.measure_from = start;
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequestClients; ++i) {
    clients.emplace_back(RequestClient, server.address, i, end, std::ref(budget), std::ref(tally));
  }
  for (int i = 0; i < kSubscribers; ++i) {
    clients.emplace_back(Subscriber, server.address, i, end, std::ref(tally));
  }
  // Measurement points in time, not synchronisation.
  std::this_thread::sleep_until(start);
  const double rss_start = server.RssMiB();
  std::this_thread::sleep_until(start + (end - start) / 2);
  const double rss_middle = server.RssMiB();
  for (std::thread& t : clients) t.join();
  const double elapsed = Since(start);
  const double rss_end = server.RssMiB();
  Report(tally, elapsed);
  std::printf("\nserver RSS MiB: before the warm-up %.1f; measured window: start %.1f, middle "
              "%.1f, end %.1f (end/start %.3f, end/middle %.3f)\nmeasured %.1f s; load average "
              "at end %s\n",
              rss_cold, rss_start, rss_middle, rss_end, rss_end / rss_start, rss_end / rss_middle,
              elapsed, LoadAverage().c_str());
  size_t errors = 0;
  for (auto& [rpc, list] : tally.errors) errors += list.size();
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) { return attnscope::bench::Run(argc, argv); }
