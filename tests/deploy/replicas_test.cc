// Several replicas on loopback: three real attnscope-server processes (port
// 0), clients over an "ipv4:" target with gRPC's round_robin (the CLI, and
// the generated stub on the channel the CLI uses, rpc::CreateClientChannel),
// one replica killed (SIGKILL) and restarted mid-run, Debian's Prometheus
// scraping all three, and the real dashboard (offscreen) merging the three
// replicas' feeds into one.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/rpc/client_channel.h"
#include "tests/deploy/child_process.h"
#include "tests/deploy/dashboard_watch.h"
#include "tests/common/temp_path.h"
#include "tests/deploy/prometheus_process.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::deploy {
namespace {

using Clock = std::chrono::steady_clock;
using metrics::testing::ChildProcess;
using metrics::testing::ReadAfter;

constexpr int kReplicas = 3;
constexpr int kClientThreads = 3;

struct Replica {
  std::unique_ptr<ChildProcess> process;
  std::string address;          // gRPC, 127.0.0.1:PORT
  std::string metrics_address;  // 127.0.0.1:PORT
};

// Starts attnscope-server on the given addresses (port 0 picks one).
::testing::AssertionResult StartReplica(const std::string& listen,
                                        const std::string& metrics_listen, Replica* replica) {
  std::string error;
  replica->process = ChildProcess::Start(
      {std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server", "--listen", listen, "--metrics-listen",
       metrics_listen, "--threads", "1", "--drain-seconds", "2"},
      &error);
  if (!replica->process) return ::testing::AssertionFailure() << error;
  replica->address = ReadAfter(*replica->process, "attnscope-server listening on ");
  replica->metrics_address = ReadAfter(*replica->process, "metrics on ");
  if (replica->metrics_address.empty()) {
    return ::testing::AssertionFailure() << "no addresses: " << replica->process->Stderr();
  }
  return ::testing::AssertionSuccess();
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// attnscope_requests_total{rpc="Analyze",code="OK"} in the replica's own
// /metrics; -1 if it cannot be read.
double AnalyzeOk(const Replica& replica) {
  const metrics::testing::HttpReply reply =
      metrics::testing::HttpGet(PortOf(replica.metrics_address), "/metrics");
  if (reply.status != 200) return -1;
  std::istringstream lines(reply.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("attnscope_requests_total{", 0) == 0 &&
        line.find("rpc=\"Analyze\"") != std::string::npos &&
        line.find("code=\"OK\"") != std::string::npos) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return 0;  // The family appears with its first request.
}

struct Request {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  bool ended_after_kill = false;  // the kill had begun when it ended (Load::MarkKill)
};

// One Analyze of a short prompt, read to the end.
Request Analyze(v1::Analyzer::Stub& stub, const std::string& text) {
  Request r;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::AnalyzeRequest request;
  request.set_text(text);
  auto reader = stub.Analyze(&context, request);
  v1::AnalyzeEvent event;
  bool summary = false;
  while (reader->Read(&event)) summary = summary || event.has_summary();
  const grpc::Status status = reader->Finish();
  r.code = status.ok() && !summary ? grpc::StatusCode::DATA_LOSS : status.error_code();
  r.message = status.error_message();
  return r;
}

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (Replica& replica : replicas_) {
      ASSERT_TRUE(StartReplica("127.0.0.1:0", "127.0.0.1:0", &replica));
    }
    target_ = "ipv4:";
    for (const Replica& replica : replicas_) {
      target_ += (target_.size() > 5 ? "," : "") + replica.address;
    }
  }

  void TearDown() override {
    for (Replica& replica : replicas_) {
      if (replica.process) {
        EXPECT_EQ(replica.process->Stop(20), 0) << replica.process->Stderr();
      }
    }
  }

  // Polls every replica's /metrics until `done` holds for the counts
  // (bounded: 60 s); the last counts. A stopped replica counts -1.
  template <typename Done>
  std::vector<double> AnalyzeOkUntil(Done done) {
    std::vector<double> counts;
    for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
      counts.clear();
      for (const Replica& replica : replicas_) {
        counts.push_back(replica.process ? AnalyzeOk(replica) : -1);
      }
      if (done(counts)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return counts;
  }

  Replica replicas_[kReplicas];
  std::string target_;
};

TEST_F(ReplicasTest, CliTakesTargetUrisAndChecksHealth) {
  const std::string bin = std::string(ATTNSCOPE_BIN_DIR) + "/attnscope";
  const auto cli = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), args.begin(), args.end());
    return metrics::testing::RunProcess(argv, "");
  };
  auto result = cli({"--server", target_, "models"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("tiny-gpt2"), std::string::npos) << result.output;
  result = cli({"--server", "dns:///" + replicas_[1].address, "analyze", "--text", "Hello world"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Context health"), std::string::npos) << result.output;
  // The readiness probe of deploy/kubernetes asks for attnscope.v1.Analyzer.
  for (const char* service : {"", "attnscope.v1.Analyzer"}) {
    result = cli({"--server", target_, "health", "--service", service});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output, "SERVING\n");
  }
  result = cli({"--server", replicas_[0].address, "health", "--service", "no.such.Service"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("NOT_FOUND"), std::string::npos) << result.output;
  result = cli({"--server", "ipv4:not-an-address", "models"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("'ipv4:not-an-address' is not a server address"), std::string::npos)
      << result.output;

  // Each CLI call is one request on a fresh channel: it goes to whichever
  // replica's connection is ready first, so the spread is left to the
  // long-lived channel of the next test. Every call lands on some replica.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cli({"--server", target_, "analyze", "--ids", "464,3797"}).exit_code, 0);
  }
  const std::vector<double> counts =
      AnalyzeOkUntil([](const std::vector<double>& c) { return c[0] + c[1] + c[2] == 3; });
  EXPECT_EQ(counts[0] + counts[1] + counts[2], 3);  // + the dns:/// one

  // With one replica gone, round_robin skips its address.
  EXPECT_EQ(replicas_[0].process->Stop(20), 0);
  replicas_[0].process.reset();
  for (int i = 0; i < 3; ++i) {
    result = cli({"--server", target_, "analyze", "--ids", "464,3797"});
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  result = cli({"--server", target_, "health"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// Client threads that send Analyze requests back to back over one channel
// until stopped, recording every request.
class Load {
 public:
  Load(const std::string& target, int threads)
      : stub_(v1::Analyzer::NewStub(rpc::CreateClientChannel(target))) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t] {
        for (int i = 0; !stop_; ++i) {
          Request r =
              Analyze(*stub_, "Replica test " + std::to_string(t) + " " + std::to_string(i));
          r.ended_after_kill = kill_begun_;
          std::lock_guard<std::mutex> lock(mutex_);
          requests_.push_back(r);
        }
      });
    }
  }
  ~Load() { Stop(); }
  // Call just before killing a replica: requests that end from now on are
  // marked ended_after_kill.
  void MarkKill() { kill_begun_ = true; }
  void Stop() {
    stop_ = true;
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  std::size_t Finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_.size();
  }
  // Waits (60 s at most) until `n` requests have finished in all.
  bool WaitFinished(std::size_t n) {
    for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
      if (Finished() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  std::unique_ptr<v1::Analyzer::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> kill_begun_{false};
  std::mutex mutex_;
  std::vector<Request> requests_;
  std::vector<std::thread> threads_;
};

// Every failed request ended after the kill began and failed with
// UNAVAILABLE: it was in flight on the killed replica, or was sent there
// before the client had read that connection's close. There are at most two
// such per client thread (the one in flight and its next); a client that never
// noticed would keep failing one pick in three until the restart.
void ExpectOnlyRequestsInFlightFailed(const std::vector<Request>& requests) {
  int failed = 0, ok = 0;
  for (const Request& r : requests) {
    if (r.code == grpc::StatusCode::OK) {
      ++ok;
      continue;
    }
    ++failed;
    EXPECT_EQ(r.code, grpc::StatusCode::UNAVAILABLE) << r.message;
    EXPECT_TRUE(r.ended_after_kill) << "a request failed before the kill: " << r.message;
  }
  EXPECT_LE(failed, 2 * kClientThreads);
  EXPECT_GE(ok, 15);
  std::cout << "requests: " << ok << " ok, " << failed
            << " failed (in flight on the killed replica)\n";
}

// How many instances Prometheus shows with served Analyze requests, polled
// (60 s at most) until there are `expected`.
std::size_t ServedInstances(testing::PrometheusProcess& prometheus, std::size_t expected) {
  std::map<std::string, std::string> served;
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
    served = prometheus.Query(
        "sum by (instance) "
        "(attnscope_requests_total{job=\"attnscope\",rpc=\"Analyze\",code=\"OK\"}) > 0",
        "instance");
    if (served.size() == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return served.size();
}

TEST_F(ReplicasTest, RoundRobinSurvivesAReplicaRestartAndPrometheusSeesAllThree) {
  const std::string dir = test::UniqueTempPath("replicas");
  ASSERT_TRUE(std::filesystem::create_directories(dir)) << dir;
  std::string failure;
  auto prometheus = testing::PrometheusProcess::Start(
      {replicas_[0].metrics_address, replicas_[1].metrics_address, replicas_[2].metrics_address},
      dir, &failure);
  ASSERT_NE(prometheus, nullptr) << failure;
  const std::map<std::string, std::string> all_up = {{replicas_[0].metrics_address, "1"},
                                                     {replicas_[1].metrics_address, "1"},
                                                     {replicas_[2].metrics_address, "1"}};
  EXPECT_EQ(prometheus->QueryUntil("up{job=\"attnscope\"}", "instance", all_up), all_up);

  // The dashboard subscribes to every replica before any request is sent.
  testing::DashboardWatch dashboard(target_);
  ASSERT_TRUE(dashboard.WaitUntil([&] { return dashboard.AllConnected(); }, 60000))
      << dashboard.IndicatorText();
  const std::set<std::string> labels = {replicas_[0].address, replicas_[1].address,
                                        replicas_[2].address};
  ASSERT_EQ(dashboard.Replicas(), labels);
  EXPECT_TRUE(dashboard.ReplicaColumnShown());
  EXPECT_NE(dashboard.IndicatorText().find("3 of 3 replicas connected"), std::string::npos)
      << dashboard.IndicatorText();

  Load load(target_, kClientThreads);
  // Requests land on all three before the kill.
  std::vector<double> before = AnalyzeOkUntil(
      [](const std::vector<double>& c) { return c[0] >= 2 && c[1] >= 2 && c[2] >= 2; });
  for (int i = 0; i < kReplicas; ++i)
    ASSERT_GE(before[i], 2) << "replica " << i << " got no requests";
  // ... and the dashboard's one feed shows requests from all three.
  EXPECT_TRUE(dashboard.WaitUntil(
      [&] { return dashboard.ReplicasWithFinishedRows("Replica test") == labels; }, 30000))
      << dashboard.ReplicasWithFinishedRows("Replica test").size() << " replicas in the feed";
  const std::string restarted = replicas_[1].address;
  const unsigned long long session_before = dashboard.LatestSession(restarted);

  // Replica 1 crashes; it comes back on the same addresses.
  load.MarkKill();
  EXPECT_EQ(replicas_[1].process->Kill(), 128 + SIGKILL);
  const std::size_t finished_at_kill = load.Finished();
  ASSERT_TRUE(load.WaitFinished(finished_at_kill + 9)) << "the other two replicas stopped serving";
  // The dashboard sees that replica's feed end; the other two stay connected.
  EXPECT_TRUE(dashboard.WaitUntil(
      [&] { return dashboard.ReplicaState(restarted) == "Reconnecting"; }, 30000))
      << dashboard.IndicatorText();
  EXPECT_EQ(dashboard.ReplicaState(replicas_[0].address), "Connected");
  EXPECT_EQ(dashboard.ReplicaState(replicas_[2].address), "Connected");
  EXPECT_NE(dashboard.IndicatorText().find("Reconnecting · 2 of 3 replicas connected"),
            std::string::npos)
      << dashboard.IndicatorText();
  const std::string address = replicas_[1].address, metrics_address = replicas_[1].metrics_address;
  ASSERT_TRUE(StartReplica(address, metrics_address, &replicas_[1]));
  ASSERT_EQ(replicas_[1].address, address);
  // The restarted replica gets requests again (its counter restarted at 0).
  std::vector<double> after =
      AnalyzeOkUntil([](const std::vector<double>& c) { return c[1] >= 3; });
  EXPECT_GE(after[1], 3) << "the restarted replica gets no requests";
  // The dashboard's feed of that replica reconnects (a second subscription)
  // and shows its new requests; what ran on it at the kill shows as lost.
  EXPECT_TRUE(dashboard.WaitUntil(
      [&] {
        return dashboard.ReplicaSubscriptions(restarted) == 2 && dashboard.AllConnected() &&
               dashboard.Rows(restarted, session_before + 1, "finished") >= 1;
      },
      60000))
      << dashboard.IndicatorText() << "; subscriptions "
      << dashboard.ReplicaSubscriptions(restarted);
  EXPECT_EQ(dashboard.ReplicaSubscriptions(replicas_[0].address), 1);
  EXPECT_EQ(dashboard.ReplicaSubscriptions(replicas_[2].address), 1);
  EXPECT_EQ(dashboard.Rows(restarted, 0, "running") -
                dashboard.Rows(restarted, session_before + 1, "running"),
            0)
      << "a request cut off by the kill still shows as running";
  load.Stop();
  EXPECT_TRUE(dashboard.WaitUntil(
      [&] {
        for (const Replica& r : replicas_) {
          if (dashboard.Rows(r.address, 0, "running") != 0) return false;
        }
        return true;
      },
      30000))
      << "requests that finished still show as running";

  // The send box goes round robin too: consecutive sends land on all three.
  for (int i = 0; i < 9 && dashboard.ReplicasWithFinishedRows("Send box").size() < 3; ++i) {
    const std::string status = dashboard.SendFromBox("Send box prompt " + std::to_string(i));
    EXPECT_EQ(status.rfind("done", 0), 0u) << status;
    dashboard.WaitUntil(
        [&] {
          return dashboard.Rows(replicas_[0].address, 0, "running") +
                     dashboard.Rows(replicas_[1].address, 0, "running") +
                     dashboard.Rows(replicas_[2].address, 0, "running") ==
                 0;
        },
        10000);
  }
  EXPECT_EQ(dashboard.ReplicasWithFinishedRows("Send box"), labels);
  // The feed's replica filter shows one replica's rows.
  int filtered = 0;
  for (const std::string& label : labels) {
    const int rows = dashboard.RowsShownFilteredTo(label);
    EXPECT_GT(rows, 0) << label;
    filtered += rows;
  }
  EXPECT_EQ(filtered, dashboard.RowCount());
  const std::string screenshot =
      std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/dashboard-replicas-screenshot.png";
  EXPECT_TRUE(dashboard.Screenshot(screenshot)) << screenshot;
  std::cout << "screenshot: " << screenshot << " (" << dashboard.RowCount() << " feed rows)\n";

  ExpectOnlyRequestsInFlightFailed(load.requests());

  // Prometheus scrapes all three again and sees the restarted one's requests.
  EXPECT_EQ(prometheus->QueryUntil("up{job=\"attnscope\"}", "instance", all_up), all_up);
  EXPECT_EQ(ServedInstances(*prometheus, 3), 3u);
  prometheus.reset();  // the directory goes at exit (UniqueTempPath)
}

}  // namespace
}  // namespace attnscope::deploy
