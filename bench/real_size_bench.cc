// real_size_bench: a released model's shape (real config.json, random BF16
// weights written on demand into a temporary directory) through the
// attnscope CLI as a user runs it: `models --model`, and `analyze --json`
// at each prompt length in each precision, with wall time, the forward
// pass's seconds and peak RSS of each process, beside the checkpoint's size.
// Give --binary PATH (repeatable) to put other builds side by side in the
// same run (e.g. the previous commit's attnscope). Beside them, the same
// figures for a plain PyTorch eager forward that keeps every attention and
// hidden state (bench/pytorch_eager_llama.py; float32 weights as
// from_pretrained gives them by default, and bfloat16), or "OOM: needs N GiB"
// where its estimated peak exceeds the machine's available memory.
//
//   real_size_bench Qwen2.5-0.5B [--tokens 128,512,2048] [--threads 2]
//                   [--dir DIR (kept; reused if it has a config.json)]
//                   [--binary PATH]... [--precisions float32,bf16]
//                   [--pytorch float32,bfloat16 | none] [--pytorch-repeats N]
//                   [--generate N (default 32; 0: none)]
// --generate: each build's `generate --json` of N greedy tokens after a
// 16-token prompt in each precision (tokens/s as the CLI reports them:
// new tokens over the prompt's pass and the decoding steps), and the
// PyTorch script's greedy decoding of the same prompt with a key/value
// cache, with how many of its tokens equal attnscope float32's.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
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
#include "bench/sgemm_floor.h"
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

// The PyTorch baseline's peak memory at T tokens, in bytes of its dtype: the
// weights; at the end of the pass every attention (L H T^2), every hidden
// state ((L+1) T D) and the logits (T V), plus one layer's temporaries (the
// scores and the probabilities, 2 H T^2 float32, and the MLP's gate, up and
// product, 3 T I); while loading, the weights converted so far beside the
// shard being read (at most the largest shard).
struct Need {
  double weights = 0, attentions = 0, hidden = 0, logits = 0, workspace = 0, loading = 0;
  double Peak() const {
    return std::max(weights + attentions + hidden + logits + workspace, weights + loading);
  }
};

Need PyTorchNeed(const nlohmann::json& cfg, double checkpoint_bytes, double largest_shard,
                 int64_t t, double element) {
  const double layers = cfg.value("num_hidden_layers", 0), heads = cfg.value("num_attention_heads", 0);
  const double width = cfg.value("hidden_size", 0), vocab = cfg.value("vocab_size", 0);
  const double inner = cfg.value("intermediate_size", 0), tokens = static_cast<double>(t);
  Need n;
  n.weights = checkpoint_bytes / 2 * element;  // the checkpoint is BF16
  n.attentions = layers * heads * tokens * tokens * element;
  n.hidden = (layers + 1) * tokens * width * element;
  n.logits = tokens * vocab * element;
  n.workspace = 2 * heads * tokens * tokens * 4 + 3 * tokens * inner * element;
  n.loading = largest_shard;
  return n;
}

// The FLOPs of one forward pass over T tokens: 2 T per weight of every
// matrix product (the checkpoint's 2-D tensors but the token and position
// embeddings, plus the head where it is the embedding's transpose), and the
// causal attention's scores and weighted sums, 4 head_dim H L T(T+1)/2.
double ForwardFlop(const std::string& dir, const nlohmann::json& cfg, int64_t t) {
  double weights = 0;
  bool head = false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::ifstream in(e.path(), std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    std::string header(header_len, ' ');
    in.read(header.data(), static_cast<std::streamsize>(header_len));
    const auto h = nlohmann::json::parse(header, nullptr, false);
    if (h.is_discarded()) continue;
    for (const auto& [name, tensor] : h.items()) {
      if (name == "__metadata__" || !tensor.contains("shape") || tensor["shape"].size() != 2) continue;
      const bool embedding = name.find("embed_tokens") != std::string::npos ||
                             name.find("embed_in") != std::string::npos ||
                             name.find("embed_positions") != std::string::npos ||
                             name.find("wte") != std::string::npos ||
                             name.find("wpe") != std::string::npos;
      if (embedding) continue;
      if (name.find("lm_head") != std::string::npos || name.find("embed_out") != std::string::npos) {
        head = true;
      }
      weights += tensor["shape"][0].get<double>() * tensor["shape"][1].get<double>();
    }
  }
  const double width = cfg.value("hidden_size", 0.0), heads = cfg.value("num_attention_heads", 0.0);
  const double layers = cfg.value("num_hidden_layers", 0.0);
  if (!head) weights += cfg.value("vocab_size", 0.0) * width;
  const double head_dim = cfg.contains("head_dim") && cfg["head_dim"].is_number()
                              ? cfg["head_dim"].get<double>()
                              : width / heads;
  const double tokens = static_cast<double>(t);
  return 2 * weights * tokens + 4 * head_dim * heads * layers * tokens * (tokens + 1) / 2;
}

double MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// The last row of the logits in an --export file (F32 (T, V)).
std::vector<float> LastLogitsRow(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, ' ');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  const auto h = nlohmann::json::parse(header, nullptr, false);
  if (h.is_discarded() || !h.contains("logits")) return {};
  const auto shape = h["logits"]["shape"].get<std::vector<int64_t>>();
  const int64_t begin = h["logits"]["data_offsets"][0].get<int64_t>();
  std::vector<float> row(static_cast<size_t>(shape[1]));
  in.seekg(static_cast<std::streamoff>(8 + header_len + begin + (shape[0] - 1) * shape[1] * 4));
  in.read(reinterpret_cast<char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
  return row;
}

// `count` random token ids below 32,000 (every real vocabulary has them),
// whitespace-separated, for --ids-file.
void WriteIds(const std::string& path, int64_t count) {
  std::ofstream ids(path);
  for (int64_t id : attnscope::bench::RandomIds(count, 32000)) ids << id << " ";
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<size_t>(in.tellg());
  std::vector<float> v(bytes / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
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
  std::vector<std::string> binaries, pytorch = {"float32", "bfloat16"};
  std::string dir, threads = "2", pytorch_repeats = "0", generate = "32";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") tokens = Split(value);
    else if (flag == "--threads") threads = value;
    else if (flag == "--dir") dir = value;
    else if (flag == "--binary") binaries.push_back(value);
    else if (flag == "--precisions") precisions = Split(value);
    else if (flag == "--pytorch") pytorch = value == "none" ? std::vector<std::string>{} : Split(value);
    else if (flag == "--pytorch-repeats") pytorch_repeats = value;
    else if (flag == "--generate") generate = value;
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
    std::error_code made;
    std::filesystem::create_directories(dir, made);
    const auto t0 = std::chrono::steady_clock::now();
    if (attnscope::testing::WriteRealCheckpoint(model, dir, RealCheckpointOptions{}) < 0) return 1;
    std::printf("wrote %s in %.1f s\n", dir.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double file_mib = DirBytes(dir) / 1048576.0;
  std::printf("checkpoint: %.0f MiB of BF16 safetensors\n\n", file_mib);
  std::ifstream config_stream(dir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_stream, nullptr, false);
  std::string isa;
  const double peak_gflops = attnscope::bench::MeasureFmaPeak(std::stoi(threads), &isa);
  std::printf("float32 FMA peak: %.0f GFLOP/s (%s, %s threads); bound = the forward's FLOPs at "
              "that rate\n\n",
              peak_gflops, isa.c_str(), threads.c_str());
  std::printf("%-44s %-8s %6s %9s %9s %10s %12s %8s %9s\n", "binary", "command", "T", "precision",
              "wall s", "forward s", "peak RSS MiB", "bound s", "fwd/bound");
  const std::string out_file = dir + "/.bench-out";
  for (const std::string& binary : binaries) {
    const Run models = Exec({binary, "models", "--model", dir}, out_file);
    std::printf("%-44s %-8s %6s %9s %9.2f %10s %12.0f%s\n", binary.c_str(), "models", "-", "-",
                models.wall_s, "-", models.peak_rss_mib, models.ok ? "" : "  FAILED");
    for (const std::string& t : tokens) {
      const std::string ids_file = dir + "/.ids-" + t;
      WriteIds(ids_file, std::stoll(t));
      for (const std::string& precision : precisions) {
        const Run r = Exec({binary, "analyze", "--model", dir, "--ids-file", ids_file, "--json",
                            "--threads", threads, "--precision", precision},
                           out_file);
        std::string forward = "-", ratio = "-";
        const double bound = config.is_discarded() || !(peak_gflops > 0)
                                 ? 0
                                 : ForwardFlop(dir, config, std::stoll(t)) / (peak_gflops * 1e9);
        if (r.ok) {
          const auto j = nlohmann::json::parse(r.out, nullptr, false);
          if (!j.is_discarded() && j.contains("forward_seconds")) {
            char buf[32];
            const double seconds = j["forward_seconds"].get<double>();
            std::snprintf(buf, sizeof(buf), "%.2f", seconds);
            forward = buf;
            if (bound > 0) {
              std::snprintf(buf, sizeof(buf), "%.2f", seconds / bound);
              ratio = buf;
            }
          }
        }
        std::printf("%-44s %-8s %6s %9s %9.2f %10s %12.0f %8.2f %9s%s\n", binary.c_str(), "analyze",
                    t.c_str(), precision.c_str(), r.wall_s, forward.c_str(), r.peak_rss_mib, bound,
                    ratio.c_str(), r.ok ? "" : "  FAILED");
        std::fflush(stdout);
      }
    }
  }
  std::printf("\npeak RSS includes the process's libraries (libtorch ~%s) and the checkpoint's %.0f MiB\n",
              "200 MiB", file_mib);

  // Decoding: N greedy tokens after a 16-token prompt.
  const int64_t new_tokens = std::stoll(generate);
  const std::string prompt_file = dir + "/.ids-prompt";
  std::vector<int64_t> reference_ids;  // attnscope float32's, the first build's
  if (new_tokens > 0) {
    WriteIds(prompt_file, 16);
    std::printf("\ngeneration: %ld greedy tokens after a 16-token prompt\n",
                static_cast<long>(new_tokens));
    std::printf("%-44s %9s %9s %9s %12s\n", "binary", "precision", "tokens/s", "wall s",
                "peak RSS MiB");
    for (const std::string& binary : binaries) {
      for (const std::string& precision : precisions) {
        const Run r = Exec({binary, "generate", "--model", dir, "--ids-file", prompt_file,
                            "--max-new-tokens", generate, "--ignore-eos", "--json", "--threads",
                            threads, "--precision", precision},
                           out_file);
        std::string rate = "-";
        const auto j = r.ok ? nlohmann::json::parse(r.out, nullptr, false) : nlohmann::json();
        if (r.ok && !j.is_discarded() && j.contains("tokens_per_second")) {
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.2f", j["tokens_per_second"].get<double>());
          rate = buf;
          if (reference_ids.empty() && precision == "float32" && j.contains("tokens")) {
            for (const auto& token : j["tokens"]) reference_ids.push_back(token["id"].get<int64_t>());
          }
        }
        std::printf("%-44s %9s %9s %9.2f %12.0f%s\n", binary.c_str(), precision.c_str(),
                    rate.c_str(), r.wall_s, r.peak_rss_mib, r.ok ? "" : "  FAILED");
        std::fflush(stdout);
      }
    }
  }

  // The PyTorch eager baseline on the same weights and ids.
  const std::string script = std::string(ATTNSCOPE_BENCH_DIR) + "/pytorch_eager_llama.py";
  if (!pytorch.empty() &&
      std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) {
    std::printf("\nPyTorch eager: skipped (/usr/bin/python3 has no torch; Debian: python3-torch)\n");
    pytorch.clear();
  }
  if (!pytorch.empty()) {
    std::ifstream config_in(dir + "/config.json");
    const nlohmann::json cfg = nlohmann::json::parse(config_in, nullptr, false);
    double largest_shard = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".safetensors") {
        largest_shard = std::max(largest_shard, static_cast<double>(e.file_size()));
      }
    }
    const double available = MemAvailableBytes();
    std::string version = "?";
    if (FILE* p = popen("/usr/bin/python3 -c 'import torch; print(torch.__version__)'", "r")) {
      char buf[64] = {0};
      if (std::fgets(buf, sizeof(buf), p) != nullptr) version = std::string(buf, std::strcspn(buf, "\n"));
      pclose(p);
    }
    std::printf("\nPyTorch %s eager (bench/pytorch_eager_llama.py: every attention and hidden "
                "state kept), %s threads, %.1f GiB available\n",
                version.c_str(), threads.c_str(), available / 1073741824.0);
    std::printf("%-10s %6s %9s %9s %10s %9s %12s  %s\n", "dtype", "T", "load s", "first s",
                "warm s", "wall s", "peak RSS MiB", "last-row logits vs attnscope float32");
    for (const std::string& t : tokens) {
      const std::string ids_file = dir + "/.ids-" + t;
      WriteIds(ids_file, std::stoll(t));
      for (const std::string& dtype : pytorch) {
        const Need need =
            PyTorchNeed(cfg, file_mib * 1048576.0, largest_shard, std::stoll(t), dtype == "float32" ? 4 : 2);
        if (need.Peak() > available) {
          std::printf("%-10s %6s  OOM: needs %.1f GiB (weights %.1f + attentions %.1f + hidden "
                      "states %.1f + logits %.1f + workspace %.1f)\n",
                      dtype.c_str(), t.c_str(), need.Peak() / 1073741824.0,
                      need.weights / 1073741824.0, need.attentions / 1073741824.0,
                      need.hidden / 1073741824.0, need.logits / 1073741824.0,
                      need.workspace / 1073741824.0);
          continue;
        }
        const std::string logits_file = dir + "/.pytorch-logits";
        const Run r = Exec({"/usr/bin/python3", script, dir, ids_file, threads, dtype,
                            pytorch_repeats, logits_file},
                           out_file);
        double load = 0, first = 0, warm = 0, peak = 0;
        const bool parsed = r.ok && std::sscanf(r.out.c_str(), "load_s %lf first_s %lf warm_s %lf peak_rss_mib %lf",
                                                &load, &first, &warm, &peak) == 4;
        std::string check = "-";
        if (parsed && dtype == "float32") {
          // attnscope's float32 logits of the same ids (one head exported).
          const std::string exported = dir + "/.attnscope-export.safetensors";
          const Run a = Exec({binaries.front(), "analyze", "--model", dir, "--ids-file", ids_file,
                              "--json", "--threads", threads, "--export", exported,
                              "--attention-layers", "0", "--attention-heads", "0"},
                             out_file);
          const std::vector<float> ours = a.ok ? LastLogitsRow(exported) : std::vector<float>{};
          const std::vector<float> theirs = ReadFloats(logits_file);
          if (!ours.empty() && ours.size() == theirs.size()) {
            double worst = 0, largest = 0;
            for (size_t v = 0; v < ours.size(); ++v) {
              const double d = std::fabs(static_cast<double>(ours[v]) - theirs[v]);
              if (!(d <= worst)) worst = d;  // keeps NaN
              largest = std::max(largest, std::fabs(static_cast<double>(theirs[v])));
            }
            char buf[96];
            std::snprintf(buf, sizeof(buf), "max |diff| %.2g (largest logit %.3g)", worst, largest);
            check = buf;
          } else {
            check = "not compared (attnscope's export failed)";
          }
          std::filesystem::remove(exported);
        }
        std::filesystem::remove(logits_file);
        if (!parsed) {
          std::printf("%-10s %6s  FAILED (%s)\n", dtype.c_str(), t.c_str(), r.out.c_str());
          continue;
        }
        std::printf("%-10s %6s %9.2f %9.2f %10.2f %9.2f %12.0f  %s\n", dtype.c_str(), t.c_str(),
                    load, first, warm, r.wall_s, peak, check.c_str());
        std::fflush(stdout);
      }
    }
    if (new_tokens > 0) {
      std::printf("\nPyTorch generation: %ld greedy tokens after the same 16-token prompt, with "
                  "a key/value cache\n%-10s %9s %9s %12s  %s\n",
                  static_cast<long>(new_tokens), "dtype", "tokens/s", "wall s", "peak RSS MiB",
                  "tokens equal to attnscope float32's");
      for (const std::string& dtype : pytorch) {
        const std::string logits_file = dir + "/.pytorch-logits";
        const Run r = Exec({"/usr/bin/python3", script, dir, prompt_file, threads, dtype, "0",
                            logits_file, generate},
                           out_file);
        std::filesystem::remove(logits_file);
        const size_t at = r.out.find("generate_tps ");
        double rate = 0, peak = 0, unused = 0;
        char ids[65536] = {0};
        if (!r.ok || at == std::string::npos ||
            std::sscanf(r.out.c_str(), "load_s %lf first_s %lf warm_s %lf peak_rss_mib %lf",
                        &unused, &unused, &unused, &peak) != 4 ||
            std::sscanf(r.out.c_str() + at, "generate_tps %lf ids %65535s", &rate, ids) != 2) {
          std::printf("%-10s  FAILED (%s)\n", dtype.c_str(), r.out.c_str());
          continue;
        }
        std::string same = "-";
        if (!reference_ids.empty()) {
          const std::vector<std::string> theirs = Split(ids);
          size_t equal = 0;
          while (equal < theirs.size() && equal < reference_ids.size() &&
                 std::stoll(theirs[equal]) == reference_ids[equal]) {
            ++equal;
          }
          same = "the first " + std::to_string(equal) + " of " + std::to_string(theirs.size());
        }
        std::printf("%-10s %9.2f %9.2f %12.0f  %s\n", dtype.c_str(), rate, r.wall_s, peak,
                    same.c_str());
        std::fflush(stdout);
      }
    }
  }
  std::filesystem::remove(out_file);
  if (temporary) std::filesystem::remove_all(dir);
  return 0;
}
