// deploy/: Prometheus config, alert rules (with their promtool unit tests) and
// the Grafana dashboard, checked with promtool and against ServiceMetrics.
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/metrics/service_metrics.h"
#include "tests/deploy/registered_metrics.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::metrics {
namespace {

using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::RegisteredSeries;
using testing::RunProcess;

std::string DeployFile(const std::string& name) {
  return std::string(ATTNSCOPE_DEPLOY_DIR) + "/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

ProcessResult Promtool(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ATTNSCOPE_PROMTOOL};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, "");
}

// Every identifier in `text` that names one of the service's series: those
// starting with "attnscope_" and the conventional "process_" ones.
std::vector<std::string> AttnscopeNames(const std::string& text) {
  const auto is_name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  std::vector<std::string> names;
  for (const char* prefix : {"attnscope_", "process_"}) {
    for (std::size_t at = text.find(prefix); at != std::string::npos;
         at = text.find(prefix, at + 1)) {
      if (at > 0 && is_name_char(text[at - 1])) continue;
      std::size_t end = at;
      while (end < text.size() && is_name_char(text[end])) ++end;
      names.push_back(text.substr(at, end - at));
    }
  }
  return names;
}

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// `text` with every run of whitespace turned into one space.
std::string Squeeze(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c));
    if (!space) {
      out += c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  return out;
}

nlohmann::json Dashboard() {
  return nlohmann::json::parse(Slurp(DeployFile("grafana-dashboard.json")));
}

// Each query of the dashboard (panel targets and variables), keyed by where
// it is, e.g. "Sink rate/B".
std::map<std::string, std::string> DashboardQueries(const nlohmann::json& dashboard) {
  std::map<std::string, std::string> queries;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    if (!panel.contains("targets")) continue;
    for (const nlohmann::json& target : panel.at("targets")) {
      queries[panel.at("title").get<std::string>() + "/" + target.at("refId").get<std::string>()] =
          target.at("expr").get<std::string>();
    }
  }
  for (const nlohmann::json& variable : dashboard.at("templating").at("list")) {
    // The DS_PROMETHEUS data-source variable has no query: it lets a
    // provisioned copy of the dashboard (compose, the Kubernetes sidecar)
    // resolve ${DS_PROMETHEUS}, which only the import dialog fills in.
    if (variable.at("type") == "datasource") continue;
    queries["$" + variable.at("name").get<std::string>()] = variable.at("definition");
  }
  return queries;
}

TEST(DeployTest, PrometheusConfigIsValidAndScrapesTheService) {
  const ProcessResult check = Promtool({"check", "config", DeployFile("prometheus.yml")});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("SUCCESS: 1 rule files found"));
  const std::string config = Slurp(DeployFile("prometheus.yml"));
  EXPECT_THAT(config, HasSubstr("job_name: attnscope"));
  EXPECT_THAT(config, HasSubstr("\"127.0.0.1:9464\""));
}

TEST(DeployTest, AlertRulesAreValid) {
  const ProcessResult check = Promtool({"check", "rules", DeployFile("alerts.yml")});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, HasSubstr("SUCCESS: 6 rules found"));
}

TEST(DeployTest, EveryAlertFiresInItsUnitTest) {
  const ProcessResult test = Promtool({"test", "rules", DeployFile("alerts_test.yml")});
  EXPECT_EQ(test.exit_code, 0) << test.output;
  EXPECT_THAT(test.output, HasSubstr("SUCCESS"));
  const std::string tests = Squeeze(Slurp(DeployFile("alerts_test.yml")));
  for (const char* alert :
       {"AttnscopeDown", "AttnscopeNotScraped", "AttnscopeErrorRatioHigh",
        "AttnscopeContextHealthLow", "AttnscopeFeedDropping", "AttnscopeQueueWaitHigh"}) {
    EXPECT_THAT(Slurp(DeployFile("alerts.yml")), HasSubstr(std::string("alert: ") + alert));
    // A firing expectation (exp_labels) follows the alert's name somewhere.
    const std::string fires = std::string("alertname: ") + alert + " exp_alerts: - exp_labels:";
    EXPECT_NE(tests.find(fires), std::string::npos) << alert << " is never shown firing";
  }
}

TEST(DeployTest, AnAlertFiresWhenNothingIsScraped) {
  // up == 0 needs an up series: a Prometheus that scrapes no attnscope target
  // (a monitor its selector skips) has none, so only absent() notices.
  const std::string alerts = Slurp(DeployFile("alerts.yml"));
  EXPECT_THAT(alerts, HasSubstr(R"(expr: absent(up{job="attnscope"}))"));
  // Its unit test shows it firing with no attnscope series at all.
  EXPECT_THAT(Squeeze(Slurp(DeployFile("alerts_test.yml"))),
              HasSubstr("alertname: AttnscopeNotScraped exp_alerts: - exp_labels: "
                        "severity: critical job: attnscope"));
}

TEST(DeployTest, CancellationsAreNotErrors) {
  // The error-ratio alert and panel leave CANCELLED out of both sides.
  const std::string alerts = Slurp(DeployFile("alerts.yml"));
  EXPECT_THAT(alerts, HasSubstr(R"(code!~"OK|CANCELLED")"));
  EXPECT_THAT(alerts, HasSubstr(R"(code!="CANCELLED")"));
  const std::map<std::string, std::string> queries = DashboardQueries(Dashboard());
  const std::string& panel = queries.at("Error ratio by model/A");
  EXPECT_THAT(panel, HasSubstr(R"(code!~"OK|CANCELLED")"));
  EXPECT_THAT(panel, HasSubstr(R"(code!="CANCELLED")"));
}

TEST(DeployTest, RequestPanelsSplitByModelAndOrigin) {
  const std::map<std::string, std::string> queries = DashboardQueries(Dashboard());
  for (const char* where :
       {"Request rate by model, rpc and code/A", "Request latency quantiles by model/A"}) {
    EXPECT_THAT(queries.at(where), HasSubstr("model"));
    EXPECT_THAT(queries.at(where), HasSubstr(R"(origin="user")"));
  }
  EXPECT_THAT(queries.at("Request rate by model, rpc and code/B"),
              HasSubstr(R"(origin="dashboard")"));
  // `attnscope batch` traffic (origin="batch") in a panel of its own.
  for (const char* where : {"Dataset runs (attnscope batch)/A", "Dataset runs (attnscope batch)/B"}) {
    EXPECT_THAT(queries.at(where), HasSubstr(R"(origin="batch")"));
    EXPECT_THAT(queries.at(where), HasSubstr(R"(rpc="Analyze")"));
  }
}

TEST(DeployTest, AlertsNameOnlyRegisteredMetrics) {
  const std::map<std::string, std::string> registered = RegisteredSeries();
  const std::vector<std::string> used = AttnscopeNames(Slurp(DeployFile("alerts.yml")));
  EXPECT_GE(used.size(), 4u);
  for (const std::string& name : used) EXPECT_EQ(registered.count(name), 1u) << name;
}

TEST(DeployTest, DashboardResolvesItsDataSourceWhenProvisioned) {
  // Provisioned dashboards skip the import dialog that fills ${DS_PROMETHEUS}:
  // a data-source variable of that name resolves it instead.
  bool found = false;
  const nlohmann::json dashboard = Dashboard();
  for (const nlohmann::json& variable : dashboard.at("templating").at("list")) {
    if (variable.at("name") != "DS_PROMETHEUS") continue;
    found = true;
    EXPECT_EQ(variable.at("type"), "datasource");
    EXPECT_EQ(variable.at("query"), "prometheus");
  }
  EXPECT_TRUE(found);
}

TEST(DeployTest, DashboardSplitsByReplica) {
  // Every query filters on the instance variable, and one panel sums by it.
  bool split = false;
  for (const auto& [where, expr] : DashboardQueries(Dashboard())) {
    if (where.front() == '$') continue;
    EXPECT_THAT(expr, HasSubstr("instance=~\"$instance\"")) << where;
    split = split || expr.find("sum by (instance)") != std::string::npos;
  }
  EXPECT_TRUE(split);
}

TEST(DeployTest, DashboardAggregatesAndSplitsByInstance) {
  // For what an operator of several replicas compares (latency, errors,
  // queueing, load, dropped feed events), one panel shows each replica and
  // the total over all replicas side by side.
  const nlohmann::json dashboard = Dashboard();
  for (const char* metric :
       {"attnscope_request_duration_seconds_bucket", "attnscope_requests_total",
        "attnscope_queue_wait_seconds_bucket", "attnscope_in_flight_requests",
        "attnscope_queued_requests", "attnscope_feed_events_dropped_total"}) {
    bool paired = false;
    for (const nlohmann::json& panel : dashboard.at("panels")) {
      if (!panel.contains("targets")) continue;
      bool split = false, total = false;
      for (const nlohmann::json& target : panel["targets"]) {
        const std::string expr = target.at("expr");
        if (expr.find(metric) == std::string::npos) continue;
        const std::string legend = target.at("legendFormat");
        const bool per_instance = legend.find("{{instance}}") != std::string::npos;
        split = split || (per_instance && (expr.find("by (instance") != std::string::npos ||
                                           expr.rfind(metric, 0) == 0 ||
                                           expr.rfind("rate(" + std::string(metric), 0) == 0));
        total = total || (!per_instance && expr.find("instance,") == std::string::npos &&
                          expr.find("by (instance)") == std::string::npos &&
                          legend.find("all replicas") != std::string::npos);
      }
      paired = paired || (split && total);
    }
    EXPECT_TRUE(paired) << metric << ": no panel with a query per instance and one over all";
  }
}

TEST(DeployTest, DashboardIsImportable) {
  const nlohmann::json dashboard = Dashboard();
  ASSERT_EQ(dashboard.at("__inputs").size(), 1u);
  EXPECT_EQ(dashboard["__inputs"][0].at("name"), "DS_PROMETHEUS");
  EXPECT_EQ(dashboard["__inputs"][0].at("pluginId"), "prometheus");
  std::set<int> ids;
  std::set<std::string> types;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate id " << panel["id"];
    types.insert(panel.at("type").get<std::string>());
    if (panel.at("type") == "row") continue;
    EXPECT_EQ(panel.at("datasource").at("uid"), "${DS_PROMETHEUS}") << panel["title"];
    ASSERT_FALSE(panel.at("targets").empty()) << panel["title"];
    for (const nlohmann::json& target : panel["targets"]) {
      EXPECT_EQ(target.at("datasource").at("uid"), "${DS_PROMETHEUS}") << panel["title"];
    }
  }
  EXPECT_EQ(types, (std::set<std::string>{"row", "timeseries", "heatmap", "table"}));
}

TEST(DeployTest, DashboardQueriesNameOnlyRegisteredMetrics) {
  const std::map<std::string, std::string> registered = RegisteredSeries();
  std::set<std::string> families_used;
  for (const auto& [where, expr] : DashboardQueries(Dashboard())) {
    const std::vector<std::string> used = AttnscopeNames(expr);
    EXPECT_FALSE(used.empty()) << where << ": " << expr;
    for (const std::string& name : used) {
      EXPECT_EQ(registered.count(name), 1u) << where << " uses unregistered " << name;
      if (registered.count(name)) families_used.insert(registered.at(name));
    }
  }
  // And every family is on the dashboard somewhere.
  ServiceMetrics metrics;
  for (const ServiceMetrics::FamilyInfo& family : metrics.families()) {
    EXPECT_EQ(families_used.count(family.name), 1u) << family.name << " has no panel";
  }
}

TEST(DeployTest, DashboardQueriesAreValidPromQL) {
  // promtool parses PromQL in rule files: wrap each panel query, with
  // Grafana's variables replaced, in a recording rule.
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  int n = 0;
  for (const auto& [where, expr] : DashboardQueries(Dashboard())) {
    if (where.front() == '$') continue;  // label_values() is Grafana's, not PromQL.
    std::string promql = ReplaceAll(ReplaceAll(expr, "$__rate_interval", "5m"), "$__range", "6h");
    promql = ReplaceAll(ReplaceAll(promql, "$model", ".*"), "$instance", ".*");
    rules += "      - record: dashboard:query" + std::to_string(n++) +
             "\n        expr: " + nlohmann::json(promql).dump() + "\n";
  }
  char path[] = "/tmp/attnscope-dashboard-rules-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::ofstream(path) << rules;
  close(fd);
  const ProcessResult check = Promtool({"check", "rules", path});
  unlink(path);
  EXPECT_EQ(check.exit_code, 0) << check.output << rules;
  EXPECT_THAT(check.output, HasSubstr("SUCCESS: " + std::to_string(n) + " rules found"));
}

}  // namespace
}  // namespace attnscope::metrics
