// deploy/kubernetes checked offline: every YAML document parses, the
// kustomizations list what exists, and names, labels, selectors, ports,
// probes and flags agree with each other, with attnscope-server's --help and
// with the metrics the server registers.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/manifest_support.h"
#include "tests/deploy/registered_metrics.h"

namespace attnscope::deploy {
namespace {

namespace fs = std::filesystem;
using testing::FlagValue;
using testing::LoadDocuments;
using testing::ParseFlags;
using testing::PortOf;
using testing::StringMap;
using testing::Strings;

const fs::path kDir = fs::path(ATTNSCOPE_DEPLOY_DIR) / "kubernetes";
const fs::path kBase = kDir / "base";

// The base's resources, keyed by kind (one of each kind except Service).
class BaseManifests {
 public:
  BaseManifests() {
    for (const std::string& file :
         Strings(LoadDocuments(kBase / "kustomization.yaml")[0]["resources"])) {
      for (const YAML::Node& doc : LoadDocuments(kBase / file)) {
        by_name_[doc["kind"].as<std::string>() + "/" + doc["metadata"]["name"].as<std::string>()] =
            doc;
      }
    }
  }
  // The document of `kind`/`name`; a null node if there is none.
  YAML::Node Get(const std::string& kind, const std::string& name) const {
    const auto it = by_name_.find(kind + "/" + name);
    return it == by_name_.end() ? YAML::Node() : it->second;
  }
  const std::map<std::string, YAML::Node>& all() const { return by_name_; }
  YAML::Node Deployment() const { return Get("Deployment", "attnscope"); }
  YAML::Node Container() const { return Deployment()["spec"]["template"]["spec"]["containers"][0]; }
  // Container port number by name.
  std::map<std::string, int> ContainerPorts() const {
    std::map<std::string, int> ports;
    for (const YAML::Node& port : Container()["ports"]) {
      ports[port["name"].as<std::string>()] = port["containerPort"].as<int>();
    }
    return ports;
  }
  std::multimap<std::string, std::string> Flags() const {
    return ParseFlags(Strings(Container()["args"]));
  }

 private:
  std::map<std::string, YAML::Node> by_name_;
};

TEST(KubernetesTest, EveryDocumentParsesAndIsAKubernetesObject) {
  int documents = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(kDir)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : LoadDocuments(entry.path())) {
      ++documents;
      ASSERT_TRUE(doc.IsMap()) << entry.path();
      // Helm values for the Prometheus Adapter are not a Kubernetes object.
      if (entry.path().filename() == "prometheus-adapter-values.yaml") continue;
      ASSERT_TRUE(doc["kind"] && doc["kind"].IsScalar()) << entry.path();
      if (doc["kind"].as<std::string>() != "Kustomization") {
        EXPECT_TRUE(doc["apiVersion"].IsScalar()) << entry.path();
        EXPECT_TRUE(doc["metadata"]["name"].IsScalar()) << entry.path();
      }
    }
  }
  EXPECT_GE(documents, 12);
}

TEST(KubernetesTest, KustomizationsListExactlyTheFilesThere) {
  for (const fs::path& dir : {kBase, kDir / "overlays/models-volume", kDir / "overlays/gpu"}) {
    const YAML::Node k = LoadDocuments(dir / "kustomization.yaml")[0];
    EXPECT_EQ(k["kind"].as<std::string>(), "Kustomization") << dir;
    std::set<std::string> listed;
    for (const std::string& resource : Strings(k["resources"])) {
      listed.insert(resource);
      const fs::path path = dir / resource;
      EXPECT_TRUE(fs::is_regular_file(path) || fs::is_regular_file(path / "kustomization.yaml"))
          << dir << " lists missing " << resource;
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename();
      if (entry.path().extension() == ".yaml" && name != "kustomization.yaml") {
        EXPECT_EQ(listed.count(name), 1u) << dir << ": " << name << " is not in kustomization.yaml";
      }
    }
  }
}

TEST(KubernetesTest, EverySelectorSelectsTheDeploymentsPods) {
  const BaseManifests base;
  const YAML::Node spec = base.Deployment()["spec"];
  const std::map<std::string, std::string> selector = StringMap(spec["selector"]["matchLabels"]);
  const std::map<std::string, std::string> pod_labels =
      StringMap(spec["template"]["metadata"]["labels"]);
  ASSERT_FALSE(selector.empty());
  for (const auto& [key, value] : selector) EXPECT_EQ(pod_labels.at(key), value) << key;
  const std::map<std::string, YAML::Node> selectors = {
      {"Service/attnscope", base.Get("Service", "attnscope")["spec"]["selector"]},
      {"Service/attnscope-headless", base.Get("Service", "attnscope-headless")["spec"]["selector"]},
      {"PodDisruptionBudget",
       base.Get("PodDisruptionBudget", "attnscope")["spec"]["selector"]["matchLabels"]},
      {"PodMonitor", base.Get("PodMonitor", "attnscope")["spec"]["selector"]["matchLabels"]},
      {"NetworkPolicy",
       base.Get("NetworkPolicy", "attnscope")["spec"]["podSelector"]["matchLabels"]},
  };
  for (const auto& [what, node] : selectors) {
    ASSERT_TRUE(node.IsMap()) << what;
    EXPECT_EQ(StringMap(node), selector) << what;
  }
}

TEST(KubernetesTest, ServerArgumentsAreFlagsOfTheServer) {
  const std::set<std::string> known = testing::ServerFlagNames();
  ASSERT_TRUE(known.count("listen") && known.count("metrics-listen")) << "attnscope-server --help";
  const BaseManifests base;
  for (const auto& [name, value] : base.Flags()) {
    EXPECT_EQ(known.count(name), 1u) << "--" << name << " is not a flag of attnscope-server";
  }
  for (const char* overlay : {"overlays/models-volume", "overlays/gpu"}) {
    const std::string text = testing::Slurp(kDir / overlay / "kustomization.yaml");
    for (std::size_t at = text.find("value: --"); at != std::string::npos;
         at = text.find("value: --", at + 1)) {
      const std::size_t start = at + 9;
      const std::string name = text.substr(start, text.find_first_of("= \n", start) - start);
      EXPECT_EQ(known.count(name), 1u) << overlay << ": --" << name;
    }
  }
}

TEST(KubernetesTest, PortsAndProbesAgreeWithTheServersAddresses) {
  const BaseManifests base;
  const std::multimap<std::string, std::string> flags = base.Flags();
  const std::map<std::string, int> ports = base.ContainerPorts();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports.at("grpc"), PortOf(FlagValue(flags, "listen")));
  EXPECT_EQ(ports.at("metrics"), PortOf(FlagValue(flags, "metrics-listen")));
  EXPECT_EQ(FlagValue(flags, "listen").rfind("0.0.0.0:", 0), 0u)
      << "pods must listen beyond loopback";
  for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"}) {
    EXPECT_EQ(base.Container()[probe]["grpc"]["port"].as<int>(), ports.at("grpc")) << probe;
  }
  // The server registers its health status for "" and for this service.
  EXPECT_EQ(base.Container()["readinessProbe"]["grpc"]["service"].as<std::string>(),
            "attnscope.v1.Analyzer");
  for (const char* name : {"attnscope", "attnscope-headless"}) {
    for (const YAML::Node& port : base.Get("Service", name)["spec"]["ports"]) {
      const std::string target = port["targetPort"].as<std::string>();
      ASSERT_EQ(ports.count(target), 1u) << name << " targets unknown port " << target;
      EXPECT_EQ(port["port"].as<int>(), ports.at(target)) << name;
    }
  }
  EXPECT_EQ(base.Get("Service", "attnscope-headless")["spec"]["clusterIP"].as<std::string>(),
            "None");
  for (const YAML::Node& endpoint :
       base.Get("PodMonitor", "attnscope")["spec"]["podMetricsEndpoints"]) {
    EXPECT_EQ(ports.count(endpoint["port"].as<std::string>()), 1u);
    EXPECT_EQ(endpoint["path"].as<std::string>(), "/metrics");
  }
  for (const YAML::Node& rule : base.Get("NetworkPolicy", "attnscope")["spec"]["ingress"]) {
    for (const YAML::Node& port : rule["ports"]) {
      EXPECT_EQ(ports.count(port["port"].as<std::string>()), 1u) << port["port"];
    }
  }
}

TEST(KubernetesTest, ShutdownAndSizingFollowTheServersSettings) {
  const BaseManifests base;
  const YAML::Node pod = base.Deployment()["spec"]["template"]["spec"];
  const std::multimap<std::string, std::string> flags = base.Flags();
  // SIGTERM drains for --drain-seconds; the kubelet must wait longer.
  EXPECT_GT(pod["terminationGracePeriodSeconds"].as<double>(),
            std::stod(FlagValue(flags, "drain-seconds")));
  // One analysis per pod at a time, with as many threads as requested CPUs.
  EXPECT_EQ(FlagValue(flags, "max-concurrent"), "1");
  EXPECT_EQ(FlagValue(flags, "threads"),
            base.Container()["resources"]["requests"]["cpu"].as<std::string>());
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 10001);  // the image's user
  // Rolling updates and the disruption budget keep replicas serving.
  const int replicas = base.Deployment()["spec"]["replicas"].as<int>();
  EXPECT_EQ(base.Deployment()["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"].as<int>(), 0);
  EXPECT_LT(base.Get("PodDisruptionBudget", "attnscope")["spec"]["maxUnavailable"].as<int>(),
            replicas);
}

TEST(KubernetesTest, AutoscalerScalesTheDeploymentOnARegisteredGauge) {
  const BaseManifests base;
  const YAML::Node hpa = base.Get("HorizontalPodAutoscaler", "attnscope")["spec"];
  ASSERT_TRUE(hpa.IsMap());
  EXPECT_EQ(hpa["scaleTargetRef"]["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(hpa["scaleTargetRef"]["name"].as<std::string>(), "attnscope");
  EXPECT_EQ(hpa["minReplicas"].as<int>(), base.Deployment()["spec"]["replicas"].as<int>());
  EXPECT_GT(hpa["maxReplicas"].as<int>(), hpa["minReplicas"].as<int>());
  ASSERT_EQ(hpa["metrics"].size(), 1u);
  const std::string metric = hpa["metrics"][0]["pods"]["metric"]["name"].as<std::string>();

  // The adapter rule serves that metric from a gauge the server registers.
  const YAML::Node rules =
      LoadDocuments(kDir / "prometheus-adapter-values.yaml")[0]["rules"]["custom"];
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0]["name"]["as"].as<std::string>(), metric);
  const std::string query = rules[0]["seriesQuery"].as<std::string>();
  const std::string series = query.substr(0, query.find('{'));
  EXPECT_EQ(metrics::testing::RegisteredFamilyTypes()[series], "gauge") << series;
  EXPECT_EQ(rules[0]["name"]["matches"].as<std::string>(), "^" + series + "$");
  for (const char* label : {"namespace", "pod"}) {  // the PodMonitor's target labels
    EXPECT_EQ(rules[0]["resources"]["overrides"][label]["resource"].as<std::string>(), label);
  }
  EXPECT_THAT(rules[0]["metricsQuery"].as<std::string>(), ::testing::HasSubstr("<<.Series>>"));
}

TEST(KubernetesTest, PodMonitorJobMatchesTheAlertRules) {
  const BaseManifests base;
  const YAML::Node monitor = base.Get("PodMonitor", "attnscope")["spec"];
  const std::string job_label = monitor["jobLabel"].as<std::string>();
  const std::string job =
      StringMap(base.Deployment()["spec"]["template"]["metadata"]["labels"]).at(job_label);
  EXPECT_EQ(job, "attnscope");
  EXPECT_THAT(testing::Slurp(fs::path(ATTNSCOPE_DEPLOY_DIR) / "alerts.yml"),
              ::testing::HasSubstr("job=\"" + job + "\""));
}

TEST(KubernetesTest, DashboardConfigMapIsTheDashboardWithTheSidecarLabel) {
  const YAML::Node generators =
      LoadDocuments(kBase / "kustomization.yaml")[0]["configMapGenerator"];
  ASSERT_EQ(generators.size(), 1u);
  EXPECT_EQ(generators[0]["options"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
  const std::vector<std::string> files = Strings(generators[0]["files"]);
  ASSERT_EQ(files.size(), 1u);
  const std::string source = files[0].substr(files[0].find('=') + 1);
  EXPECT_EQ(testing::Slurp(kBase / source),
            testing::Slurp(fs::path(ATTNSCOPE_DEPLOY_DIR) / "grafana-dashboard.json"))
      << "deploy/kubernetes/base/" << source
      << " differs from deploy/grafana-dashboard.json: cp deploy/grafana-dashboard.json "
         "deploy/kubernetes/base/";
}

TEST(KubernetesTest, OverlaysPatchWhatTheBaseHas) {
  const BaseManifests base;
  EXPECT_EQ(base.Container()["name"].as<std::string>(), "attnscope-server");  // containers/0
  for (const char* overlay : {"overlays/models-volume", "overlays/gpu"}) {
    const YAML::Node k = LoadDocuments(kDir / overlay / "kustomization.yaml")[0];
    EXPECT_EQ(Strings(k["resources"])[0], "../../base") << overlay;
    for (const YAML::Node& patch : k["patches"]) {
      const std::string kind = patch["target"]["kind"].as<std::string>();
      const std::string name = patch["target"]["name"].as<std::string>();
      EXPECT_TRUE(base.Get(kind, name).IsMap())
          << overlay << " patches missing " << kind << "/" << name;
      const YAML::Node body = YAML::Load(patch["patch"].as<std::string>());
      EXPECT_TRUE(body.IsSequence() || body.IsMap()) << overlay;
      if (body.IsMap()) {
        EXPECT_EQ(body["spec"]["template"]["spec"]["containers"][0]["name"].as<std::string>(),
                  "attnscope-server")
            << overlay;
      }
    }
  }
  // Checkpoints are mounted where the image documents them.
  const YAML::Node ops = YAML::Load(
      LoadDocuments(kDir / "overlays/models-volume/kustomization.yaml")[0]["patches"][0]["patch"]
          .as<std::string>());
  bool mounted = false;
  for (const YAML::Node& op : ops) {
    if (op["path"].as<std::string>() == "/spec/template/spec/containers/0/volumeMounts/-") {
      mounted = op["value"]["mountPath"].as<std::string>() == "/models";
    }
  }
  EXPECT_TRUE(mounted);
  EXPECT_THAT(testing::Slurp(fs::path(ATTNSCOPE_DEPLOY_DIR) / "../Dockerfile"),
              ::testing::HasSubstr("mkdir -p /models"));
}

}  // namespace
}  // namespace attnscope::deploy
