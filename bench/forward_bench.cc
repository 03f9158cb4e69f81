// Forward-pass throughput and peak memory: the bundled model, a
// GPT-2-small-shaped model and a Llama-shaped model with grouped-query
// attention (random weights: 12 layers, width 768, 12 query / 4 key-value
// heads, SiLU-gated MLP 2048, vocabulary 32000), T = 128, 512, 1024, with 1
// and 2 threads, attention probabilities kept (a FullRecorder holding
// L x H x T x T floats) or not kept (only the logits are read).
//
// Usage: forward_bench [--quick] [--only LABEL]
//   --quick: T = 128 only, one timed run; --only: one model (e.g. llama-gqa)
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "service/model/blas_info.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"

namespace attnscope::bench {
namespace {

struct Config {
  std::string label;
  std::string dir;
};

void RunOne(const Config& c, int64_t tokens, int threads, bool keep, int repeats) {
  std::unique_ptr<model::LanguageModel> lm;
  std::vector<int64_t> ids;
  auto setup = [&] {
    model::SetComputeThreads(threads);
    auto loaded = model::LoadLanguageModel(c.dir);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.dir.c_str(), std::string(loaded.status().message()).c_str());
      return false;
    }
    lm = std::move(*loaded);
    ids = RandomIds(tokens, lm->config().vocab_size);
    return true;
  };
  auto run = [&] {
    const auto& cfg = lm->config();
    model::FullRecorder rec(cfg.num_layers, cfg.num_heads,
                            model::ObserverNeeds{keep, false, keep, true});
    return lm->Forward({ids}, {}, {&rec}).ok();
  };
  const Measurement m = MeasureInChild(setup, run, repeats);
  if (!m.ok) {
    std::printf("%-12s %6ld %7d %-5s  failed\n", c.label.c_str(), static_cast<long>(tokens), threads,
                keep ? "kept" : "no");
    return;
  }
  std::printf("%-12s %6ld %7d %-5s %10.3f %10.0f %10.0f %10.0f\n", c.label.c_str(),
              static_cast<long>(tokens), threads, keep ? "kept" : "no", m.seconds_per_run,
              tokens / m.seconds_per_run, m.peak_rss_mib, m.peak_rss_mib - m.baseline_rss_mib);
  std::fflush(stdout);
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope::bench;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  const std::string small_dir =
      (std::filesystem::temp_directory_path() / "attnscope-bench-gpt2-small").string();
  std::filesystem::create_directories(small_dir);
  if (!std::filesystem::exists(small_dir + "/model.safetensors") &&
      !WriteRandomGpt2(small_dir, 12, 12, 768, 50257, 1024)) {
    return 1;
  }
  const std::string llama_dir =
      (std::filesystem::temp_directory_path() / "attnscope-bench-llama-gqa").string();
  std::filesystem::create_directories(llama_dir);
  if (!std::filesystem::exists(llama_dir + "/model.safetensors") &&
      !WriteRandomLlama(llama_dir, 12, 12, 4, 768, 2048, 32000, 2048)) {
    return 1;
  }
  const std::vector<Config> configs = {
      {"tiny-gpt2", std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"},
      {"gpt2-small", small_dir},
      {"llama-gqa", llama_dir},
  };
  const std::string core = attnscope::model::BlasCoreName();
  std::printf("BLAS kernels: %s\n", core.empty() ? "(not OpenBLAS)" : core.c_str());
  std::printf("%-12s %6s %7s %-5s %10s %10s %10s %10s\n", "model", "T", "threads", "attn",
              "s/forward", "tokens/s", "peak MiB", "+MiB run");
  for (const Config& c : configs) {
    if (!only.empty() && c.label != only) continue;
    for (int64_t t : quick ? std::vector<int64_t>{128} : std::vector<int64_t>{128, 512, 1024}) {
      if (c.label == "tiny-gpt2" && t > 512) continue;  // 512 positions
      for (int threads : {1, 2}) {
        for (bool keep : {false, true}) RunOne(c, t, threads, keep, quick || t >= 1024 ? 1 : 3);
      }
    }
  }
  std::printf("tiny-gpt2 has 512 positions, so it is measured up to T = 512.\n");
  return 0;
}
