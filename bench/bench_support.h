// Shared by the benchmarks: a GPT-2-small-shaped checkpoint with random
// weights, per-configuration measurement in a child process, and memory
// readings from /proc.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "service/core/dtype.h"

namespace attnscope::bench {

// Writes config.json + model.safetensors (F16, or F32) for a GPT-2 with the
// given shape and random weights (normal, std 0.02; LayerNorm gains 1) into
// `dir`. Returns false (printing why) on failure.
bool WriteRandomGpt2(const std::string& dir, int64_t layers, int64_t heads, int64_t width,
                     int64_t vocab, int64_t positions, DType dtype = DType::kF16);

// Writes config.json + model.safetensors (F16) for a Llama (RMSNorm, rotary,
// grouped-query attention with `kv_heads` key/value heads, SiLU-gated MLP of
// width `intermediate`, untied head) with random weights into `dir`.
bool WriteRandomLlama(const std::string& dir, int64_t layers, int64_t heads, int64_t kv_heads,
                      int64_t width, int64_t intermediate, int64_t vocab, int64_t positions);

// Resident set size now and its peak so far (VmRSS, VmHWM), in MiB.
// n token ids drawn uniformly from 0..vocab-1 by a mt19937 seeded with 7:
// the same prompt in every run and every benchmark.
std::vector<int64_t> RandomIds(int64_t n, int64_t vocab);

// /proc/loadavg's 1, 5 and 15 minute figures, e.g. "0.52 1.10 1.38".
std::string LoadAverage();
// /proc/cpuinfo's first "model name" ("?" if none).
std::string CpuName();

double CurrentRssMiB();
double PeakRssMiB();
// A figure of /proc/self/status in MiB ("VmRSS:", "RssFile:", ...); 0 if absent.
double ProcStatusMiB(const char* key);

struct Measurement {
  bool ok = false;
  double seconds_per_run = 0;   // mean over the timed runs
  double median_seconds = 0;    // lower median of the timed runs
  double startup_rss_mib = 0;   // before `setup` (the process with its libraries)
  double startup_file_rss_mib = 0;  // of which file-backed (the libraries' pages)
  double baseline_rss_mib = 0;  // after loading, before the first run
  double peak_rss_mib = 0;      // VmHWM at the end
  // At the end: file-backed pages (the mapped checkpoint and the shared
  // libraries' code) and anonymous ones (the heap, tensors, stacks).
  double file_rss_mib = 0;
  double anon_rss_mib = 0;
};

// Runs `setup` then `run` (`repeats` timed times after one warm-up) in this
// process and measures them.
Measurement MeasureHere(const std::function<bool()>& setup, const std::function<bool()>& run,
                        int repeats);

// MeasureHere in a forked child, so that every configuration starts from the
// bench's own state and its heap growth is its own. Its peak RSS misses the
// shared libraries' pages the parent touched before the fork (a forked child
// maps file pages lazily: ~80 MiB of Debian's libtorch and its dependencies
// on the 2-core machine): where peak memory is the figure, measure in a
// fresh process (RunFreshProcess) instead.
Measurement MeasureInChild(const std::function<bool()>& setup, const std::function<bool()>& run,
                           int repeats);

// Runs this program again (/proc/self/exe: a fresh process whose peak RSS
// counts everything `attnscope` itself would, the libraries' pages included)
// with `args` and "--result-fd N", and reads back the `bytes` the child
// writes to that descriptor with ReturnResult. False if the child failed.
bool RunFreshProcess(const std::vector<std::string>& args, void* result, size_t bytes);
// RunFreshProcess for a child that returns a Measurement (ok false if it failed).
Measurement MeasureInFreshProcess(const std::vector<std::string>& args);
// In such a child: the descriptor after "--result-fd" in argv, or -1.
int ResultFd(int argc, char** argv);
// Writes `bytes` of `result` to `fd` and exits the child (0 when written).
[[noreturn]] void ReturnResult(int fd, const void* result, size_t bytes);

}  // namespace attnscope::bench
