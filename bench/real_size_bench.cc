// real_size_bench: a released model's shape (real config.json, random BF16
// weights written on demand into a temporary directory) through the
// attnscope CLI as a user runs it: `models --model`, and `analyze --json`
// at each prompt length in each precision, with wall time, the forward
// pass's seconds and peak RSS of each process, beside the checkpoint's size.
// Give --binary PATH (repeatable) to put other builds side by side in the
// same run (e.g. the previous commit's attnscope).
//
//   real_size_bench Qwen2.5-0.5B [--tokens 128,512,2048] [--threads 2]
//                   [--dir DIR (kept; reused if it has a config.json)]
//                   [--binary PATH]... [--precisions float32,bf16]
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "tests/common/real_checkpoint.h"
#include "nlohmann/json.hpp"
#include "service/model/gemm.h"

namespace {

using attnscope::testing::RealCheckpointOptions;

struct Run {
  bool ok = false;
  double wall_s = 0, peak_rss_mib = 0;
  std::string out;
};

// Runs argv with stdout captured in a file; peak RSS from wait4's rusage.
Run Exec(const std::vector<std::string>& argv, const std::string& out_file) {
  Run r;
  std::fflush(stdout);  // else the child's exit would print our buffer again
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out_file.c_str(), "w", stdout)) _exit(127);
    if (!freopen("/dev/null", "w", stderr)) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_rss_mib = usage.ru_maxrss / 1024.0;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  return r;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

int64_t DirBytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [--tokens 128,512] [--threads N] [--dir DIR] "
                         "[--binary PATH]... [--precisions float32,bf16]\nmodels:",
                 argv[0]);
    for (const std::string& m : attnscope::testing::RealModelNames()) std::fprintf(stderr, " %s", m.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const std::string model = argv[1];
  std::vector<std::string> tokens = {"128", "512"}, precisions = {"float32", "bf16"};
  std::vector<std::string> binaries;
  std::string dir, threads = "2";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") tokens = Split(value);
    else if (flag == "--threads") threads = value;
    else if (flag == "--dir") dir = value;
    else if (flag == "--binary") binaries.push_back(value);
    else if (flag == "--precisions") precisions = Split(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  binaries.insert(binaries.begin(), std::string(ATTNSCOPE_BIN_DIR) + "/attnscope");
  const bool temporary = dir.empty();
  if (temporary) {
    char tmpl[] = "/tmp/attnscope-real-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
  }
  std::printf("real_size_bench %s on %s (load %s), %s threads; %s\n", model.c_str(),
              attnscope::bench::CpuName().c_str(), attnscope::bench::LoadAverage().c_str(),
              threads.c_str(), attnscope::model::GemmDescription().c_str());
  if (!std::filesystem::exists(dir + "/config.json")) {
    const auto t0 = std::chrono::steady_clock::now();
    if (attnscope::testing::WriteRealCheckpoint(model, dir, RealCheckpointOptions{}) < 0) return 1;
    std::printf("wrote %s in %.1f s\n", dir.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double file_mib = DirBytes(dir) / 1048576.0;
  std::printf("checkpoint: %.0f MiB of BF16 safetensors\n\n", file_mib);
  std::printf("%-44s %-8s %6s %9s %9s %10s %12s\n", "binary", "command", "T", "precision",
              "wall s", "forward s", "peak RSS MiB");
  const std::string out_file = dir + "/.bench-out";
  for (const std::string& binary : binaries) {
    const Run models = Exec({binary, "models", "--model", dir}, out_file);
    std::printf("%-44s %-8s %6s %9s %9.2f %10s %12.0f%s\n", binary.c_str(), "models", "-", "-",
                models.wall_s, "-", models.peak_rss_mib, models.ok ? "" : "  FAILED");
    for (const std::string& t : tokens) {
      const std::string ids_file = dir + "/.ids-" + t;
      {
        std::ofstream ids(ids_file);
        for (int64_t id : attnscope::bench::RandomIds(std::stoll(t), 32000)) ids << id << " ";
      }
      for (const std::string& precision : precisions) {
        const Run r = Exec({binary, "analyze", "--model", dir, "--ids-file", ids_file, "--json",
                            "--threads", threads, "--precision", precision},
                           out_file);
        std::string forward = "-";
        if (r.ok) {
          const auto j = nlohmann::json::parse(r.out, nullptr, false);
          if (!j.is_discarded() && j.contains("forward_seconds")) {
            char buf[32];
            std::snprintf(buf, sizeof(buf), "%.2f", j["forward_seconds"].get<double>());
            forward = buf;
          }
        }
        std::printf("%-44s %-8s %6s %9s %9.2f %10s %12.0f%s\n", binary.c_str(), "analyze",
                    t.c_str(), precision.c_str(), r.wall_s, forward.c_str(), r.peak_rss_mib,
                    r.ok ? "" : "  FAILED");
        std::fflush(stdout);
      }
    }
  }
  std::printf("\npeak RSS includes the process's libraries (libtorch ~%s) and the checkpoint's %.0f MiB\n",
              "200 MiB", file_mib);
  std::filesystem::remove(out_file);
  if (temporary) std::filesystem::remove_all(dir);
  return 0;
}
