#include "bench/bench_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/core/safetensors.h"

namespace attnscope::bench {

std::vector<int64_t> RandomIds(int64_t n, int64_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}
namespace {

// Normal(0, stddev) values (or `constant` when stddev is 0) as F16 or F32.
TensorToWrite Random(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng,
                     float stddev, float constant, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const bool half = dtype == DType::kF16;
  std::string data(n * (half ? 2 : 4), '\0');
  std::normal_distribution<float> normal(0.0f, stddev);
  for (int64_t i = 0; i < n; ++i) {
    const float value = stddev > 0 ? normal(rng) : constant;
    if (half) {
      const uint16_t bits = FloatToHalf(value);
      data[2 * i] = static_cast<char>(bits & 0xff);
      data[2 * i + 1] = static_cast<char>(bits >> 8);
    } else {
      std::memcpy(&data[4 * i], &value, 4);  // little-endian host
    }
  }
  return TensorToWrite{name, half ? DType::kF16 : DType::kF32, std::move(shape), std::move(data)};
}

TensorToWrite Half(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng,
                   float stddev, float constant = 0.0f) {
  return Random(name, std::move(shape), rng, stddev, constant, DType::kF16);
}

}  // namespace

double ProcStatusMiB(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) / 1024.0;
  }
  return 0;
}

bool WriteRandomGpt2(const std::string& dir, int64_t layers, int64_t heads, int64_t width,
                     int64_t vocab, int64_t positions, DType dtype) {
  std::mt19937 rng(1234);
  std::vector<TensorToWrite> t;
  auto Half = [&](const std::string& name, std::vector<int64_t> shape, std::mt19937& r,
                  float stddev, float constant = 0.0f) {
    return Random(name, std::move(shape), r, stddev, constant, dtype);
  };
  t.push_back(Half("wte.weight", {vocab, width}, rng, 0.02f));
  t.push_back(Half("wpe.weight", {positions, width}, rng, 0.01f));
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      t.push_back(Half(p + ln + ".weight", {width}, rng, 0, 1.0f));
      t.push_back(Half(p + ln + ".bias", {width}, rng, 0, 0.0f));
    }
    t.push_back(Half(p + "attn.c_attn.weight", {width, 3 * width}, rng, 0.02f));
    t.push_back(Half(p + "attn.c_attn.bias", {3 * width}, rng, 0, 0.0f));
    t.push_back(Half(p + "attn.c_proj.weight", {width, width}, rng, 0.02f));
    t.push_back(Half(p + "attn.c_proj.bias", {width}, rng, 0, 0.0f));
    t.push_back(Half(p + "mlp.c_fc.weight", {width, 4 * width}, rng, 0.02f));
    t.push_back(Half(p + "mlp.c_fc.bias", {4 * width}, rng, 0, 0.0f));
    t.push_back(Half(p + "mlp.c_proj.weight", {4 * width, width}, rng, 0.02f));
    t.push_back(Half(p + "mlp.c_proj.bias", {width}, rng, 0, 0.0f));
  }
  t.push_back(Half("ln_f.weight", {width}, rng, 0, 1.0f));
  t.push_back(Half("ln_f.bias", {width}, rng, 0, 0.0f));
  if (auto s = WriteSafetensors(dir + "/model.safetensors", t); !s.ok()) {
    std::fprintf(stderr, "writing the random model: %s\n", std::string(s.message()).c_str());
    return false;
  }
  nlohmann::json config = {{"model_type", "gpt2"}, {"n_layer", layers}, {"n_head", heads},
                           {"n_embd", width},      {"vocab_size", vocab}, {"n_positions", positions},
                           {"torch_dtype", dtype == DType::kF16 ? "float16" : "float32"}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  return true;
}

bool WriteRandomLlama(const std::string& dir, int64_t layers, int64_t heads, int64_t kv_heads,
                      int64_t width, int64_t intermediate, int64_t vocab, int64_t positions) {
  std::mt19937 rng(4321);
  const int64_t head_dim = width / heads;
  std::vector<TensorToWrite> t;
  t.push_back(Half("model.embed_tokens.weight", {vocab, width}, rng, 0.02f));
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(Half(p + "input_layernorm.weight", {width}, rng, 0, 1.0f));
    t.push_back(Half(p + "post_attention_layernorm.weight", {width}, rng, 0, 1.0f));
    t.push_back(Half(p + "self_attn.q_proj.weight", {heads * head_dim, width}, rng, 0.02f));
    t.push_back(Half(p + "self_attn.k_proj.weight", {kv_heads * head_dim, width}, rng, 0.02f));
    t.push_back(Half(p + "self_attn.v_proj.weight", {kv_heads * head_dim, width}, rng, 0.02f));
    t.push_back(Half(p + "self_attn.o_proj.weight", {width, heads * head_dim}, rng, 0.02f));
    t.push_back(Half(p + "mlp.gate_proj.weight", {intermediate, width}, rng, 0.02f));
    t.push_back(Half(p + "mlp.up_proj.weight", {intermediate, width}, rng, 0.02f));
    t.push_back(Half(p + "mlp.down_proj.weight", {width, intermediate}, rng, 0.02f));
  }
  t.push_back(Half("model.norm.weight", {width}, rng, 0, 1.0f));
  t.push_back(Half("lm_head.weight", {vocab, width}, rng, 0.02f));
  if (auto s = WriteSafetensors(dir + "/model.safetensors", t); !s.ok()) {
    std::fprintf(stderr, "writing the random model: %s\n", std::string(s.message()).c_str());
    return false;
  }
  nlohmann::json config = {{"model_type", "llama"},
                           {"num_hidden_layers", layers},
                           {"num_attention_heads", heads},
                           {"num_key_value_heads", kv_heads},
                           {"hidden_size", width},
                           {"intermediate_size", intermediate},
                           {"vocab_size", vocab},
                           {"max_position_embeddings", positions},
                           {"rope_theta", 500000.0},
                           {"rms_norm_eps", 1e-5},
                           {"tie_word_embeddings", false},
                           {"torch_dtype", "float16"}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  return true;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "?";
}

double CurrentRssMiB() { return ProcStatusMiB("VmRSS:"); }
double PeakRssMiB() { return ProcStatusMiB("VmHWM:"); }

Measurement MeasureHere(const std::function<bool()>& setup, const std::function<bool()>& run,
                        int repeats) {
  Measurement r;
  r.startup_rss_mib = CurrentRssMiB();
  r.startup_file_rss_mib = ProcStatusMiB("RssFile:");
  if (!setup()) return r;
  r.baseline_rss_mib = CurrentRssMiB();
  r.ok = run();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < repeats && r.ok; ++i) {
    const auto start = std::chrono::steady_clock::now();
    r.ok = run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  double total = 0;
  for (double t : times) total += t;
  r.seconds_per_run = times.empty() ? 0 : total / static_cast<double>(times.size());
  std::sort(times.begin(), times.end());
  r.median_seconds = times.empty() ? 0 : times[(times.size() - 1) / 2];
  r.peak_rss_mib = PeakRssMiB();
  r.file_rss_mib = ProcStatusMiB("RssFile:");
  r.anon_rss_mib = ProcStatusMiB("RssAnon:");
  return r;
}

Measurement MeasureInChild(const std::function<bool()>& setup, const std::function<bool()>& run,
                           int repeats) {
  int fds[2];
  Measurement m;
  if (pipe(fds) != 0) return m;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Measurement r = MeasureHere(setup, run, repeats);
    ReturnResult(fds[1], &r, sizeof r);
  }
  close(fds[1]);
  if (read(fds[0], &m, sizeof(m)) != sizeof(m)) m.ok = false;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return m;
}

bool RunFreshProcess(const std::vector<std::string>& args, void* result, size_t bytes) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    std::vector<std::string> all = {"/proc/self/exe"};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back("--result-fd");
    all.push_back(std::to_string(fds[1]));
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::perror("bench: exec /proc/self/exe");
    _exit(127);
  }
  close(fds[1]);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = read(fds[0], static_cast<char*>(result) + got, bytes - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == bytes && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

Measurement MeasureInFreshProcess(const std::vector<std::string>& args) {
  Measurement m;
  if (!RunFreshProcess(args, &m, sizeof m)) m.ok = false;
  return m;
}

int ResultFd(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--result-fd") == 0) return std::atoi(argv[i + 1]);
  }
  return -1;
}

void ReturnResult(int fd, const void* result, size_t bytes) {
  std::fflush(stdout);
  std::fflush(stderr);
  size_t put = 0;
  while (put < bytes) {
    const ssize_t n = write(fd, static_cast<const char*>(result) + put, bytes - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  _exit(put == bytes ? 0 : 1);
}

}  // namespace attnscope::bench
