// deploy/compose checked offline: three replicas of the image, Prometheus
// scraping exactly those three (its configuration passes promtool), Grafana
// provisioned with the Prometheus data source and deploy/grafana-dashboard.json.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/manifest_support.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::deploy {
namespace {

namespace fs = std::filesystem;
using testing::FlagValue;
using testing::LoadDocuments;
using testing::ParseFlags;
using testing::PortOf;
using testing::Strings;

const fs::path kDir = fs::path(ATTNSCOPE_DEPLOY_DIR) / "compose";

YAML::Node Compose() { return LoadDocuments(kDir / "compose.yaml")[0]; }

// The attnscope replicas: service name -> service (merge keys resolved by
// hand: yaml-cpp does not apply "<<").
std::map<std::string, YAML::Node> Replicas() {
  const YAML::Node compose = Compose();
  std::map<std::string, YAML::Node> replicas;
  for (const auto& entry : compose["services"]) {
    const std::string name = entry.first.as<std::string>();
    if (name.rfind("attnscope-", 0) != 0) continue;
    YAML::Node merged = YAML::Clone(entry.second["<<"]);
    for (const auto& field : entry.second) {
      if (field.first.as<std::string>() != "<<") merged[field.first] = field.second;
    }
    replicas[name] = merged;
  }
  return replicas;
}

// The host side of "HOST_IP:HOST_PORT:CONTAINER_PORT".
std::string HostSide(const std::string& mapping) { return mapping.substr(0, mapping.rfind(':')); }

TEST(ComposeTest, ThreeReplicasOfTheImageWithTheServersFlags) {
  const std::map<std::string, YAML::Node> replicas = Replicas();
  ASSERT_EQ(replicas.size(), 3u);
  const std::set<std::string> known = testing::ServerFlagNames();
  std::set<std::string> host_ports;
  for (const auto& [name, service] : replicas) {
    EXPECT_EQ(service["image"].as<std::string>(), "localhost/attnscope:latest") << name;
    const auto flags = ParseFlags(Strings(service["command"]));
    for (const auto& [flag, value] : flags)
      EXPECT_EQ(known.count(flag), 1u) << name << ": --" << flag;
    const int grpc_port = PortOf(FlagValue(flags, "listen"));
    ASSERT_EQ(service["ports"].size(), 1u) << name;
    const std::string mapping = service["ports"][0].as<std::string>();
    EXPECT_EQ(PortOf(mapping), grpc_port) << name;
    EXPECT_EQ(mapping.rfind("127.0.0.1:", 0), 0u) << name << " must publish on loopback only";
    host_ports.insert(HostSide(mapping));
    for (const std::string& volume : Strings(service["volumes"])) {
      EXPECT_THAT(volume, ::testing::EndsWith(":/models:ro")) << name;
      EXPECT_TRUE(fs::is_directory(kDir / volume.substr(0, volume.find(':')))) << volume;
    }
  }
  EXPECT_EQ(host_ports.size(), 3u) << "each replica needs its own host port";
}

TEST(ComposeTest, PrometheusScrapesExactlyTheThreeReplicas) {
  const std::map<std::string, YAML::Node> replicas = Replicas();
  std::set<std::string> expected;
  for (const auto& [name, service] : replicas) {
    expected.insert(name + ":" +
                    std::to_string(PortOf(
                        FlagValue(ParseFlags(Strings(service["command"])), "metrics-listen"))));
  }
  const YAML::Node config = LoadDocuments(kDir / "prometheus.yml")[0];
  ASSERT_EQ(config["scrape_configs"].size(), 1u);
  const YAML::Node job = config["scrape_configs"][0];
  EXPECT_EQ(job["job_name"].as<std::string>(), "attnscope");  // deploy/alerts.yml selects on it
  std::set<std::string> targets;
  for (const YAML::Node& group : job["static_configs"]) {
    for (const std::string& target : Strings(group["targets"])) targets.insert(target);
  }
  EXPECT_EQ(targets, expected);

  // The mounts put prometheus.yml and alerts.yml side by side, as here.
  const YAML::Node prometheus = Compose()["services"]["prometheus"];
  std::map<std::string, std::string> mounts;  // container path -> host path
  for (const std::string& volume : Strings(prometheus["volumes"])) {
    const std::size_t a = volume.find(':'), b = volume.find(':', a + 1);
    mounts[volume.substr(a + 1, b - a - 1)] = volume.substr(0, a);
  }
  EXPECT_EQ(mounts.at("/etc/prometheus/prometheus.yml"), "./prometheus.yml");
  EXPECT_EQ(mounts.at("/etc/prometheus/alerts.yml"), "../alerts.yml");
  EXPECT_THAT(Strings(prometheus["command"]),
              ::testing::Contains("--config.file=/etc/prometheus/prometheus.yml"));

  char dir[] = "/tmp/attnscope-compose-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  fs::copy_file(kDir / "prometheus.yml", fs::path(dir) / "prometheus.yml");
  fs::copy_file(fs::path(ATTNSCOPE_DEPLOY_DIR) / "alerts.yml", fs::path(dir) / "alerts.yml");
  const metrics::testing::ProcessResult check = metrics::testing::RunProcess(
      {ATTNSCOPE_PROMTOOL, "check", "config", std::string(dir) + "/prometheus.yml"}, "");
  fs::remove_all(dir);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_THAT(check.output, ::testing::HasSubstr("SUCCESS: 1 rule files found"));
}

TEST(ComposeTest, GrafanaIsProvisionedWithPrometheusAndTheDashboard) {
  const YAML::Node grafana = Compose()["services"]["grafana"];
  std::map<std::string, std::string> mounts;  // container path -> host path
  for (const std::string& volume : Strings(grafana["volumes"])) {
    const std::size_t a = volume.find(':'), b = volume.find(':', a + 1);
    mounts[volume.substr(a + 1, b - a - 1)] = volume.substr(0, a);
  }
  EXPECT_EQ(mounts.at("/etc/grafana/provisioning"), "./grafana/provisioning");
  const YAML::Node sources =
      LoadDocuments(kDir / "grafana/provisioning/datasources/prometheus.yml")[0]["datasources"];
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_EQ(sources[0]["type"].as<std::string>(), "prometheus");
  EXPECT_EQ(sources[0]["url"].as<std::string>(), "http://prometheus:9090");  // its service and port
  EXPECT_TRUE(Compose()["services"]["prometheus"].IsMap());
  EXPECT_THAT(Strings(Compose()["services"]["prometheus"]["ports"]),
              ::testing::ElementsAre("127.0.0.1:9090:9090"));

  const YAML::Node providers =
      LoadDocuments(kDir / "grafana/provisioning/dashboards/attnscope.yml")[0]["providers"];
  ASSERT_EQ(providers.size(), 1u);
  const std::string path = providers[0]["options"]["path"].as<std::string>();
  std::string dashboard_host_path;
  for (const auto& [container, host] : mounts) {
    if (container.rfind(path + "/", 0) == 0) dashboard_host_path = host;
  }
  ASSERT_FALSE(dashboard_host_path.empty()) << "nothing is mounted under " << path;
  EXPECT_TRUE(fs::equivalent(kDir / dashboard_host_path,
                             fs::path(ATTNSCOPE_DEPLOY_DIR) / "grafana-dashboard.json"));
}

}  // namespace
}  // namespace attnscope::deploy
