// MetricsServer over real loopback sockets, checked with Debian's promtool.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/metrics/service_metrics.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::metrics {
namespace {

using testing::HasLine;
using ::testing::HasSubstr;
using testing::HttpGet;
using testing::SendRaw;

std::unique_ptr<MetricsServer> StartOrDie(const ServiceMetrics& metrics,
                                          const std::string& listen = "127.0.0.1:0") {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(listen, metrics);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

// One of every family, so promtool sees each type and naming.
void RecordOneOfEach(ServiceMetrics& metrics) {
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.04);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.06);
  metrics.RecordRequest("Generate", "m", ServiceMetrics::Origin::kUser, "RESOURCE_EXHAUSTED",
                        0.001);
  metrics.RecordFirstEvent("Generate", 0.03);
  metrics.RecordPromptTokens("tiny-gpt2", 12);
  metrics.RecordGeneration("tiny-gpt2", 16, 0.4);
  metrics.SetInFlight(1);
  metrics.SetQueued(2);
  metrics.SetSubscribers(1);
  metrics.AddDroppedFeedEvents(3);
  metrics.RecordAnalysis("tiny-gpt2", 7.5, 1, 0.4, 11.0);
  metrics.RecordNextTokenEntropy("tiny-gpt2", 0.55);
  metrics.SetModelInfo("tiny-gpt2", "gpt2", 2, 2, 64, 1000, 128);
}

TEST(MetricsServerTest, ServesRecordedValuesOverHttp) {
  ServiceMetrics metrics;
  RecordOneOfEach(metrics);
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics);
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  const testing::HttpReply reply = HttpGet(server->port(), "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.head;
  EXPECT_THAT(reply.head, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_TRUE(HasLine(
      reply.body, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="Analyze"} 2)"))
      << reply.body;
  EXPECT_TRUE(HasLine(
      reply.body,
      R"(attnscope_requests_total{code="RESOURCE_EXHAUSTED",model="m",origin="user",rpc="Generate"} 1)"));
  EXPECT_TRUE(
      HasLine(reply.body, R"(attnscope_context_health_bucket{model="tiny-gpt2",le="7"} 0)"));
  EXPECT_TRUE(
      HasLine(reply.body, R"(attnscope_context_health_bucket{model="tiny-gpt2",le="8"} 1)"));
  EXPECT_TRUE(HasLine(reply.body, "attnscope_queued_requests 2"));
}

TEST(MetricsServerTest, PromtoolFindsNoProblemsInTheScrape) {
  ServiceMetrics metrics;
  RecordOneOfEach(metrics);
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics);
  ASSERT_NE(server, nullptr);
  const testing::HttpReply reply = HttpGet(server->port(), "/metrics");
  ASSERT_EQ(reply.status, 200);
  const testing::ProcessResult check = testing::PromtoolCheckMetrics(reply.body);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "");
}

TEST(MetricsServerTest, PromtoolCheckRejectsALintProblem) {
  // The check above can fail: an undocumented counter without _total is flagged.
  const testing::ProcessResult check =
      testing::PromtoolCheckMetrics("# TYPE attnscope_requests counter\nattnscope_requests 1\n");
  EXPECT_NE(check.exit_code, 0);
  EXPECT_THAT(check.output, HasSubstr("_total"));
}

TEST(MetricsServerTest, ScrapesSeeLaterUpdates) {
  ServiceMetrics metrics;
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics);
  ASSERT_NE(server, nullptr);
  metrics.RecordRequest("ListModels", "m", ServiceMetrics::Origin::kUser, "OK", 0.001);
  EXPECT_TRUE(
      HasLine(HttpGet(server->port(), "/metrics").body,
              R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="ListModels"} 1)"));
  metrics.RecordRequest("ListModels", "m", ServiceMetrics::Origin::kUser, "OK", 0.001);
  EXPECT_TRUE(
      HasLine(HttpGet(server->port(), "/metrics").body,
              R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="ListModels"} 2)"));
}

TEST(MetricsServerTest, RefusesOtherPathsMethodsAndHugeHeads) {
  ServiceMetrics metrics;
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(HttpGet(server->port(), "/").status, 404);
  EXPECT_EQ(SendRaw(server->port(), "DELETE /metrics HTTP/1.1\r\n\r\n").status, 405);
  const testing::HttpReply head = SendRaw(server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  const std::string huge = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a') + "\r\n\r\n";
  EXPECT_EQ(SendRaw(server->port(), huge).status, 431);
  EXPECT_EQ(HttpGet(server->port(), "/metrics").status, 200);  // Still serving.
}

TEST(MetricsServerTest, OutlivesItsServiceMetrics) {
  auto metrics = std::make_unique<ServiceMetrics>();
  metrics->SetSubscribers(5);
  std::unique_ptr<MetricsServer> server = StartOrDie(*metrics);
  ASSERT_NE(server, nullptr);
  metrics.reset();
  EXPECT_TRUE(HasLine(HttpGet(server->port(), "/metrics").body, "attnscope_subscribers 5"));
}

TEST(MetricsServerTest, BadOrBusyAddressesAreErrors) {
  ServiceMetrics metrics;
  std::unique_ptr<MetricsServer> first = StartOrDie(metrics);
  ASSERT_NE(first, nullptr);
  const std::string busy = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<MetricsServer>> second = MetricsServer::Start(busy, metrics);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(busy));
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use"));
  EXPECT_EQ(MetricsServer::Start("127.0.0.1", metrics).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start("300.1.1.1:0", metrics).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start("metrics.invalid:0", metrics).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsServerTest, LocalhostMeansLoopback) {
  ServiceMetrics metrics;
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics, "localhost:0");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(HttpGet(server->port(), "/metrics").status, 200);
}

// Connections waiting in the accept queue of the IPv4 loopback socket
// listening on `port` (/proc/net/tcp's rx_queue of a LISTEN socket), or -1.
int AcceptBacklog(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  char local[64];
  unsigned state = 0, tx = 0, rx = 0;
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), " %*d: %63s %*s %x %x:%x", local, &state, &tx, &rx) != 4) {
      continue;
    }
    const std::string address(local);
    const size_t colon = address.find(':');
    if (state == 0x0A && colon != std::string::npos &&
        std::stoi(address.substr(colon + 1), nullptr, 16) == port) {
      return static_cast<int>(rx);
    }
  }
  return -1;
}

// A client that connects and never sends keeps the server inside Serve();
// stopping the server must still end: the thread wakes on its stop pipe (or,
// at worst, the 5 s connection deadline) and the stalled connection is closed
// without a reply. How long the stop took is printed, not checked.
TEST(MetricsServerTest, StopClosesAStalledClientsConnection) {
  ServiceMetrics metrics;
  std::unique_ptr<MetricsServer> server = StartOrDie(metrics);
  ASSERT_NE(server, nullptr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // Wait until the server has accepted it (the accept queue is empty again).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (AcceptBacklog(server->port()) != 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling, bounded
  }
  ASSERT_EQ(AcceptBacklog(server->port()), 0);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  const double stop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "stopped with a stalled client in " << stop_ms << " ms\n";
  // Closed by the server, and nothing was sent: end of stream at once.
  pollfd readable{fd, POLLIN, 0};
  EXPECT_EQ(poll(&readable, 1, 60000), 1) << "the stalled connection is still open";
  char byte = 0;
  EXPECT_EQ(recv(fd, &byte, 1, MSG_DONTWAIT), 0) << "expected end of stream, no reply";
  close(fd);
}

}  // namespace
}  // namespace attnscope::metrics
