// The comparison of issue 10, side by side in one run, on the GPT-2-small
// shape (random F32 weights: 12 layers, 12 heads, width 768, vocabulary
// 50257): for each T,
//   - the FLOP floor: the model's FLOPs over the best float32 product rate
//     this machine reaches on the model's own matrix shapes (libtorch's BLAS,
//     and oneDNN's packed matmul and sgemm where the model uses oneDNN) (and, beside it, the sum of
//     the best sgemm time of every product the model does);
//   - the plain forward pass (logits only);
//   - the analysis with every statistic (PromptAnalyzer, as `attnscope
//     analyze` runs it), in the automatic query blocks and in blocks of 64;
//   - a plain PyTorch eager GPT-2 keeping every attention and hidden state
//     (bench/pytorch_eager_gpt2.py, same weights, ids and threads), when
//     /usr/bin/python3 has torch (Debian's python3-torch);
// with the ratios of the goals (analysis / plain <= 1.10, analysis / floor
// <= 1.15) and peak RSS minus the checkpoint's size (<= 150 MB at T = 1024).
// Every measurement runs in a fresh process (this program again): median of
// the timed runs after one warm-up. Each attnscope configuration runs in P
// such processes (--processes, default 3), the configurations interleaved,
// and the process with the median time is reported (the highest peak RSS of
// the P): on this VM a process now and then runs all its repeats ~1.7x
// slower, plain and analysis alike, which one process per configuration
// turned into ratios off by 0.5.
//
// Usage: perf_compare_bench [--threads N] [--repeats R] [--processes P]
//                           [--tokens 128,512,1024]
//                           [--floor-only | --analysis-only [--block N]]
//                           [--sweep-blocks 0,64,128 [--rounds N]]
// --sweep-blocks: instead of the comparison, the analysis at each T with each
// query block size (0: the automatic choice), with the heads taken inside the
// attention kernel ("kernel", the default) and as whole blocks after it
// ("after"), interleaved for N rounds (default 3), with each median over the
// rounds and its ratio to the first configuration's.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/sgemm_floor.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/model/attention_blocks.h"
#include "service/model/blas_info.h"
#include "service/model/gemm.h"
#include "service/model/language_model.h"
#include "service/model/tensor_cache.h"

namespace attnscope::bench {
namespace {

constexpr int64_t kLayers = 12, kHeads = 12, kWidth = 768, kVocab = 50257, kPositions = 1024;

struct Flags {
  int threads = 2;
  int repeats = 3;
  int processes = 3;  // --processes: fresh processes per attnscope configuration
  std::vector<int64_t> tokens = {128, 512, 1024};
  bool floor_only = false;  // just the sgemm floor (e.g. to compare OPENBLAS_CORETYPE values)
  // --analysis-only: one in-process analysis (automatic blocks) and its figures,
  // for profiling (perf record) and memory checks without child processes
  // (with --plain: the plain forward pass instead).
  bool analysis_only = false;
  int64_t block = 0;  // --block: the query block size of --analysis-only (0: automatic)
  bool plain = false;  // --plain: --analysis-only runs the plain forward pass instead
  std::string child;   // --child T,BLOCK,HEADS (internal): one MeasureAttnscope in this process
  std::vector<int64_t> sweep_blocks;  // --sweep-blocks
  int rounds = 3;
};

// Reads only the logits, block by block as the analyzer does: the plain
// forward pass.
class LogitsOnly : public model::ForwardObserver {
 public:
  model::ObserverNeeds Needs() const override { return {false, false, false, true, true}; }
  void OnLogitsBlock(int, int64_t, const float* logits, int64_t, int64_t, int64_t) override {
    first_ = logits[0];
  }

 private:
  float first_ = 0;
};

std::vector<int64_t> RandomIds(int64_t n) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pick(0, kVocab - 1);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) id = pick(rng);
  return ids;
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One configuration of attnscope in this process: plain (block < 0) or analysis.
Measurement MeasureAttnscopeHere(const std::string& dir, const Flags& f, int64_t tokens,
                                 int64_t block, bool heads_as_computed) {
  std::unique_ptr<model::LanguageModel> lm;
  const std::vector<int64_t> ids = RandomIds(tokens);
  auto setup = [&] {
    model::SetComputeThreads(f.threads);
    auto loaded = model::LoadLanguageModel(dir);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      return false;
    }
    lm = std::move(*loaded);
    return true;
  };
  auto run = [&] {
    if (block < 0) {
      LogitsOnly logits;
      return lm->Forward({ids}, {}, {&logits}).ok();
    }
    analysis::AnalysisOptions options;  // what engine::RunAnalysis asks for
    options.want_value_norms = true;
    options.input_ids = ids;
    options.heads_as_computed = heads_as_computed;
    analysis::PromptAnalyzer analyzer(options);
    model::ForwardOptions forward;
    forward.query_block_size = block;
    return lm->Forward({ids}, forward, {&analyzer}).ok() && analyzer.Finish().ok();
  };
  return MeasureHere(setup, run, f.repeats);
}

// The same in a fresh process (this program again with --child), so that its
// peak RSS counts what `attnscope analyze` would: the libraries' pages too.
Measurement MeasureAttnscope(const Flags& f, int64_t tokens, int64_t block,
                             bool heads_as_computed = true) {
  const std::string config = std::to_string(tokens) + "," + std::to_string(block) + "," +
                             (heads_as_computed ? "1" : "0");
  return MeasureInFreshProcess({"--threads", std::to_string(f.threads), "--repeats",
                                std::to_string(f.repeats), "--child", config});
}

// Of one configuration's processes: the one with the median time (the lower
// median), with the highest peak RSS among them.
Measurement MedianProcess(std::vector<Measurement> runs) {
  std::sort(runs.begin(), runs.end(), [](const Measurement& a, const Measurement& b) {
    return a.median_seconds < b.median_seconds;
  });
  Measurement m = runs[(runs.size() - 1) / 2];
  for (const Measurement& r : runs) {
    m.ok = m.ok && r.ok;
    m.peak_rss_mib = std::max(m.peak_rss_mib, r.peak_rss_mib);
  }
  return m;
}

struct Baseline {
  bool ok = false;
  double seconds = 0, peak_mib = 0, last_row_diff = 0;
  std::string why;
};

// The last row of attnscope's logits, to check that the baseline ran the same model.
std::vector<float> LastLogitsRow(const std::string& dir, const std::vector<int64_t>& ids,
                                 int threads) {
  std::vector<float> row(kVocab, 0.0f);
  int fds[2];
  if (pipe(fds) != 0) return row;
  if (fork() == 0) {
    close(fds[0]);
    model::SetComputeThreads(threads);
    auto lm = model::LoadLanguageModel(dir);
    struct Last : model::ForwardObserver {
      std::vector<float>* out;
      model::ObserverNeeds Needs() const override { return {false, false, false, true}; }
      void OnLogits(int, const float* z, int64_t t, int64_t v) override {
        out->assign(z + (t - 1) * v, z + t * v);
      }
    } last;
    last.out = &row;
    if (lm.ok()) (void)(*lm)->Forward({ids}, {}, {&last});
    ssize_t n = write(fds[1], row.data(), row.size() * sizeof(float));
    _exit(n == static_cast<ssize_t>(row.size() * sizeof(float)) ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(row.data());
  while (got < row.size() * sizeof(float)) {
    const ssize_t n = read(fds[0], bytes + got, row.size() * sizeof(float) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  wait(nullptr);
  return row;
}

Baseline MeasurePyTorch(const std::string& dir, const Flags& f, int64_t tokens) {
  Baseline b;
  const std::string script = std::string(ATTNSCOPE_BENCH_DIR) + "/pytorch_eager_gpt2.py";
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) {
    b.why = "skipped: /usr/bin/python3 has no torch/numpy (Debian: python3-torch python3-numpy)";
    return b;
  }
  const std::vector<int64_t> ids = RandomIds(tokens);
  const std::string tmp = std::filesystem::temp_directory_path().string() + "/attnscope-bench-" +
                          std::to_string(getpid()) + "-" + std::to_string(tokens);
  {
    std::ofstream out(tmp + ".ids");
    for (int64_t id : ids) out << id << ' ';
  }
  const std::string command = "/usr/bin/python3 " + script + " " + dir + " " + tmp + ".ids " +
                              std::to_string(f.threads) + " " + std::to_string(f.repeats) + " " +
                              tmp + ".logits > " + tmp + ".out";
  if (std::system(command.c_str()) != 0) {
    b.why = "failed: " + command;
    return b;
  }
  b.ok = std::sscanf(ReadFileText(tmp + ".out").c_str(), "seconds %lf peak_rss_mib %lf",
                     &b.seconds, &b.peak_mib) == 2;
  std::vector<float> theirs(kVocab, 0.0f);
  std::ifstream(tmp + ".logits", std::ios::binary)
      .read(reinterpret_cast<char*>(theirs.data()), kVocab * sizeof(float));
  const std::vector<float> ours = LastLogitsRow(dir, ids, f.threads);
  for (int64_t v = 0; v < kVocab; ++v) {
    const double d = std::fabs(static_cast<double>(ours[v]) - theirs[v]);
    if (!(d <= b.last_row_diff)) b.last_row_diff = d;  // keeps NaN
  }
  for (const char* ext : {".ids", ".logits", ".out"}) std::remove((tmp + ext).c_str());
  return b;
}

int AnalysisOnly(const std::string& dir, const Flags& f) {
  model::SetComputeThreads(f.threads);
  auto lm = model::LoadLanguageModel(dir);
  if (!lm.ok()) return 1;
  std::printf("loaded: VmRSS %.0f MiB (file pages %.0f, anonymous %.0f)\n", CurrentRssMiB(),
              ProcStatusMiB("RssFile:"), ProcStatusMiB("RssAnon:"));
  for (int64_t t : f.tokens) {
    const std::vector<int64_t> ids = RandomIds(t);
    for (int i = 0; i <= f.repeats; ++i) {
      analysis::AnalysisOptions options;
      options.want_value_norms = true;
      options.input_ids = ids;
      analysis::PromptAnalyzer analyzer(options);
      model::ForwardOptions forward;
      forward.query_block_size = f.block;
      const auto start = std::chrono::steady_clock::now();
      if (f.plain) {
        LogitsOnly logits;
        if (!(*lm)->Forward({ids}, forward, {&logits}).ok()) return 1;
      } else if (!(*lm)->Forward({ids}, forward, {&analyzer}).ok() || !analyzer.Finish().ok()) {
        return 1;
      }
      std::printf("T=%ld %s %.0f ms, VmHWM %.0f MiB\n", static_cast<long>(t),
                  f.plain ? "plain" : "analysis",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() *
                      1000,
                  PeakRssMiB());
      if (const model::TensorCache* cache = model::InstallTensorCache()) {
        const model::TensorCacheStats s = cache->Stats();
        std::printf("  tensor cache: peak live %.1f MiB, free %.1f MiB in %ld, hits %ld, misses "
                    "%ld, released %ld\n",
                    s.peak_live_bytes / 1048576.0, s.free_bytes / 1048576.0,
                    static_cast<long>(s.free_blocks), static_cast<long>(s.hits),
                    static_cast<long>(s.misses), static_cast<long>(s.released));
        cache->ResetPeak();
      }
    }
  }
  return 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[(v.size() - 1) / 2];
}

// --sweep-blocks: the analysis with each block size, interleaved in rounds.
int SweepBlocks(const std::string& dir, const Flags& f) {
  std::printf("%5s %6s %6s %-6s %9s %9s %8s %9s\n", "T", "block", "rows", "heads", "median",
              "best", "ratio", "peak MiB");
  for (int64_t t : f.tokens) {
    // Each block size with the heads taken as computed ("kernel") and as
    // whole blocks after the kernel ("after").
    const size_t n = 2 * f.sweep_blocks.size();
    std::vector<std::vector<double>> seconds(n);
    std::vector<double> peak(n, 0.0);
    for (int round = 0; round < f.rounds; ++round) {
      for (size_t i = 0; i < n; ++i) {
        const Measurement m = MeasureAttnscope(f, t, f.sweep_blocks[i / 2], i % 2 == 0);
        if (!m.ok) return 1;
        seconds[i].push_back(m.median_seconds);
        peak[i] = std::max(peak[i], m.peak_rss_mib);
      }
    }
    const double first = Median(seconds[0]);
    for (size_t i = 0; i < n; ++i) {
      const double median = Median(seconds[i]);
      const int64_t block = f.sweep_blocks[i / 2];
      std::printf("%5ld %6ld %6ld %-6s %9.0f %9.0f %8.3f %9.0f\n", static_cast<long>(t),
                  static_cast<long>(block),
                  static_cast<long>(model::QueryBlockRows(block, kHeads, t, t)),
                  i % 2 == 0 ? "kernel" : "after", median * 1000,
                  *std::min_element(seconds[i].begin(), seconds[i].end()) * 1000,
                  median / first, peak[i]);
    }
    std::fflush(stdout);
  }
  std::printf("load average at the end %s\n", LoadAverage().c_str());
  return 0;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--floor-only") f.floor_only = true;
    if (flag == "--analysis-only") f.analysis_only = true;
    if (flag == "--plain") f.plain = true;
    if (flag == "--child" && has_value) f.child = argv[++i];
    if (flag == "--threads" && has_value) f.threads = std::atoi(argv[++i]);
    if (flag == "--repeats" && has_value) f.repeats = std::atoi(argv[++i]);
    if (flag == "--processes" && has_value) f.processes = std::max(1, std::atoi(argv[++i]));
    if (flag == "--block" && has_value) f.block = std::atoll(argv[++i]);
    if (flag == "--rounds" && has_value) f.rounds = std::max(1, std::atoi(argv[++i]));
    if ((flag == "--tokens" || flag == "--sweep-blocks") && has_value) {
      std::vector<int64_t>& list = flag == "--tokens" ? f.tokens : f.sweep_blocks;
      list.clear();
      std::stringstream s(argv[++i]);
      for (std::string t; std::getline(s, t, ',');) list.push_back(std::atoll(t.c_str()));
    }
  }
  return f;
}

// The FMA peak, how much of it the best product reached, and how much of
// it the analysis must reach end to end to be within 1.15x of the floor.
std::string PeakNote(const FloorResult& floor, const Flags& f) {
  if (floor.peak_gflops <= 0) return "FMA peak not measured (neither AVX-512 nor AVX2)";
  char text[240];
  std::snprintf(text, sizeof text,
                "FMA peak %.0f GFLOP/s (%s, %d threads): the best product reached %.0f%% of it, "
                "the goal (1.15x the floor) asks for %.0f%% end to end",
                floor.peak_gflops, floor.peak_isa.c_str(), f.threads,
                100 * floor.best_gflops / floor.peak_gflops,
                100 * floor.best_gflops / 1.15 / floor.peak_gflops);
  return text;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope::bench;
  const Flags f = ParseFlags(argc, argv);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "attnscope-bench-gpt2-small-f32").string();
  if (const int fd = ResultFd(argc, argv); fd >= 0) {  // a child of MeasureAttnscope
    long tokens = 0, block = 0;
    int heads = 1;
    Measurement m;
    if (std::sscanf(f.child.c_str(), "%ld,%ld,%d", &tokens, &block, &heads) == 3) {
      m = MeasureAttnscopeHere(dir, f, tokens, block, heads != 0);
    }
    ReturnResult(fd, &m, sizeof m);
  }
  std::filesystem::create_directories(dir);
  if (!std::filesystem::exists(dir + "/model.safetensors") &&
      !WriteRandomGpt2(dir, kLayers, kHeads, kWidth, kVocab, kPositions, attnscope::DType::kF32)) {
    return 1;
  }
  const double checkpoint_mib =
      static_cast<double>(std::filesystem::file_size(dir + "/model.safetensors")) / (1 << 20);
  std::printf("CPU %s, %d threads, OpenBLAS kernels %s, load average at start %s\n",
              CpuName().c_str(), f.threads, attnscope::model::BlasCoreName().c_str(),
              LoadAverage().c_str());
  std::printf("matrix products: %s\n", attnscope::model::GemmDescription().c_str());
  std::printf("GPT-2-small shape, random F32 weights (%s, %.0f MiB); median of %d runs after a "
              "warm-up in a fresh process, each configuration in %d processes interleaved (the "
              "median one; the highest peak)\n\n",
              dir.c_str(), checkpoint_mib, f.repeats, f.processes);
  std::printf("%5s %9s %9s %9s %9s %9s %9s | %7s %7s %7s %8s | %8s %8s %8s\n", "T", "floor",
              "by-shape", "plain", "analysis", "anl-b64", "pytorch", "anl/pln", "anl/flr",
              "pln/flr", "pt/anl", "peak", "-ckpt", "pt peak");
  std::printf("%5s %9s %9s %9s %9s %9s %9s | %7s %7s %7s %8s | %8s %8s %8s\n", "", "ms", "ms", "ms",
              "ms", "ms", "ms", "", "<=1.10", "", "", "MiB", "MiB", "MiB");
  if (f.analysis_only) return AnalysisOnly(dir, f);
  if (!f.sweep_blocks.empty()) return SweepBlocks(dir, f);
  std::vector<std::string> notes;
  for (int64_t t : f.tokens) {
    const FloorResult floor = MeasureSgemmFloor(
        {kLayers, kHeads, kWidth, 4 * kWidth, kVocab}, t, f.threads);
    if (f.floor_only) {
      std::printf("T=%ld floor %.0f ms, by shape %.0f ms, best %.0f GFLOP/s on %s; %s\n",
                  static_cast<long>(t), floor.floor_seconds * 1000, floor.by_shape_seconds * 1000,
                  floor.best_gflops, floor.best_shape.c_str(), PeakNote(floor, f).c_str());
      continue;
    }
    std::vector<Measurement> plains, wholes, blocks64;
    for (int p = 0; p < f.processes; ++p) {
      plains.push_back(MeasureAttnscope(f, t, -1));
      wholes.push_back(MeasureAttnscope(f, t, 0));
      blocks64.push_back(MeasureAttnscope(f, t, 64));
    }
    const Measurement plain = MedianProcess(plains);
    const Measurement whole = MedianProcess(wholes);
    const Measurement blocks = MedianProcess(blocks64);
    const Baseline pt = MeasurePyTorch(dir, f, t);
    const double ms = 1000.0;
    std::printf("%5ld %9.0f %9.0f %9.0f %9.0f %9.0f %9s | %7.3f %7.3f %7.3f %8s | %8.0f %8.0f %8s\n",
                static_cast<long>(t), floor.floor_seconds * ms, floor.by_shape_seconds * ms,
                plain.median_seconds * ms, whole.median_seconds * ms, blocks.median_seconds * ms,
                pt.ok ? std::to_string(static_cast<int>(pt.seconds * ms)).c_str() : "-",
                whole.median_seconds / plain.median_seconds,
                whole.median_seconds / floor.floor_seconds,
                plain.median_seconds / floor.floor_seconds,
                pt.ok ? std::to_string(pt.seconds / whole.median_seconds).substr(0, 5).c_str() : "-",
                whole.peak_rss_mib, whole.peak_rss_mib - checkpoint_mib,
                pt.ok ? std::to_string(static_cast<int>(pt.peak_mib)).c_str() : "-");
    std::fflush(stdout);
    const auto percent_of_peak = [&](double seconds) {
      return std::to_string(static_cast<int>(
                 std::lround(100 * floor.model_gflop / seconds / floor.peak_gflops))) +
             "%";
    };
    notes.push_back("T=" + std::to_string(t) + ": best sgemm " +
                    std::to_string(static_cast<int>(floor.best_gflops)) + " GFLOP/s on " +
                    floor.best_shape + "; " + PeakNote(floor, f) +
                    (floor.peak_gflops > 0 ? "; the model's FLOPs at " +
                                                 percent_of_peak(plain.median_seconds) +
                                                 " of the peak in the plain pass, " +
                                                 percent_of_peak(whole.median_seconds) +
                                                 " in the analysis"
                                           : std::string()) +
                    "; model " + std::to_string(static_cast<int>(floor.model_gflop)) +
                    " GFLOP; the analysis's process before loading the model " +
                    std::to_string(static_cast<int>(whole.startup_rss_mib)) + " MiB (" +
                    std::to_string(static_cast<int>(whole.startup_file_rss_mib)) +
                    " of it the libraries' file pages), its peak minus that and the "
                    "checkpoint " +
                    std::to_string(static_cast<int>(whole.peak_rss_mib - whole.startup_rss_mib -
                                                    checkpoint_mib)) +
                    "; peak MiB " +
                    "plain " + std::to_string(static_cast<int>(plain.peak_rss_mib)) +
                    " (after loading " + std::to_string(static_cast<int>(plain.baseline_rss_mib)) +
                    ")" +
                    ", analysis blocks of 64 " +
                    std::to_string(static_cast<int>(blocks.peak_rss_mib)) +
                    "; the analysis at its end: file pages " +
                    std::to_string(static_cast<int>(whole.file_rss_mib)) +
                    (whole.file_rss_mib > checkpoint_mib
                         ? " (" + std::to_string(static_cast<int>(whole.file_rss_mib -
                                                                  checkpoint_mib)) +
                               " besides the checkpoint: libraries)"
                         : std::string(" (libraries and what is left of the checkpoint: its "
                                       "packed matrices' pages were dropped)")) +
                    ", anonymous " +
                    std::to_string(static_cast<int>(whole.anon_rss_mib)) +
                    (pt.ok ? "; PyTorch last logits row max |diff| " +
                                 std::to_string(pt.last_row_diff)
                           : "; PyTorch " + pt.why));
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  std::printf("load average at the end %s\n", LoadAverage().c_str());
  std::printf("floor: model FLOPs / best rate; by-shape: sum of each product's best sgemm time; "
              "analysis: every statistic, automatic query blocks (anl-b64: blocks of 64); peak: "
              "VmHWM of the analysis; -ckpt: minus the checkpoint file\n");
  return 0;
}
