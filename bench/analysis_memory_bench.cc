// Peak memory and time of one prompt's analysis at T = 1024 on a
// GPT-2-small-shaped model (random weights: 12 layers, 12 heads, width 768,
// vocab 50257, 1024 positions), computed
//   full:      every attention (L,H,T,T), hidden state and logit recorded by
//              a FullRecorder, then the statistics from those tensors
//              (analysis::AnalyzeTensors);
//   blocks 64: PromptAnalyzer observing the forward pass, query blocks of 64
//              rows, nothing recorded;
//   blocks 0:  the same with whole layers (query_block_size 0).
// Each runs in a fresh child process (one warm-up, then the timed runs).
// The statistics of every mode are compared with the full mode's: the
// largest absolute difference over all JSON values is printed.
//
// Usage: analysis_memory_bench [--tokens T] [--repeats R]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "nlohmann/json.hpp"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/stats_json.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"

namespace attnscope::bench {
namespace {

struct Mode {
  std::string label;
  bool full = false;
  int64_t block = 0;
};

// Largest |a - b| over two JSON values of the same shape (NaN when either
// has a NaN: `!(d <= m)` keeps it); infinity when the shapes differ.
double JsonDiff(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return std::fabs(a.get<double>() - b.get<double>());
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return INFINITY;
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double d = JsonDiff(a[i], b[i]);
      if (!(d <= m)) m = d;
    }
    return m;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return INFINITY;
    double m = 0;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return INFINITY;
      const double d = JsonDiff(it.value(), b[it.key()]);
      if (!(d <= m)) m = d;
    }
    return m;
  }
  return a == b ? 0 : INFINITY;
}

absl::StatusOr<analysis::PromptStats> AnalyzeFull(const model::LanguageModel& lm,
                                                  const std::vector<int64_t>& ids,
                                                  const analysis::AnalysisOptions& options) {
  const model::ModelConfig& c = lm.config();
  model::FullRecorder rec(c.num_layers, c.num_heads, {true, false, true, true});
  if (absl::Status s = lm.Forward({ids}, {}, {&rec}); !s.ok()) return s;
  analysis::ForwardTensors t;
  t.num_layers = c.num_layers;
  t.num_heads = c.num_heads;
  t.num_tokens = rec.num_tokens();
  t.width = rec.width();
  t.vocab = rec.vocab();
  t.attentions = rec.attentions();
  t.hidden_states = rec.hidden_states();
  t.logits = rec.logits();
  return analysis::AnalyzeTensors(t, options);
}

absl::StatusOr<analysis::PromptStats> AnalyzeObserving(const model::LanguageModel& lm,
                                                       const std::vector<int64_t>& ids,
                                                       const analysis::AnalysisOptions& options,
                                                       int64_t block) {
  analysis::PromptAnalyzer analyzer(options);
  model::ForwardOptions forward;
  forward.query_block_size = block;
  if (absl::Status s = lm.Forward({ids}, forward, {&analyzer}); !s.ok()) return s;
  return analyzer.Finish();
}

// Measures one mode in this process; its statistics go to `json_path`.
Measurement MeasureModeHere(const Mode& mode, const std::string& dir, int64_t tokens, int repeats,
                            const std::string& json_path) {
  std::unique_ptr<model::LanguageModel> lm;
  std::vector<int64_t> ids;
  analysis::AnalysisOptions options;  // structural {0}, threshold 6, no value norms
  auto setup = [&] {
    auto loaded = model::LoadLanguageModel(dir);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s: %s\n", dir.c_str(), std::string(loaded.status().message()).c_str());
      return false;
    }
    lm = std::move(*loaded);
    ids = RandomIds(tokens, lm->config().vocab_size);
    return true;
  };
  auto run = [&] {
    auto stats = mode.full ? AnalyzeFull(*lm, ids, options)
                           : AnalyzeObserving(*lm, ids, options, mode.block);
    if (!stats.ok()) {
      std::fprintf(stderr, "%s: %s\n", mode.label.c_str(),
                   std::string(stats.status().message()).c_str());
      return false;
    }
    std::ofstream(json_path) << analysis::StatsToJson(*stats).dump();
    return true;
  };
  return MeasureHere(setup, run, repeats);
}

// Mode `m` in a fresh process (this program again with --child-mode), so
// that its peak RSS counts what `attnscope analyze` would, the libraries'
// pages too.
Measurement MeasureMode(size_t m, int64_t tokens, int repeats) {
  return MeasureInFreshProcess({"--tokens", std::to_string(tokens), "--repeats",
                                std::to_string(repeats), "--child-mode", std::to_string(m)});
}

std::string JsonPath(size_t m) {
  return (std::filesystem::temp_directory_path() /
          ("attnscope-analysis-bench-" + std::to_string(m) + ".json"))
      .string();
}

std::string SmallModelDir() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "attnscope-bench-gpt2-small").string();
  std::filesystem::create_directories(dir);
  if (!std::filesystem::exists(dir + "/model.safetensors") &&
      !WriteRandomGpt2(dir, 12, 12, 768, 50257, 1024)) {
    return "";
  }
  return dir;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope::bench;
  int64_t tokens = 1024;
  int repeats = 1;
  int child_mode = -1;  // --child-mode M (internal): one mode, for MeasureMode
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--child-mode") == 0) child_mode = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::atoi(argv[i + 1]);
  }
  const std::string dir = SmallModelDir();
  if (dir.empty() || tokens < 1 || tokens > 1024 || repeats < 1) return 1;
  const std::vector<Mode> modes = {
      {"full (record L*H*T*T, then analyze)", true, 0},
      {"block-wise, query blocks of 64", false, 64},
      {"block-wise, whole layers (block 0)", false, 0},
  };
  if (const int fd = ResultFd(argc, argv); fd >= 0) {
    Measurement r;
    if (child_mode >= 0 && static_cast<size_t>(child_mode) < modes.size()) {
      const auto m = static_cast<size_t>(child_mode);
      r = MeasureModeHere(modes[m], dir, tokens, repeats, JsonPath(m));
    }
    ReturnResult(fd, &r, sizeof r);
  }
  std::printf("GPT-2-small shape (12 layers x 12 heads, width 768, vocab 50257), T = %ld, "
              "threads: all cores\n\n",
              static_cast<long>(tokens));
  std::printf("%-38s %10s %12s %10s %14s\n", "mode", "peak MiB", "+MiB model", "seconds",
              "max |diff|");
  nlohmann::json reference;
  for (size_t m = 0; m < modes.size(); ++m) {
    const std::string json_path = JsonPath(m);
    std::filesystem::remove(json_path);
    const Measurement r = MeasureMode(m, tokens, repeats);
    const nlohmann::json stats = ReadJson(json_path);
    if (!r.ok || stats.is_discarded()) {
      std::printf("%-38s failed\n", modes[m].label.c_str());
      return 1;
    }
    if (m == 0) reference = stats;
    const double diff = JsonDiff(reference, stats);
    std::printf("%-38s %10.0f %12.0f %10.2f %14.3g\n", modes[m].label.c_str(), r.peak_rss_mib,
                r.peak_rss_mib - r.baseline_rss_mib, r.seconds_per_run, diff);
    std::fflush(stdout);
  }
  std::printf("\npeak MiB: VmHWM of the child (a fresh process); +MiB model: over its resident size after loading "
              "the model; max |diff|: largest absolute difference of any statistic from the full "
              "mode's\n");
  return 0;
}
