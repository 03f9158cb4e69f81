// Debian's Prometheus as a child process of a test, on a free loopback port,
// with a generated configuration, and its query API.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/deploy/child_process.h"

namespace attnscope::deploy::testing {

class PrometheusProcess {
 public:
  // Starts Prometheus scraping `targets` (HOST:PORT) as job "attnscope"
  // every second, with its data under `dir`, and waits (60 s at most) until
  // it is ready. nullptr, with the reason added to `failure`, if it is not.
  static std::unique_ptr<PrometheusProcess> Start(const std::vector<std::string>& targets,
                                                  const std::string& dir, std::string* failure);
  // Stops Prometheus (it must exit with 0).
  ~PrometheusProcess();

  // Instant query: each series' value keyed by the value of `label`; empty on
  // any error.
  std::map<std::string, std::string> Query(const std::string& promql, const std::string& label);
  // Polls Query (every 250 ms, 60 s at most) until it gives `expected`; the
  // last answer.
  std::map<std::string, std::string> QueryUntil(const std::string& promql, const std::string& label,
                                                const std::map<std::string, std::string>& expected);
  std::string Stderr() const { return process_->Stderr(); }

 private:
  PrometheusProcess() = default;
  std::unique_ptr<metrics::testing::ChildProcess> process_;
  int port_ = 0;
};

}  // namespace attnscope::deploy::testing
