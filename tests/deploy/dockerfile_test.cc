// The Dockerfile checked offline against the server's flags and the
// Kubernetes and compose files that run its image: stages, user, ports,
// health check, model paths, image name.
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/manifest_support.h"

namespace attnscope::deploy {
namespace {

namespace fs = std::filesystem;
using testing::FlagValue;
using ::testing::HasSubstr;
using testing::LoadDocuments;
using testing::ParseFlags;
using testing::PortOf;
using testing::Strings;

const fs::path kRoot = fs::path(ATTNSCOPE_DEPLOY_DIR).parent_path();

// The Dockerfile's instructions of the last stage (continuation lines
// joined), keyed by instruction; and the number of stages.
struct Dockerfile {
  int stages = 0;
  std::multimap<std::string, std::string> last_stage;
};

Dockerfile ReadDockerfile() {
  Dockerfile out;
  std::istringstream lines(testing::Slurp(kRoot / "Dockerfile"));
  std::string joined;
  for (std::string line; std::getline(lines, line);) {
    if (joined.empty() && (line.empty() || line[0] == '#')) continue;
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1);
      continue;
    }
    joined += line;
    const std::size_t space = joined.find(' ');
    const std::string instruction = joined.substr(0, space);
    if (instruction == "FROM") {
      ++out.stages;
      out.last_stage.clear();
    }
    out.last_stage.emplace(instruction, joined.substr(space + 1));
    joined.clear();
  }
  return out;
}

std::string Only(const Dockerfile& file, const std::string& instruction) {
  EXPECT_EQ(file.last_stage.count(instruction), 1u) << instruction;
  const auto it = file.last_stage.find(instruction);
  return it == file.last_stage.end() ? "" : it->second;
}

std::vector<std::string> JsonArray(const std::string& text) {
  return nlohmann::json::parse(text.substr(text.find('['))).get<std::vector<std::string>>();
}

TEST(DockerfileTest, TwoStagesAndTheRunStageIsNonRoot) {
  const Dockerfile file = ReadDockerfile();
  EXPECT_EQ(file.stages, 2);
  EXPECT_THAT(testing::Slurp(kRoot / "Dockerfile"), HasSubstr("AS build"));
  EXPECT_EQ(Only(file, "USER"), "10001:10001");
  // The same uid/gid the Kubernetes Deployment requires.
  const YAML::Node pod =
      LoadDocuments(fs::path(ATTNSCOPE_DEPLOY_DIR) /
                    "kubernetes/base/deployment.yaml")[0]["spec"]["template"]["spec"];
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<std::string>() + ":" +
                pod["securityContext"]["runAsGroup"].as<std::string>(),
            Only(file, "USER"));
  for (const auto& [instruction, args] : file.last_stage) {
    EXPECT_THAT(args, ::testing::Not(HasSubstr("-dev "))) << "build dependency in the run stage";
  }
}

TEST(DockerfileTest, DefaultArgumentsPortsAndHealthCheckAgree) {
  const Dockerfile file = ReadDockerfile();
  const std::vector<std::string> cmd = JsonArray(Only(file, "CMD"));
  const auto flags = ParseFlags(cmd);
  const std::set<std::string> known = testing::ServerFlagNames();
  for (const auto& [name, value] : flags) EXPECT_EQ(known.count(name), 1u) << "--" << name;
  const int grpc = PortOf(FlagValue(flags, "listen"));
  const int metrics = PortOf(FlagValue(flags, "metrics-listen"));
  EXPECT_EQ(Only(file, "EXPOSE"), std::to_string(grpc) + " " + std::to_string(metrics));
  const std::vector<std::string> check = JsonArray(Only(file, "HEALTHCHECK"));
  ASSERT_GE(check.size(), 4u);
  EXPECT_EQ(check[0], "attnscope");
  EXPECT_EQ(check[1], "--server");
  EXPECT_EQ(PortOf(check[2]), grpc);
  EXPECT_EQ(check[3], "health");
  EXPECT_THAT(Only(file, "ENTRYPOINT"), HasSubstr("attnscope-entrypoint"));
  EXPECT_THAT(testing::Slurp(kRoot / "deploy/image/entrypoint.sh"),
              HasSubstr("exec /usr/local/bin/attnscope-server \"$@\""));
}

TEST(DockerfileTest, ModelPathsAndImageNameAgreeWithTheDeployFiles) {
  const Dockerfile file = ReadDockerfile();
  const std::string env = Only(file, "ENV");
  const std::string model_dir = env.substr(env.find('=') + 1);
  bool copied = false;
  for (const auto& [instruction, args] : file.last_stage) {
    copied = copied || (instruction == "COPY" && args == "models/tiny-gpt2 " + model_dir);
  }
  EXPECT_TRUE(copied) << "the bundled model is not copied to " << model_dir;
  EXPECT_THAT(env, HasSubstr("ATTNSCOPE_MODEL_DIR="));
  // The models-volume overlay names the bundled model by that path.
  EXPECT_THAT(testing::Slurp(fs::path(ATTNSCOPE_DEPLOY_DIR) /
                             "kubernetes/overlays/models-volume/kustomization.yaml"),
              HasSubstr("--model=tiny-gpt2=" + model_dir));
  // One image name in the build script and compose; Kubernetes pulls the
  // same repository ("attnscope") from a registry, under the version tag
  // (kustomization.yaml's images: entry; kubernetes_test checks the tag).
  const std::string image = "localhost/attnscope:latest";
  EXPECT_THAT(testing::Slurp(kRoot / "scripts/build-image.sh"), HasSubstr("IMAGE=\"${1:-" + image));
  const YAML::Node deployment =
      LoadDocuments(fs::path(ATTNSCOPE_DEPLOY_DIR) / "kubernetes/base/deployment.yaml")[0];
  const std::string name =
      deployment["spec"]["template"]["spec"]["containers"][0]["image"].as<std::string>();
  const YAML::Node images =
      LoadDocuments(fs::path(ATTNSCOPE_DEPLOY_DIR) / "kubernetes/base/kustomization.yaml")[0]
                   ["images"];
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0]["name"].as<std::string>(), name);
  const std::string pulled = images[0]["newName"].as<std::string>();
  EXPECT_EQ(pulled.substr(pulled.rfind('/') + 1), "attnscope") << pulled;
}

}  // namespace
}  // namespace attnscope::deploy
