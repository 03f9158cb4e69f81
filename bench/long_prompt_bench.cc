// Long prompts in bounded memory: one analysis with every statistic
// (PromptAnalyzer with value norms, surprisal and top-5 predictions) of a
// random prompt on a Llama-shaped model with random weights (4 layers, 8
// query heads sharing 2 key/value heads, head_dim 64, width 512, SiLU-gated
// MLP 1024, vocabulary 2048, 16384 positions, rope_theta 5e5), each T in a
// fresh process, one run (no warm-up: at T = 16384 a run takes minutes).
//
// Per T it prints the seconds, the peak RSS (VmHWM), the peak over the
// resident size after loading, the query rows per attention block, and what
// a keep-everything run (Hugging Face's output_attentions=True,
// output_hidden_states=True) would need at the same T: the attentions
// L x H x T x T x 4 bytes, the hidden states (L+1) x T x D x 4 and the
// logits T x V x 4. Rows marked "whole" compute each layer's attention at
// once (--block-size T, the old default) to show the quadratic growth that
// the automatic blocks remove.
//
// Rows marked "lens" (--lens T,...) add the logit lens of every position
// (LogitLensObserver, every state, top 5, the default 256 rows read out at
// a time) to the same pass: its memory is 4 * 256 * (V + D) bytes, not the
// T x V logits of every state.
//
// Usage: long_prompt_bench [--tokens 4096,8192,16384] [--whole 1024,2048,4096]
//                          [--lens 16384] [--threads N]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "service/analysis/logit_lens.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/model/attention_blocks.h"
#include "service/model/language_model.h"

namespace attnscope::bench {
namespace {

constexpr int64_t kLayers = 4, kHeads = 8, kKvHeads = 2, kWidth = 512, kInner = 1024;
constexpr int64_t kVocab = 2048, kPositions = 16384;

struct Result {
  bool ok = false;
  double seconds = 0;
  double baseline_mib = 0;  // resident after loading
  double peak_mib = 0;      // VmHWM at the end
  double health = 0;        // to show the statistics came out
};

std::vector<int64_t> RandomIds(int64_t n) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> pick(0, kVocab - 1);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}

// Loads the model and analyzes T tokens once in this (child) process.
Result AnalyzeOnce(const std::string& dir, int64_t tokens, int64_t block, bool lens) {
  Result r;
  auto loaded = model::LoadLanguageModel(dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return r;
  }
  const std::vector<int64_t> ids = RandomIds(tokens);
  analysis::AnalysisOptions options;
  options.want_value_norms = true;
  options.input_ids = ids;
  analysis::PromptAnalyzer analyzer(options);
  const model::LanguageModel& lm = **loaded;
  analysis::LensOptions lens_options;
  lens_options.input_ids = ids;
  analysis::LogitLensObserver lens_observer(
      lens_options, kLayers + 1, kVocab, [&lm](int state, const float* x, int64_t rows, float* z) {
        return lm.HiddenStateLogits(state, x, rows, model::Precision::kFloat32, z);
      });
  std::vector<model::ForwardObserver*> observers = {&analyzer};
  if (lens) observers.push_back(&lens_observer);
  model::ForwardOptions forward;
  forward.query_block_size = block;
  r.baseline_mib = CurrentRssMiB();
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = (*loaded)->Forward({ids}, forward, observers);
  auto stats = analyzer.Finish();
  if (s.ok() && lens) s = lens_observer.Finish().status();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_mib = PeakRssMiB();
  if (!s.ok() || !stats.ok()) {
    std::fprintf(stderr, "T = %ld: %s\n", static_cast<long>(tokens),
                 std::string((s.ok() ? stats.status() : s).message()).c_str());
    return r;
  }
  r.health = stats->health;
  r.ok = true;
  return r;
}

// AnalyzeOnce in a fresh process (this program again with --child): its
// peak RSS counts what `attnscope analyze` would, the libraries' pages too.
Result InChild(int64_t tokens, int64_t block, int threads, bool lens = false) {
  Result r;
  if (!RunFreshProcess({"--threads", std::to_string(threads), "--child",
                        std::to_string(tokens) + "," + std::to_string(block) + "," +
                            (lens ? "1" : "0")},
                       &r, sizeof r)) {
    r.ok = false;
  }
  return r;
}

std::vector<int64_t> ParseList(const char* text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::atoll(item.c_str()));
  }
  return out;
}

double MiB(double bytes) { return bytes / 1048576.0; }

void PrintRow(const char* mode, int64_t tokens, int64_t block, const Result& r) {
  const double t = static_cast<double>(tokens);
  const double attentions = kLayers * kHeads * t * t * 4;
  const double hidden = (kLayers + 1) * t * kWidth * 4;
  const double logits = t * kVocab * 4;
  if (!r.ok) {
    std::printf("%-6s %6ld  failed\n", mode, static_cast<long>(tokens));
    return;
  }
  std::printf("%-6s %6ld %6ld %9.2f %9.0f %9.0f %12.0f %10.0f %9.0f %7.1f\n", mode,
              static_cast<long>(tokens), static_cast<long>(block), r.seconds, r.peak_mib,
              r.peak_mib - r.baseline_mib, MiB(attentions + hidden + logits), MiB(attentions),
              MiB(hidden + logits), r.health);
  std::fflush(stdout);
}

std::string ModelDir() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "attnscope-bench-llama-long").string();
  std::filesystem::create_directories(dir);
  if (!std::filesystem::exists(dir + "/model.safetensors") &&
      !WriteRandomLlama(dir, kLayers, kHeads, kKvHeads, kWidth, kInner, kVocab, kPositions)) {
    return "";
  }
  return dir;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope::bench;
  std::vector<int64_t> tokens = {4096, 8192, 16384};
  std::vector<int64_t> whole = {1024, 2048, 4096};
  std::vector<int64_t> lens;
  int threads = 0;
  std::string child;  // --child T,BLOCK (internal): one AnalyzeOnce, for InChild
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--child") == 0) child = argv[i + 1];
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--whole") == 0) whole = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--lens") == 0) lens = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  const std::string dir = ModelDir();
  if (dir.empty()) return 1;
  const int used = attnscope::model::SetComputeThreads(threads);
  if (const int fd = ResultFd(argc, argv); fd >= 0) {
    long t = 0, block = 0, with_lens = 0;
    Result r;
    if (std::sscanf(child.c_str(), "%ld,%ld,%ld", &t, &block, &with_lens) == 3) {
      r = AnalyzeOnce(dir, t, block, with_lens != 0);
    }
    ReturnResult(fd, &r, sizeof r);
  }
  std::printf("Llama shape, random weights: %ld layers, %ld query / %ld key-value heads, "
              "head_dim %ld, width %ld, MLP %ld, vocab %ld, %ld positions; %d threads\n\n",
              static_cast<long>(kLayers), static_cast<long>(kHeads), static_cast<long>(kKvHeads),
              static_cast<long>(kWidth / kHeads), static_cast<long>(kWidth),
              static_cast<long>(kInner), static_cast<long>(kVocab), static_cast<long>(kPositions),
              used);
  std::printf("%-6s %6s %6s %9s %9s %9s %12s %10s %9s %7s\n", "mode", "T", "block", "seconds",
              "peak MiB", "+MiB run", "keep-all MiB", "attn MiB", "h+z MiB", "health");
  for (int64_t t : whole) {
    if (t < 1 || t > kPositions) continue;
    PrintRow("whole", t, t, InChild(t, t, threads));
  }
  for (int64_t t : tokens) {
    if (t < 1 || t > kPositions) continue;
    const int64_t block = attnscope::model::QueryBlockRows(0, kHeads, t, t);
    PrintRow("auto", t, block, InChild(t, 0, threads));
  }
  for (int64_t t : lens) {
    if (t < 1 || t > kPositions) continue;
    const int64_t block = attnscope::model::QueryBlockRows(0, kHeads, t, t);
    PrintRow("lens", t, block, InChild(t, 0, threads, true));
  }
  std::printf("\nwhole: each layer's attention at once (--block-size T); auto: the default "
              "(--block-size 0), blocks of the printed rows; lens: auto plus the logit lens of "
              "every position.\npeak MiB: VmHWM of the child (a fresh process); "
              "+MiB run: over its resident size after loading the model; keep-all MiB: what a "
              "run keeping every tensor needs = attn MiB (L*H*T*T*4 bytes) + h+z MiB (hidden "
              "states (L+1)*T*D*4 and logits T*V*4)\n");
  return 0;
}
