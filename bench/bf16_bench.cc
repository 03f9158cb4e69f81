// bfloat16 matrix products (--precision bf16) against float32, in one run:
//
// 1. accuracy: on every fixture under tests/data/models, its reference
//    prompt analyzed both ways; the largest |bf16 - float32| of the sink
//    score, context health, attention entropy and next-token entropy;
// 2. speed: analysis with every statistic on random-weight GPT-2-small
//    (12 x 12, width 768) and Llama-shaped (4 layers, GQA 8/2, head_dim 64)
//    models at T = 128 and 512, float32 and bf16 alternating, the median of
//    3 after a warm-up, and their ratio;
// 3. why the CPU path multiplies bfloat16-rounded operands with float32
//    BLAS: libtorch's own bfloat16 matmul against float32 on one of GPT-2's
//    shapes ((T x 768) x (768 x 3072)).
//
// Usage: bf16_bench [--threads N] [--skip-speed]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/core/safetensors.h"
#include "service/model/blas_info.h"
#include "service/model/language_model.h"

namespace attnscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<analysis::PromptStats> Analyze(const model::LanguageModel& lm,
                                              const std::vector<int64_t>& ids,
                                              model::Precision precision) {
  analysis::AnalysisOptions options;
  options.want_value_norms = true;
  options.input_ids = ids;
  analysis::PromptAnalyzer analyzer(options);
  model::ForwardOptions forward;
  forward.precision = precision;
  if (absl::Status s = lm.Forward({ids}, forward, {&analyzer}); !s.ok()) return s;
  return analyzer.Finish();
}

double MaxDiff(const analysis::HeadGrid& a, const analysis::HeadGrid& b) {
  double m = 0;
  for (size_t l = 0; l < a.size(); ++l) {
    for (size_t h = 0; h < a[l].size(); ++h) {
      const double d = std::fabs(a[l][h] - b[l][h]);
      if (!(d <= m)) m = d;  // NaN wins
    }
  }
  return m;
}

double MaxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

void Accuracy(const std::string& models_dir) {
  std::printf("1. accuracy: max |bf16 - float32| on each fixture's reference prompt\n");
  std::printf("%-26s %5s %12s %10s %14s %14s\n", "fixture", "T", "sink score", "health",
              "attn entropy", "next entropy");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(models_dir)) {
    if (std::filesystem::exists(e.path() / "reference.safetensors")) {
      names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string dir = models_dir + "/" + name;
    auto lm = model::LoadLanguageModel(dir);
    auto file = SafetensorsFile::Open(dir + "/reference.safetensors");
    if (!lm.ok() || !file.ok()) {
      std::printf("%-26s failed to load\n", name.c_str());
      continue;
    }
    auto ids = ToInt64(*(*file)->Find("input_ids"));
    auto f32 = Analyze(**lm, *ids, model::Precision::kFloat32);
    auto bf16 = Analyze(**lm, *ids, model::Precision::kBfloat16);
    if (!f32.ok() || !bf16.ok()) {
      std::printf("%-26s analysis failed\n", name.c_str());
      continue;
    }
    std::printf("%-26s %5zu %12.2e %10.2e %14.2e %14.2e\n", name.c_str(), ids->size(),
                MaxDiff(bf16->sink_score, f32->sink_score), std::fabs(bf16->health - f32->health),
                MaxDiff(bf16->attention_entropy, f32->attention_entropy),
                MaxDiff(bf16->next_token_entropy_nats, f32->next_token_entropy_nats));
  }
}

double MedianSeconds(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Speed(const std::string& label, const std::string& dir, int64_t tokens) {
  auto lm = model::LoadLanguageModel(dir);
  if (!lm.ok()) return;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> pick(0, (*lm)->config().vocab_size - 1);
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (int64_t& id : ids) id = pick(rng);
  std::vector<double> f32, bf16;
  for (int rep = 0; rep < 4; ++rep) {  // rep 0 warms both up
    for (model::Precision p : {model::Precision::kFloat32, model::Precision::kBfloat16}) {
      const auto start = Clock::now();
      if (!Analyze(**lm, ids, p).ok()) return;
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (rep > 0) (p == model::Precision::kFloat32 ? f32 : bf16).push_back(s);
    }
  }
  const double a = MedianSeconds(f32), b = MedianSeconds(bf16);
  std::printf("%-12s %5ld %12.3f %12.3f %10.2f\n", label.c_str(), static_cast<long>(tokens), a, b,
              b / a);
  std::fflush(stdout);
}

void NativeMatmul() {
  std::printf("\n3. libtorch's own matmul, (T x 768) x (768 x 3072), median of 3\n");
  std::printf("%5s %12s %12s %10s\n", "T", "float32 ms", "bf16 ms", "bf16/f32");
  for (int64_t t : {128, 512}) {
    const at::Tensor a = at::randn({t, 768}), w = at::randn({3072, 768});
    const at::Tensor a16 = a.to(at::kBFloat16), w16 = w.to(at::kBFloat16);
    std::vector<double> f, b;
    for (int rep = 0; rep < 4; ++rep) {
      auto s0 = Clock::now();
      at::Tensor y = at::matmul(a, w.t());
      auto s1 = Clock::now();
      at::Tensor y16 = at::matmul(a16, w16.t());
      auto s2 = Clock::now();
      if (rep == 0) continue;
      f.push_back(std::chrono::duration<double, std::milli>(s1 - s0).count());
      b.push_back(std::chrono::duration<double, std::milli>(s2 - s1).count());
    }
    std::printf("%5ld %12.2f %12.2f %10.1f\n", static_cast<long>(t), MedianSeconds(f),
                MedianSeconds(b), MedianSeconds(b) / MedianSeconds(f));
  }
}

std::string ScratchModel(const std::string& name, bool llama) {
  const std::string dir = (std::filesystem::temp_directory_path() / name).string();
  std::filesystem::create_directories(dir);
  if (std::filesystem::exists(dir + "/model.safetensors")) return dir;
  const bool ok = llama ? WriteRandomLlama(dir, 4, 8, 2, 512, 1024, 2048, 16384)
                        : WriteRandomGpt2(dir, 12, 12, 768, 50257, 1024);
  return ok ? dir : "";
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope::bench;
  int threads = 0;
  bool speed = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--skip-speed") == 0) speed = false;
  }
  const int used = attnscope::model::SetComputeThreads(threads);
  std::printf("bf16 against float32, %d threads; CPU %s; matrix products: %s\n\n", used,
              CpuName().c_str(), attnscope::model::MatrixProductsDescription().c_str());
  Accuracy(std::string(ATTNSCOPE_SOURCE_DIR) + "/tests/data/models");
  if (speed) {
    std::printf("\n2. speed: analysis with every statistic, median of 3 seconds\n");
    std::printf("%-12s %5s %12s %12s %10s\n", "model", "T", "float32 s", "bf16 s", "bf16/f32");
    const std::string gpt2 = ScratchModel("attnscope-bench-gpt2-small", false);
    const std::string llama = ScratchModel("attnscope-bench-llama-long", true);
    for (int64_t t : {128, 512}) {
      if (!gpt2.empty()) Speed("gpt2-small", gpt2, t);
      if (!llama.empty()) Speed("llama-gqa", llama, t);
    }
  }
  NativeMatmul();
  return 0;
}
