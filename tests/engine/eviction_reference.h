// An independent reference for KV-cache eviction (definitions.md, "KV-cache
// eviction"): the policies written out again here, fed the attention of full
// forward passes without a cache, one pass per step.
//  - original positions: step t is a full pass over x_0 .. x_t whose mask
//    lets each row r see what the cache held when x_r was fed (exact for any
//    depth: every cached key and value was computed under the same mask);
//  - cache positions: step t is a full pass over the kept tokens followed by
//    the new ones, at positions 0 .. |C_t| (exact only for a one-layer model,
//    whose keys and values depend on the token and its cache index alone).
// Used by the engine tests and by the CLI tests (stream-ppl, generate).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "service/core/safetensors.h"
#include "service/engine/model_bundle.h"
#include "service/model/recorder.h"
#include "tests/model/test_models.h"

namespace attnscope::engine::testing {

// A policy as definitions.md spells it: kind "full", "sinks", "window",
// "detected" or "heavy"; keep = S or K, recent = R.
struct RefPolicy {
  std::string kind = "full";
  int64_t keep = 0, recent = 0;

  // "full", "window:R", or "<kind>:<keep>+<recent>".
  static RefPolicy Parse(const std::string& text) {
    RefPolicy p;
    const size_t colon = text.find(':');
    if (colon == std::string::npos) return p;
    p.kind = text.substr(0, colon);
    const std::string sizes = text.substr(colon + 1);
    const size_t plus = sizes.find('+');
    if (plus == std::string::npos) {
      p.recent = std::stoll(sizes);
    } else {
      p.keep = std::stoll(sizes.substr(0, plus));
      p.recent = std::stoll(sizes.substr(plus + 1));
    }
    return p;
  }
  bool ranked() const { return kind == "detected" || kind == "heavy"; }
};

// One step of the reference stream.
struct RefStep {
  std::vector<float> logits;     // the step's last row (V)
  int64_t attended = 0;          // keys that row attended to: |C_t| + new tokens
  std::vector<int64_t> evicted;  // text positions evicted after the step, ascending
  int64_t cache_tokens = 0;      // cache size after the eviction
  // The closest ranking call of the step: score of the last older token kept
  // minus that of the first one evicted (infinity when nothing was ranked).
  double margin = std::numeric_limits<double>::infinity();
};

// Per-token scores, from the definitions: detected, the mean of M_t[j] over
// the queries that saw j; heavy, the sum of M_t[j] over the last max(R, 1)
// queries.
class RefScores {
 public:
  explicit RefScores(const RefPolicy& p) : policy_(p) {}

  void Observe(const std::map<int64_t, double>& row) {
    for (const auto& [j, m] : row) {
      sum_[j] += m;
      count_[j] += 1;
    }
    window_.push_back(row);
    while (static_cast<int64_t>(window_.size()) > std::max<int64_t>(1, policy_.recent)) {
      window_.pop_front();
    }
  }

  double Score(int64_t j) const {
    if (policy_.kind == "heavy") {
      double s = 0;
      for (const auto& row : window_) {
        auto it = row.find(j);
        if (it != row.end()) s += it->second;
      }
      return s;
    }
    auto it = sum_.find(j);
    return it == sum_.end() ? 0.0 : it->second / count_.at(j);
  }

 private:
  RefPolicy policy_;
  std::map<int64_t, double> sum_;
  std::map<int64_t, int64_t> count_;
  std::deque<std::map<int64_t, double>> window_;
};

// Cuts `cached` (ascending text positions) to what `p` keeps; returns the
// evicted positions and lowers *margin to the closest ranking call.
inline std::vector<int64_t> RefEvict(const RefPolicy& p, const RefScores& scores,
                                     std::vector<int64_t>& cached, double* margin) {
  const int64_t n = static_cast<int64_t>(cached.size());
  if (p.kind == "full" || n <= p.keep + p.recent) return {};
  const std::vector<int64_t> older(cached.begin(), cached.end() - p.recent);
  std::vector<int64_t> kept;
  if (p.ranked()) {
    std::vector<int64_t> ranked = older;  // ascending: ties stay with the earlier token
    std::stable_sort(ranked.begin(), ranked.end(), [&](int64_t a, int64_t b) {
      return scores.Score(a) > scores.Score(b);
    });
    const size_t k = static_cast<size_t>(std::min<int64_t>(p.keep, ranked.size()));
    if (k > 0 && k < ranked.size()) {
      *margin = std::min(*margin, scores.Score(ranked[k - 1]) - scores.Score(ranked[k]));
    }
    kept.assign(ranked.begin(), ranked.begin() + k);
  } else {
    const int64_t s = p.kind == "window" ? 0 : p.keep;
    kept.assign(older.begin(), older.begin() + std::min<int64_t>(s, older.size()));
  }
  kept.insert(kept.end(), cached.end() - p.recent, cached.end());
  std::sort(kept.begin(), kept.end());
  std::vector<int64_t> evicted;
  std::set_difference(cached.begin(), cached.end(), kept.begin(), kept.end(),
                      std::back_inserter(evicted));
  cached = kept;
  return evicted;
}

// Feeds ids[0 .. first-1] as one step (a prefill; first = 1 for stream-ppl),
// then every further id as a step of its own, under `p` with `positions`.
inline std::vector<RefStep> ReferenceStream(const ModelBundle& b, const std::vector<int64_t>& ids,
                                            int64_t first, const RefPolicy& p,
                                            model::CachePositions positions) {
  const model::ModelConfig& c = b.config();
  const int64_t n = static_cast<int64_t>(ids.size()), heads = c.num_heads, layers = c.num_layers;
  const bool original = positions == model::CachePositions::kOriginal;
  if (!original) {
    EXPECT_EQ(layers, 1) << "cache positions: exact for one layer only";
  }
  std::vector<uint8_t> hidden(n * n, 1);  // original: row r sees what the cache held
  std::vector<int64_t> cached;            // text positions, ascending
  RefScores scores(p);
  std::vector<RefStep> steps;
  for (int64_t a = 0; a < n;) {
    const int64_t end = a == 0 ? std::min(first, n) : a + 1;
    // The pass: its tokens, the text position of each, its mask.
    std::vector<int64_t> seq, seq_pos;
    model::ForwardOptions options;
    if (original) {
      for (int64_t r = a; r < end; ++r) {
        for (int64_t j : cached) hidden[r * n + j] = 0;
        for (int64_t j = a; j <= r; ++j) hidden[r * n + j] = 0;
      }
      for (int64_t j = 0; j < end; ++j) {
        seq.push_back(ids[j]);
        seq_pos.push_back(j);
      }
      options.hidden_keys.resize(end * end);
      for (int64_t r = 0; r < end; ++r) {
        for (int64_t j = 0; j < end; ++j) options.hidden_keys[r * end + j] = hidden[r * n + j];
      }
    } else {
      for (int64_t j : cached) {
        seq.push_back(ids[j]);
        seq_pos.push_back(j);
      }
      for (int64_t j = a; j < end; ++j) {
        seq.push_back(ids[j]);
        seq_pos.push_back(j);
      }
    }
    model::ObserverNeeds needs;
    needs.logits = true;
    needs.attention = true;
    model::FullRecorder rec(layers, heads, needs);
    const absl::Status s = b.model->Forward({seq}, options, {&rec});
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return steps;
    const int64_t t = static_cast<int64_t>(seq.size());
    // Each new row's attention, averaged over layers and heads, by text
    // position of the keys it could see.
    for (int64_t r = t - (end - a); r < t; ++r) {
      std::map<int64_t, double> row;
      for (int64_t k = 0; k <= r; ++k) {
        if (original && hidden[seq_pos[r] * n + seq_pos[k]]) continue;
        double m = 0;
        for (int64_t l = 0; l < layers; ++l) {
          for (int64_t h = 0; h < heads; ++h) {
            m += rec.attentions()[((l * heads + h) * t + r) * t + k];
          }
        }
        row[seq_pos[k]] = m / static_cast<double>(layers * heads);
      }
      scores.Observe(row);
    }
    RefStep step;
    const int64_t vocab = c.vocab_size;
    step.logits.assign(rec.logits().begin() + (t - 1) * vocab, rec.logits().begin() + t * vocab);
    for (int64_t j = a; j < end; ++j) cached.push_back(j);
    step.attended = static_cast<int64_t>(cached.size());
    step.evicted = RefEvict(p, scores, cached, &step.margin);
    step.cache_tokens = static_cast<int64_t>(cached.size());
    steps.push_back(std::move(step));
    a = end;
  }
  return steps;
}

// -log softmax(row)[next], in double.
inline double RefNll(const std::vector<float>& row, int64_t next) {
  double m = row[0];
  for (float x : row) m = std::max(m, static_cast<double>(x));
  double z = 0;
  for (float x : row) z += std::exp(x - m);
  return -(row[next] - m - std::log(z));
}

// The stream-ppl evaluation of ids under `p`: nll_t for t = 0 .. N-2, and
// the largest cache a step attended to; the closest ranking call in *margin.
struct RefEvaluation {
  std::vector<double> nll;
  int64_t max_cache_tokens = 0;
  double margin = std::numeric_limits<double>::infinity();
  std::vector<std::vector<int64_t>> evicted;  // per step
};

inline RefEvaluation ReferenceEvaluation(const ModelBundle& b, const std::vector<int64_t>& ids,
                                         const std::string& policy,
                                         model::CachePositions positions) {
  const std::vector<int64_t> fed(ids.begin(), ids.end() - 1);
  const std::vector<RefStep> steps = ReferenceStream(b, fed, 1, RefPolicy::Parse(policy), positions);
  RefEvaluation e;
  for (size_t t = 0; t < steps.size(); ++t) {
    e.nll.push_back(RefNll(steps[t].logits, ids[t + 1]));
    e.max_cache_tokens = std::max(e.max_cache_tokens, steps[t].attended);
    e.margin = std::min(e.margin, steps[t].margin);
    e.evicted.push_back(steps[t].evicted);
  }
  return e;
}

// Writes into `dir` a copy of the checkpoint in `from` with only its first
// layer ("num_hidden_layers": 1) and, when max_positions > 0, that many
// positions ("max_position_embeddings"). False (and a failure) when the
// config does not spell those keys as expected.
inline bool WriteOneLayerCopy(const std::string& from, const model::testing::ScratchDir& dir,
                              int max_positions = 0) {
  dir.CopyFrom(from);
  std::string config;
  {
    std::ifstream in(from + "/config.json");
    config.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto set_key = [&config](const std::string& key, int value) {
    const size_t at = config.find("\"" + key + "\":");
    if (at == std::string::npos) return false;
    const size_t begin = config.find_first_of("0123456789", at);
    const size_t stop = config.find_first_not_of("0123456789", begin);
    config.replace(begin, stop - begin, std::to_string(value));
    return true;
  };
  const bool layers_ok = set_key("num_hidden_layers", 1);
  const bool positions_ok = max_positions <= 0 || set_key("max_position_embeddings", max_positions);
  EXPECT_TRUE(layers_ok && positions_ok) << config;
  if (!layers_ok || !positions_ok) return false;
  dir.Write("config.json", config);
  std::vector<TensorToWrite> kept;
  for (auto& [name, tensor] : model::testing::ReadAllTensors(from + "/model.safetensors")) {
    const size_t at = name.find("layers.");
    if (at != std::string::npos && name.compare(at, 9, "layers.0.") != 0) continue;
    kept.push_back(tensor);
  }
  const absl::Status s = WriteSafetensors(dir.str() + "/model.safetensors", kept);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok();
}

}  // namespace attnscope::engine::testing
