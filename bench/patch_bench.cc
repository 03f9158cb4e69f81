// patch_bench: activation patching with and without the reuse of the
// corrupted run's unchanged prefix (engine::PatchSettings::reuse_prefix),
// side by side in one process, alternating, on a Llama-shaped model with
// random weights written to a temporary directory. Prints seconds per run,
// the ratio, passes per second and the largest difference between the two
// runs' metrics (the numbers must not change).
//
//   build/bin/patch_bench [--tokens 32] [--layers 8] [--repeats 3] [--threads N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "service/engine/model_bundle.h"
#include "service/engine/patching_run.h"
#include "service/model/language_model.h"

namespace {

using namespace attnscope;

double Seconds(const engine::ModelBundle& bundle, const engine::Prompt& clean,
               const engine::Prompt& corrupted, engine::PatchSettings settings, bool reuse,
               engine::PatchRun* out) {
  settings.reuse_prefix = reuse;
  const auto start = std::chrono::steady_clock::now();
  auto run = engine::RunPatching(bundle, clean, corrupted, settings);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.ok()) {
    std::fprintf(stderr, "patching failed: %s\n", std::string(run.status().message()).c_str());
    std::exit(1);
  }
  *out = std::move(*run);
  return seconds;
}

double MaxDiff(const engine::PatchRun& a, const engine::PatchRun& b) {
  double worst = 0;
  for (size_t l = 0; l < a.metric.size(); ++l) {
    for (size_t c = 0; c < a.metric[l].size(); ++c) {
      const double d = std::fabs(a.metric[l][c] - b.metric[l][c]);
      if (std::isnan(d)) return d;
      worst = std::max(worst, d);
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 32, layers = 8;
  int repeats = 3, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--layers") == 0) layers = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  constexpr int64_t kHeads = 8, kKvHeads = 2, kWidth = 512, kInner = 1408, kVocab = 32000;
  const int used = model::SetComputeThreads(threads);
  char dir_template[] = "/tmp/attnscope-patch-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string dir = dir_template;
  if (!bench::WriteRandomLlama(dir, layers, kHeads, kKvHeads, kWidth, kInner, kVocab, 4096)) {
    return 1;
  }
  auto bundle = engine::LoadModelBundle(dir);
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  engine::Prompt clean, corrupted;
  clean.ids = bench::RandomIds(tokens, kVocab);
  corrupted.ids = clean.ids;
  corrupted.ids[static_cast<size_t>(tokens / 2)] = (corrupted.ids[static_cast<size_t>(tokens / 2)] + 1) % kVocab;
  std::printf("patch_bench on %s (load %s), %d threads: Llama shape, random weights, %ld layers, "
              "%ld query / %ld key-value heads, width %ld, MLP %ld, vocab %ld; T = %ld\n\n",
              bench::CpuName().c_str(), bench::LoadAverage().c_str(), used,
              static_cast<long>(layers), static_cast<long>(kHeads), static_cast<long>(kKvHeads),
              static_cast<long>(kWidth), static_cast<long>(kInner), static_cast<long>(kVocab),
              static_cast<long>(tokens));
  std::printf("%-9s %7s %12s %12s %8s %14s %16s\n", "patch", "passes", "full s/run",
              "reuse s/run", "ratio", "reuse passes/s", "max |metric diff|");
  for (const engine::PatchTarget what : {engine::PatchTarget::kHeads, engine::PatchTarget::kResidual}) {
    engine::PatchSettings settings;
    settings.what = what;
    settings.token_a = 1;
    settings.token_b = 2;
    double full = 0, reused = 0, diff = 0;
    engine::PatchRun a, b;
    for (int r = 0; r < repeats; ++r) {  // alternating, so that drift hits both
      full += Seconds(**bundle, clean, corrupted, settings, false, &a);
      reused += Seconds(**bundle, clean, corrupted, settings, true, &b);
      const double d = MaxDiff(a, b);
      diff = std::isnan(d) || std::isnan(diff) ? std::nan("") : std::max(diff, d);
    }
    full /= repeats;
    reused /= repeats;
    std::printf("%-9s %7ld %12.3f %12.3f %8.2f %14.1f %16.2e\n",
                what == engine::PatchTarget::kHeads ? "heads" : "residual",
                static_cast<long>(b.passes), full, reused, full / reused,
                static_cast<double>(b.passes) / reused, diff);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
