// End to end: the real attnscope-server, scraped every second by Debian's
// Prometheus (loading deploy/alerts.yml), both on free loopback ports; the
// requests the CLI sends are read back through Prometheus's query API.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/child_process.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::metrics {
namespace {

using testing::ChildProcess;

constexpr char kBin[] = ATTNSCOPE_BIN_DIR;

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// The part after `prefix` of the first stdout line that starts with it.
std::string ReadAddress(ChildProcess& server, const std::string& prefix) {
  std::string line;
  while (server.ReadLine(&line, 120)) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

class PrometheusEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/attnscope-prometheus-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::string error;
    server_ =
        ChildProcess::Start({std::string(kBin) + "/attnscope-server", "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0", "--threads", "1"},
                            &error);
    ASSERT_NE(server_, nullptr) << error;
    address_ = ReadAddress(*server_, "attnscope-server listening on ");
    metrics_address_ = ReadAddress(*server_, "metrics on ");
    ASSERT_FALSE(metrics_address_.empty()) << server_->Stderr();
    StartPrometheus();
  }

  void TearDown() override {
    if (prometheus_) {
      EXPECT_EQ(prometheus_->Stop(20), 0) << prometheus_->Stderr();
    }
    if (server_) {
      EXPECT_EQ(server_->Stop(20), 0) << server_->Stderr();
    }
    std::filesystem::remove_all(dir_);
  }

  void StartPrometheus() {
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "rule_files:\n  - " << ATTNSCOPE_DEPLOY_DIR << "/alerts.yml\n"
                          << "scrape_configs:\n  - job_name: attnscope\n    static_configs:\n"
                          << "      - targets: [\"" << metrics_address_ << "\"]\n";
    // Prometheus cannot report a port it picked itself, so the test picks
    // one; if another process takes it first, Prometheus fails to bind (or
    // something else answers) and the test tries another port.
    for (int attempt = 0; attempt < 5; ++attempt) {
      prometheus_port_ = testing::FreeLoopbackPort();
      std::string error;
      prometheus_ = ChildProcess::Start(
          {ATTNSCOPE_PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/data",
           "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_)},
          &error);
      ASSERT_NE(prometheus_, nullptr) << error;
      if (WaitUntilReady()) return;
      const std::string why = prometheus_->Stderr();
      prometheus_->Stop(20);
      prometheus_.reset();
      ASSERT_NE(why.find("address already in use"), std::string::npos)
          << "Prometheus did not become ready: " << why;
    }
    FAIL() << "no free port for Prometheus after 5 attempts";
  }

  // Polls /-/ready (bounded, 30 s) until this Prometheus answers it; false
  // if it exits (stderr says why) or something else holds the port.
  bool WaitUntilReady() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const testing::HttpReply ready =
          testing::SendRaw(prometheus_port_, "GET /-/ready HTTP/1.0\r\n\r\n");
      if (ready.status == 200) return ready.body.find("Prometheus") != std::string::npos;
      if (prometheus_->Stderr().find("address already in use") != std::string::npos) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling, bounded
    }
    return false;
  }

  // GET an API path of Prometheus; the parsed "data" of a success, or null.
  nlohmann::json Api(const std::string& path_and_query) {
    const testing::HttpReply reply =
        testing::SendRaw(prometheus_port_, "GET " + path_and_query + " HTTP/1.0\r\n\r\n");
    const nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || body.is_discarded() || body.value("status", "") != "success") {
      return nullptr;
    }
    return body.at("data");
  }

  // Instant query; each series' value keyed by the value of `label`.
  std::map<std::string, std::string> Query(const std::string& promql, const std::string& label) {
    std::map<std::string, std::string> values;
    const nlohmann::json data = Api("/api/v1/query?query=" + UrlEncode(promql));
    if (data.is_null()) return values;
    for (const nlohmann::json& series : data.at("result")) {
      values[series.at("metric").value(label, "")] = series.at("value").at(1);
    }
    return values;
  }

  // Polls `promql` (up to 30 s, Prometheus scrapes every second) until it
  // gives `expected`.
  std::map<std::string, std::string> QueryUntil(
      const std::string& promql, const std::string& label,
      const std::map<std::string, std::string>& expected) {
    std::map<std::string, std::string> values;
    for (int i = 0; i < 120; ++i) {
      values = Query(promql, label);
      if (values == expected) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return values;
  }

  int Cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {std::string(kBin) + "/attnscope", "--server", address_};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, "").exit_code;
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::string address_;
  std::string metrics_address_;
  int prometheus_port_ = 0;
};

TEST_F(PrometheusEndToEndTest, RequestsReachPrometheusThroughTheScrape) {
  ASSERT_EQ(Cli({"analyze", "--text", "The cat sat on the keyboard again."}), 0);
  ASSERT_EQ(Cli({"analyze", "--text", "Hello world"}), 0);
  ASSERT_EQ(Cli({"analyze", "--model", "no-such-model", "--text", "hi"}), 1);
  ASSERT_EQ(Cli({"models"}), 0);

  // Each expectation is polled: a scrape may land between two CLI calls.
  const std::vector<std::tuple<std::string, std::string, std::map<std::string, std::string>>>
      expectations = {
          {R"(up{job="attnscope"})", "instance", {{metrics_address_, "1"}}},
          {R"(attnscope_requests_total{job="attnscope",rpc="Analyze"})",
           "code",
           {{"NOT_FOUND", "1"}, {"OK", "2"}}},
          {R"(attnscope_requests_total{rpc="ListModels"})", "code", {{"OK", "1"}}},
          // The unknown model's request has model="" (no unbounded labels).
          {R"(attnscope_requests_total{rpc="Analyze",origin="user"})",
           "model",
           {{"", "1"}, {"tiny-gpt2", "2"}}},
          {"attnscope_queue_wait_seconds_count", "model", {{"tiny-gpt2", "2"}}},
          {"attnscope_build_info", "version", {{"0.1.0", "1"}}},
          {R"(count by (job) (process_resident_memory_bytes{job="attnscope"} > 1e6))",
           "job",
           {{"attnscope", "1"}}},
          {"attnscope_context_health_count", "model", {{"tiny-gpt2", "2"}}},
          {R"(attnscope_model_info{architecture="gpt2"})", "model", {{"tiny-gpt2", "1"}}},
          // 8 + 2 prompt positions, each with one next-token entropy.
          {"attnscope_next_token_entropy_count", "model", {{"tiny-gpt2", "10"}}},
      };
  for (const auto& [promql, label, expected] : expectations) {
    EXPECT_EQ(QueryUntil(promql, label, expected), expected) << promql;
  }
}

TEST_F(PrometheusEndToEndTest, PrometheusLoadsAndEvaluatesTheAlertRules) {
  ASSERT_EQ(Cli({"analyze", "--text", "The cat sat on the keyboard again."}), 0);
  QueryUntil("attnscope_context_health_count", "model", {{"tiny-gpt2", "1"}});
  std::map<std::string, std::string> health;
  for (int i = 0; i < 40; ++i) {  // Rules run every second: wait for one evaluation.
    health.clear();
    const nlohmann::json data = Api("/api/v1/rules");
    if (!data.is_null()) {
      for (const nlohmann::json& group : data.at("groups")) {
        for (const nlohmann::json& rule : group.at("rules")) {
          health[rule.at("name")] = rule.at("health");
        }
      }
    }
    if (health.size() == 6 && health.count("AttnscopeDown") && health["AttnscopeDown"] == "ok") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(health, (std::map<std::string, std::string>{{"AttnscopeContextHealthLow", "ok"},
                                                        {"AttnscopeDown", "ok"},
                                                        {"AttnscopeErrorRatioHigh", "ok"},
                                                        {"AttnscopeFeedDropping", "ok"},
                                                        {"AttnscopeNotScraped", "ok"},
                                                        {"AttnscopeQueueWaitHigh", "ok"}}));
}

}  // namespace
}  // namespace attnscope::metrics
