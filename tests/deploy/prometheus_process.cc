#include "tests/deploy/prometheus_process.h"

#include <cctype>
#include <chrono>
#include <fstream>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::deploy::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<PrometheusProcess> PrometheusProcess::Start(const std::vector<std::string>& targets,
                                                            const std::string& dir,
                                                            std::string* failure) {
  const std::string config = dir + "/prometheus.yml";
  std::ofstream out(config);
  out << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: attnscope\n    static_configs:\n      - targets: [";
  for (std::size_t i = 0; i < targets.size(); ++i)
    out << (i ? ", " : "") << '"' << targets[i] << '"';
  out << "]\n";
  out.close();
  std::unique_ptr<PrometheusProcess> prometheus(new PrometheusProcess());
  prometheus->port_ = metrics::testing::FreeLoopbackPort();
  prometheus->process_ = metrics::testing::ChildProcess::Start(
      {ATTNSCOPE_PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + dir + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus->port_)},
      failure);
  if (!prometheus->process_) return nullptr;
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
    if (metrics::testing::SendRaw(prometheus->port_, "GET /-/ready HTTP/1.0\r\n\r\n").status ==
        200) {
      return prometheus;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *failure += "Prometheus is not ready after 60 s: " + prometheus->Stderr();
  return nullptr;
}

PrometheusProcess::~PrometheusProcess() {
  if (process_) {
    EXPECT_EQ(process_->Stop(20), 0) << process_->Stderr();
  }
}

std::map<std::string, std::string> PrometheusProcess::Query(const std::string& promql,
                                                            const std::string& label) {
  std::map<std::string, std::string> values;
  const metrics::testing::HttpReply reply = metrics::testing::SendRaw(
      port_, "GET /api/v1/query?query=" + UrlEncode(promql) + " HTTP/1.0\r\n\r\n");
  const nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
  if (reply.status != 200 || body.is_discarded() || body.value("status", "") != "success") {
    return values;
  }
  for (const nlohmann::json& series : body.at("data").at("result")) {
    values[series.at("metric").value(label, "")] = series.at("value").at(1);
  }
  return values;
}

std::map<std::string, std::string> PrometheusProcess::QueryUntil(
    const std::string& promql, const std::string& label,
    const std::map<std::string, std::string>& expected) {
  std::map<std::string, std::string> values;
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
    values = Query(promql, label);
    if (values == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return values;
}

}  // namespace attnscope::deploy::testing
