// Shared by the engine tests: the two real models, loaded once, and
// independent references computed from full (uncached) forward passes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "service/engine/model_bundle.h"
#include "service/model/recorder.h"

namespace attnscope::engine::testing {

inline std::string TinyModelDir() { return std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"; }
inline std::string HubFixtureDir() {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/gpt2-random-hub-layout";
}

// Loads `dir` once per test binary; nullptr (and a failure) if it cannot.
inline const ModelBundle* SharedBundle(const std::string& dir) {
  static auto* tiny = new absl::StatusOr<std::unique_ptr<ModelBundle>>(
      LoadModelBundle(TinyModelDir()));
  static auto* hub = new absl::StatusOr<std::unique_ptr<ModelBundle>>(
      LoadModelBundle(HubFixtureDir()));
  const auto* b = dir == TinyModelDir() ? tiny : hub;
  EXPECT_TRUE(b->ok()) << b->status();
  return b->ok() ? b->value().get() : nullptr;
}

// The full forward pass (no cache) over `ids`: logits (T, V) and, when
// asked, attentions (L, H, T, T).
inline model::FullRecorder FullPass(const ModelBundle& bundle, const std::vector<int64_t>& ids,
                                    bool attention = false) {
  model::ObserverNeeds needs;
  needs.logits = true;
  needs.attention = attention;
  model::FullRecorder rec(bundle.config().num_layers, bundle.config().num_heads, needs);
  const absl::Status s = bundle.model->Forward({ids}, {}, {&rec});
  EXPECT_TRUE(s.ok()) << s;
  return rec;
}

// log softmax of one logits row, written out plainly in double.
inline std::vector<double> ReferenceLogProbs(const float* row, int64_t vocab) {
  double m = row[0];
  for (int64_t i = 1; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += std::exp(row[i] - m);
  std::vector<double> lp(vocab);
  for (int64_t i = 0; i < vocab; ++i) lp[i] = row[i] - m - std::log(z);
  return lp;
}

inline double ReferenceEntropy(const std::vector<double>& lp) {
  double h = 0;
  for (double x : lp) h -= std::exp(x) * x;
  return h;
}

// First index of the largest value (the greedy choice).
inline int64_t ReferenceArgMax(const float* row, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace attnscope::engine::testing
