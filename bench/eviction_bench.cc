// Cached decoding speed and KV-cache size per eviction policy, on a
// Llama-shaped model with random weights (rotary, grouped-query attention),
// read through EvaluateEviction (one token per step, nll scored): every
// policy in one run, side by side, so the ratios are comparable even on a
// busy machine. Prints tokens/s over consecutive quarters of the text and
// the cache at the end of each quarter: flat for bounded policies, growing
// for full.
//
// Usage: eviction_bench [--tokens N] [--recent R] [--threads T] [--small]
//   defaults: N = 1024, R = 256 (window:R, sinks:4+(R-4), detected:4+(R-4),
//   heavy:4+(R-4)), 1 thread; --small: a 4-layer width-256 model instead of
//   the 8-layer width-512 one.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "service/engine/eviction_eval.h"
#include "service/engine/model_bundle.h"

namespace attnscope::bench {
namespace {

struct Options {
  int64_t tokens = 1024;
  int64_t recent = 256;
  int threads = 1;
  bool small = false;
};

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int64_t& out) {
      if (i + 1 >= argc) return false;
      out = std::atoll(argv[++i]);
      return out > 0;
    };
    int64_t threads = o.threads;
    if (a == "--tokens" && value(o.tokens)) continue;
    if (a == "--recent" && value(o.recent)) continue;
    if (a == "--threads" && value(threads)) {
      o.threads = static_cast<int>(threads);
      continue;
    }
    if (a == "--small") {
      o.small = true;
      continue;
    }
    std::fprintf(stderr, "usage: eviction_bench [--tokens N] [--recent R] [--threads T] [--small]\n");
    return false;
  }
  return o.tokens >= 8 && o.recent >= 8;
}

// Per quarter of the steps: seconds spent, and the cache at its end.
struct Quarter {
  double seconds = 0;
  int64_t steps = 0;
  int64_t cache_tokens = 0;
};

int Run(const Options& o) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           absl::StrCat("attnscope-eviction-bench-", getpid()))
                              .string();
  std::filesystem::create_directories(dir);
  const int64_t layers = o.small ? 4 : 8, width = o.small ? 256 : 512;
  const int64_t heads = o.small ? 4 : 8, kv = heads / 2, inter = o.small ? 688 : 1376;
  if (!WriteRandomLlama(dir, layers, heads, kv, width, inter, 32000, 4096)) return 1;
  model::SetComputeThreads(o.threads);
  auto bundle = engine::LoadModelBundle(dir);
  std::filesystem::remove_all(dir);
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  const std::vector<int64_t> ids = RandomIds(o.tokens + 1, 32000);
  const int64_t s = 4, r = o.recent - 4;
  const std::vector<std::string> names = {"full", absl::StrCat("window:", o.recent),
                                          absl::StrCat("sinks:", s, "+", r),
                                          absl::StrCat("detected:", s, "+", r),
                                          absl::StrCat("heavy:", s, "+", r)};
  std::printf("eviction_bench: llama-shaped, %lld layers, width %lld, %lld/%lld heads, "
              "%lld tokens, %d thread(s), cache positions\n",
              static_cast<long long>(layers), static_cast<long long>(width),
              static_cast<long long>(heads), static_cast<long long>(kv),
              static_cast<long long>(o.tokens), o.threads);
  std::printf("%-16s %10s %10s %10s %10s %10s  %s\n", "policy", "q1 tok/s", "q2 tok/s",
              "q3 tok/s", "q4 tok/s", "all tok/s", "cache tokens after q1..q4 (max KV MiB)");
  double full_last = 0;
  for (const std::string& name : names) {
    engine::EvictionEvalSettings settings;
    settings.policies = {*engine::ParseEvictionPolicy(name)};
    settings.positions = model::CachePositions::kCache;
    std::vector<Quarter> q(4);
    double last_seconds = 0;
    auto result = engine::EvaluateEviction(**bundle, ids, settings, [&](const engine::EvictionProgress& p) {
      const size_t k = std::min<size_t>(3, (p.steps_done - 1) * 4 / p.steps_total);
      q[k].seconds += p.seconds - last_seconds;
      q[k].steps += 1;
      q[k].cache_tokens = p.cache_tokens;
      last_seconds = p.seconds;
    });
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(result.status().message()).c_str());
      return 1;
    }
    const engine::EvictionRunResult& res = (*result)[0];
    std::printf("%-16s", name.c_str());
    for (const Quarter& x : q) std::printf(" %10.1f", x.seconds > 0 ? x.steps / x.seconds : 0.0);
    std::printf(" %10.1f  %lld %lld %lld %lld (%.2f)", res.tokens_per_second,
                static_cast<long long>(q[0].cache_tokens), static_cast<long long>(q[1].cache_tokens),
                static_cast<long long>(q[2].cache_tokens), static_cast<long long>(q[3].cache_tokens),
                res.max_cache_bytes / (1024.0 * 1024.0));
    const double last = q[3].seconds > 0 ? q[3].steps / q[3].seconds : 0.0;
    if (name == "full") {
      full_last = last;
      std::printf("\n");
    } else {
      std::printf("  q4 x%.2f of full\n", full_last > 0 ? last / full_last : 0.0);
    }
  }
  return 0;
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  attnscope::bench::Options o;
  if (!attnscope::bench::ParseOptions(argc, argv, o)) return 2;
  return attnscope::bench::Run(o);
}
