// deploy/kubernetes/batch run as a cluster would run it, on loopback: every
// index of the indexed Job starts the container's command with its own
// arguments, $(SHARD) set to the index (what the completion-index annotation
// gives the pod), the data volume's mount path mapped to a temporary
// directory and the headless Service replaced by two real attnscope-server
// replicas. The shards' results together hold every prompt exactly once, and
// a pod that starts again resumes without repeating any prompt.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/child_process.h"
#include "tests/deploy/kustomize_render.h"

namespace attnscope::deploy {
namespace {

namespace fs = std::filesystem;
using metrics::testing::ChildProcess;
using metrics::testing::ReadAfter;
using nlohmann::json;

const fs::path kBatchDir = fs::path(ATTNSCOPE_DEPLOY_DIR) / "kubernetes" / "batch";
constexpr char kIndexAnnotation[] = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

// What a pod of the Job runs, read from the rendered kustomization.
struct JobPod {
  int completions = 0;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::string index_variable;  // the env var set from the completion index
  std::string data_mount;      // where the data claim is mounted
};

JobPod ReadJob() {
  const json job = testing::FindObject(testing::RenderKustomization(kBatchDir.string()), "Job",
                                       "attnscope-batch");
  const json& spec = job.at("spec");
  const json& pod = spec.at("template").at("spec");
  const json& container = pod.at("containers").at(0);
  JobPod out;
  out.completions = spec.at("completions").get<int>();
  out.command = container.at("command").get<std::vector<std::string>>();
  out.args = container.at("args").get<std::vector<std::string>>();
  for (const json& env : container.at("env")) {
    if (env.contains("valueFrom") &&
        env["valueFrom"]["fieldRef"].value("fieldPath", "") == kIndexAnnotation) {
      out.index_variable = env.at("name").get<std::string>();
    }
  }
  std::string claim_volume;
  for (const json& volume : pod.at("volumes")) {
    if (volume.contains("persistentVolumeClaim")) claim_volume = volume.at("name").get<std::string>();
  }
  for (const json& mount : container.at("volumeMounts")) {
    if (mount.at("name") == claim_volume) out.data_mount = mount.at("mountPath").get<std::string>();
  }
  return out;
}

struct Replica {
  std::unique_ptr<ChildProcess> process;
  std::string address;
};

::testing::AssertionResult StartReplica(Replica* replica) {
  std::string error;
  replica->process = ChildProcess::Start(
      {std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server", "--listen", "127.0.0.1:0",
       "--metrics-listen", "127.0.0.1:0", "--threads", "1", "--drain-seconds", "2"},
      &error);
  if (!replica->process) return ::testing::AssertionFailure() << error;
  replica->address = ReadAfter(*replica->process, "attnscope-server listening on ");
  if (replica->address.empty()) {
    return ::testing::AssertionFailure() << "no address: " << replica->process->Stderr();
  }
  return ::testing::AssertionSuccess();
}

std::vector<json> ReadLines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

class BatchJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "batch-job-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    data_ = tmpl;
  }
  void TearDown() override { fs::remove_all(data_); }

  // The pod of index `index`: the Job's command and arguments as the
  // kubelet expands them, with the data volume at data_ and `server` for
  // the headless Service.
  std::vector<std::string> PodArgv(const JobPod& pod, int index, const std::string& server) const {
    std::vector<std::string> argv = {std::string(ATTNSCOPE_BIN_DIR) + "/" + pod.command.at(0)};
    for (size_t i = 1; i < pod.command.size(); ++i) argv.push_back(pod.command[i]);
    for (std::string arg : pod.args) {
      arg = absl::StrReplaceAll(arg, {{absl::StrCat("$(", pod.index_variable, ")"),
                                       std::to_string(index)},
                                      {pod.data_mount + "/", data_.string() + "/"}});
      if (arg.rfind("--server=", 0) == 0) arg = "--server=" + server;
      argv.push_back(arg);
    }
    return argv;
  }

  fs::path data_;
};

TEST_F(BatchJobTest, IndexedPodsCoverEveryPromptOnceAndARestartRepeatsNothing) {
  const JobPod pod = ReadJob();
  ASSERT_EQ(pod.command, std::vector<std::string>{"attnscope"});
  ASSERT_FALSE(pod.index_variable.empty()) << "no env var from " << kIndexAnnotation;
  ASSERT_EQ(pod.data_mount, "/data");
  ASSERT_GE(pod.completions, 2);

  // 4 shards of 11 prompts: shards of 3, 3, 3 and 2.
  const int kPrompts = 11;
  {
    std::ofstream prompts(data_ / "prompts.jsonl");
    for (int i = 0; i < kPrompts; ++i) {
      prompts << json{{"id", absl::StrCat("p", i)},
                      {"text", absl::StrCat("Prompt number ", i, " of the dataset, for shard tests.")}}
                     .dump()
              << "\n";
    }
  }
  Replica replicas[2];
  for (Replica& replica : replicas) ASSERT_TRUE(StartReplica(&replica));
  const std::string server =
      absl::StrCat("ipv4:", replicas[0].address, ",", replicas[1].address);

  // Every pod at once (parallelism = completions).
  std::vector<std::unique_ptr<ChildProcess>> pods;
  for (int index = 0; index < pod.completions; ++index) {
    std::string error;
    pods.push_back(ChildProcess::Start(PodArgv(pod, index, server), &error));
    ASSERT_NE(pods.back(), nullptr) << error;
  }
  std::map<std::string, int> shard_of;
  for (int index = 0; index < pod.completions; ++index) {
    ASSERT_EQ(pods[index]->Wait(300), 0) << "pod " << index << ": " << pods[index]->Stderr();
    const fs::path results = data_ / absl::StrCat("results-", index, ".jsonl");
    ASSERT_TRUE(fs::exists(results)) << results;
    for (const json& line : ReadLines(results)) {
      EXPECT_FALSE(line.contains("error")) << line.dump();
      const std::string id = line.at("id").get<std::string>();
      EXPECT_EQ(shard_of.count(id), 0u) << id << " in shards " << shard_of[id] << " and " << index;
      shard_of[id] = index;
      EXPECT_GT(line.value("tokens", 0), 0) << id;
      EXPECT_FALSE(line.value("replica", "").empty()) << id;
    }
  }
  ASSERT_EQ(shard_of.size(), static_cast<size_t>(kPrompts));
  for (int i = 0; i < kPrompts; ++i) {
    const std::string id = absl::StrCat("p", i);
    ASSERT_EQ(shard_of.count(id), 1u) << id << " is in no shard";
    EXPECT_EQ(shard_of[id], i % pod.completions) << id;
  }

  // The kubelet starts pod 0 again (restartPolicy OnFailure): --resume finds
  // its ids done, analyzes nothing and exits 0.
  const fs::path first = data_ / "results-0.jsonl";
  const size_t before = ReadLines(first).size();
  std::string error;
  std::unique_ptr<ChildProcess> again = ChildProcess::Start(PodArgv(pod, 0, server), &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(again->Wait(120), 0) << again->Stderr();
  EXPECT_EQ(ReadLines(first).size(), before);
}

}  // namespace
}  // namespace attnscope::deploy
