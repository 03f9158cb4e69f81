// The arithmetic of decoding, free of any model: the distribution a logits
// row stands for, the choice of the next token (greedy or sampled) and the
// rule that ends a generation. Used by generation.cc; tested on its own.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "service/engine/generation.h"

namespace attnscope::engine {

// softmax(logits) at temperature 1, summarized. Computed in double with
// log-sum-exp, so large logits neither overflow nor lose the small
// probabilities.
struct RowDistribution {
  std::vector<double> log_probs;  // (V): log p(i)
  double entropy_nats = 0;        // -sum p log p
};

// logits is (vocab) float32, vocab >= 1.
RowDistribution Distribution(const float* logits, int64_t vocab);

// Entropy in nats of softmax(logits) (vocab >= 1), without keeping the
// probabilities: for long prompts' per-position entropies.
double EntropyNats(const float* logits, int64_t vocab);

// entropy / log(vocab), in [0, 1]; 0 when vocab <= 1.
double NormalizedEntropy(double entropy_nats, int64_t vocab);

// The `n` most likely ids of `log_probs` (min(n, V) of them), most likely
// first; equal probabilities in increasing id order.
std::vector<int64_t> TopIds(const std::vector<double>& log_probs, int n);

// The id of the largest logit; the lowest such id on ties (vocab >= 1).
int64_t ArgMax(const float* logits, int64_t vocab);

// The next token under `sampling` (already validated): temperature 0 is
// ArgMax; otherwise logits / temperature, then the top_k most likely (when
// top_k > 0), then the smallest most-likely-first prefix whose mass is
// >= top_p (when 0 < top_p < 1; at least one token), renormalized, and one
// draw from `rng`. Always returns an id in [0, vocab).
int64_t ChooseToken(const float* logits, int64_t vocab, const SamplingSettings& sampling,
                    std::mt19937_64& rng);

// Why generation ends after emitting token `id` as new token number `index`
// (0-based): "eos" when stop_at_eos and eos_token_id >= 0 and id equals it,
// else "max_new_tokens" when index + 1 == max_new_tokens, else "" (go on).
std::string StopReasonAfter(int64_t id, int index, int64_t eos_token_id,
                            const GenerationSettings& settings);

}  // namespace attnscope::engine
