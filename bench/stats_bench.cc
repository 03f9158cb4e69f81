// The statistics alone, without the forward pass: every per-head attention
// statistic (with the received columns) over the blocks of a GPT-2-small-
// shaped pass, and the next-token statistics (entropy, surprisal, top-5) over
// its logit blocks, on synthetic softmax rows. Each is timed with the heads
// and rows split over the model's thread pool (core::ParallelFor, as
// attnscope analyze runs them) and on one thread, interleaved, median of the
// runs. Prints both and their ratio. The attention statistics are timed
// twice: taking each row's entropy from its probabilities (a log per entry:
// blocks replayed from tensors), and given the entropies, as the runtime's
// attention kernel hands them over from its softmax.
//
// Usage: stats_bench [--threads 2] [--tokens 1024] [--block 160] [--repeats 7]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "service/analysis/head_stats.h"
#include "service/analysis/token_stats.h"
#include "service/core/parallel.h"
#include "service/model/blas_info.h"
#include "service/model/language_model.h"

namespace attnscope::bench {
namespace {

constexpr int64_t kLayers = 12, kHeads = 12, kVocab = 50257, kLogitRows = 128;

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace attnscope::bench

int main(int argc, char** argv) {
  using namespace attnscope;
  using namespace attnscope::bench;
  int threads = 2, repeats = 7;
  int64_t tokens = 1024, block = 160;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    if (flag == "--tokens") tokens = std::atoll(argv[i + 1]);
    if (flag == "--block") block = std::atoll(argv[i + 1]);
    if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
  }
  threads = model::SetComputeThreads(threads);  // installs libtorch's pool for the statistics
  const core::ParallelForImpl pool = core::CurrentParallelForImpl();
  block = std::min(block, tokens);
  std::printf("CPU %s, %d threads, OpenBLAS kernels %s, load average at start %s\n",
              CpuName().c_str(), threads, model::BlasCoreName().c_str(), LoadAverage().c_str());

  // One block of causal softmax rows (H, block, T) per row offset, reused for every layer.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> probs(static_cast<size_t>(kHeads * block * tokens), 0.0f);
  std::vector<float> norms(static_cast<size_t>(kHeads * tokens));
  for (float& n : norms) n = 1.0f + std::abs(normal(rng));
  std::vector<float> logits(static_cast<size_t>(kLogitRows * kVocab));
  for (float& z : logits) z = normal(rng);
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kVocab);

  const auto fill_block = [&](int64_t begin, int64_t rows) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t r = 0; r < rows; ++r) {
        float* row = probs.data() + (h * rows + r) * tokens;
        const int64_t visible = begin + r + 1;
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) sum += row[j] = std::exp(normal(rng));
        for (int64_t j = 0; j < visible; ++j) row[j] = static_cast<float>(row[j] / sum);
        std::fill(row + visible, row + tokens, 0.0f);
      }
    }
  };
  // The blocks' contents do not matter for the time: one synthetic block per
  // offset would take long to make, so every block reuses the first one's rows.
  fill_block(0, block);
  // Each row's entropy, as the attention kernel's softmax hands it over
  // (ObserverNeeds::row_entropy): the statistics then take no log per entry.
  std::vector<double> row_entropy(static_cast<size_t>(kHeads * block));
  for (size_t i = 0; i < row_entropy.size(); ++i) {
    const float* row = probs.data() + i * static_cast<size_t>(tokens);
    row_entropy[i] = analysis::RowEntropy(row, tokens);
  }

  const auto attention_pass = [&](bool entropies_given) {
    analysis::HeadStatsAccumulator heads;
    heads.Begin(tokens);
    std::vector<double> columns(static_cast<size_t>(tokens), 0.0);
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int64_t begin = 0; begin < tokens; begin += block) {
        model::AttentionBlock b;
        b.layer = layer;
        b.num_heads = kHeads;
        b.num_keys = tokens;
        b.query_begin = begin;
        b.query_end = std::min(tokens, begin + block);
        b.probs = probs.data();
        b.value_norms = norms.data();
        if (entropies_given) b.row_entropy = row_entropy.data();
        heads.AddBlock(b, true, columns.data());
      }
    }
    return heads.Finish(kLayers, kHeads, true).attention_entropy[0][0];
  };
  const auto logits_pass = [&] {
    std::vector<double> nats, normalized, surprisal;
    std::vector<std::vector<analysis::Prediction>> top;
    analysis::NextTokenOutputs out{&nats, &normalized, &surprisal, &top};
    analysis::SizeNextTokenOutputs(tokens, ids, out);
    for (int64_t begin = 0; begin < tokens; begin += kLogitRows) {
      const int64_t rows = std::min(kLogitRows, tokens - begin);
      analysis::NextTokenRows(logits.data(), begin, rows, tokens, kVocab, ids, 5, out);
    }
    return nats[0];
  };

  std::vector<double> att_pool, att_one, fused_pool, fused_one, log_pool, log_one;
  double sink = 0;
  for (int r = 0; r <= repeats; ++r) {  // the first round warms up
    for (bool pooled : {true, false}) {
      core::SetParallelForImpl(pooled ? pool : nullptr);
      auto start = std::chrono::steady_clock::now();
      sink += attention_pass(false);
      const double att = Seconds(start);
      start = std::chrono::steady_clock::now();
      sink += attention_pass(true);
      const double fused = Seconds(start);
      start = std::chrono::steady_clock::now();
      sink += logits_pass();
      const double log = Seconds(start);
      if (r == 0) continue;
      (pooled ? att_pool : att_one).push_back(att);
      (pooled ? fused_pool : fused_one).push_back(fused);
      (pooled ? log_pool : log_one).push_back(log);
    }
  }
  core::SetParallelForImpl(pool);
  std::printf("GPT-2-small shape: %ld layers x %ld heads, T = %ld, attention blocks of %ld rows, "
              "logits in blocks of %ld rows (V = %ld); median of %d\n",
              static_cast<long>(kLayers), static_cast<long>(kHeads), static_cast<long>(tokens),
              static_cast<long>(block), static_cast<long>(kLogitRows), static_cast<long>(kVocab),
              repeats);
  std::printf("%-44s %10s %10s %8s\n", "", "pool ms", "1 thr ms", "1/pool");
  const auto line = [](const char* what, const std::vector<double>& pool_s,
                       const std::vector<double>& one_s) {
    const double p = Median(pool_s), o = Median(one_s);
    std::printf("%-44s %10.1f %10.1f %8.2f\n", what, p * 1000, o * 1000, o / p);
  };
  line("attention statistics (all layers)", att_pool, att_one);
  line("  the same, entropies given by the softmax", fused_pool, fused_one);
  line("next-token statistics", log_pool, log_one);
  std::printf("load average at the end %s (checksum %.3g)\n", LoadAverage().c_str(), sink);
  return 0;
}
