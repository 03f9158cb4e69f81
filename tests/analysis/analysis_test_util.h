// Helpers shared by the analysis tests: loading reference tensors, building
// small hand-made attention maps, comparing JSON documents number by number.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/analysis/prompt_analyzer.h"
#include "service/core/safetensors.h"
#include "tests/common/float_compare.h"

namespace attnscope::analysis::testing_util {

inline std::string DataPath(const std::string& relative) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/" + relative;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// Forward tensors that own their data.
struct OwnedTensors {
  int64_t num_layers = 0, num_heads = 0, num_tokens = 0, width = 0, vocab = 0;
  std::vector<float> attentions, hidden_states, logits, value_norms;

  ForwardTensors View() const {
    ForwardTensors t;
    t.num_layers = num_layers;
    t.num_heads = num_heads;
    t.num_tokens = num_tokens;
    t.width = width;
    t.vocab = vocab;
    t.attentions = attentions;
    t.hidden_states = hidden_states;
    t.logits = logits;
    t.value_norms = value_norms;
    return t;
  }
};

// attentions (L,H,T,T), hidden_states (L+1,T,D) and logits (T,V) of a
// reference safetensors file.
inline absl::StatusOr<OwnedTensors> LoadReference(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  const TensorRef* attentions = (*file)->Find("attentions");
  const TensorRef* hidden = (*file)->Find("hidden_states");
  const TensorRef* logits = (*file)->Find("logits");
  if (attentions == nullptr || hidden == nullptr || logits == nullptr ||
      attentions->shape.size() != 4 || hidden->shape.size() != 3 || logits->shape.size() != 2) {
    return absl::InvalidArgumentError(path + ": missing or misshapen reference tensors");
  }
  OwnedTensors t;
  t.num_layers = attentions->shape[0];
  t.num_heads = attentions->shape[1];
  t.num_tokens = attentions->shape[2];
  t.width = hidden->shape[2];
  t.vocab = logits->shape[1];
  auto a = ToFloat32(*attentions);
  auto h = ToFloat32(*hidden);
  auto z = ToFloat32(*logits);
  if (!a.ok()) return a.status();
  if (!h.ok()) return h.status();
  if (!z.ok()) return z.status();
  t.attentions = *std::move(a);
  t.hidden_states = *std::move(h);
  t.logits = *std::move(z);
  return t;
}

// A causal attention tensor (L,H,T,T) whose row i of every map is
// row_fn(l, h, i) (i+1 weights, normalized here), plus matching hidden states
// (norm of token i in state s = hidden_fn(s, i), width 2) and zero logits.
template <typename RowFn, typename HiddenFn>
OwnedTensors MakeTensors(int64_t layers, int64_t heads, int64_t tokens, int64_t vocab,
                         RowFn row_fn, HiddenFn hidden_fn) {
  OwnedTensors t;
  t.num_layers = layers;
  t.num_heads = heads;
  t.num_tokens = tokens;
  t.width = 2;
  t.vocab = vocab;
  t.attentions.assign(static_cast<size_t>(layers * heads * tokens * tokens), 0.0f);
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < tokens; ++i) {
        std::vector<double> w = row_fn(l, h, i);
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += w[static_cast<size_t>(j)];
        float* row = &t.attentions[static_cast<size_t>(((l * heads + h) * tokens + i) * tokens)];
        for (int64_t j = 0; j <= i; ++j) row[j] = static_cast<float>(w[static_cast<size_t>(j)] / sum);
      }
    }
  }
  for (int64_t s = 0; s <= layers; ++s) {
    for (int64_t i = 0; i < tokens; ++i) {
      // (0.6 n, 0.8 n) has norm n.
      const double n = hidden_fn(s, i);
      t.hidden_states.push_back(static_cast<float>(0.6 * n));
      t.hidden_states.push_back(static_cast<float>(0.8 * n));
    }
  }
  t.logits.assign(static_cast<size_t>(tokens * vocab), 0.0f);
  return t;
}

// Largest absolute difference between two JSON documents of the same shape;
// records a test failure (with the JSON path) for every structural mismatch
// and every `null` (NaN as the project writes it) on either side.
inline double MaxJsonDiff(const nlohmann::json& actual, const nlohmann::json& expected,
                          const std::string& path) {
  // `null` is how the project writes NaN: it matches nothing, not even null.
  if (expected.is_null() || actual.is_null()) {
    ADD_FAILURE() << path << ": " << actual.dump().substr(0, 80) << " vs expected "
                  << expected.dump().substr(0, 80) << " (null is a non-finite number)";
    return test::kNaN;
  }
  if (expected.is_number()) {
    if (!actual.is_number()) {
      ADD_FAILURE() << path << ": expected a number, got " << actual.dump();
      return INFINITY;
    }
    return test::AbsDiff(actual.get<double>(), expected.get<double>());
  }
  if (expected.is_array()) {
    if (!actual.is_array() || actual.size() != expected.size()) {
      ADD_FAILURE() << path << ": expected an array of " << expected.size() << ", got "
                    << actual.dump().substr(0, 200);
      return INFINITY;
    }
    double worst = 0.0;
    for (size_t i = 0; i < expected.size(); ++i) {
      worst = test::Worse(
          worst, MaxJsonDiff(actual[i], expected[i], absl::StrCat(path, "[", i, "]")));
    }
    return worst;
  }
  if (expected.is_object()) {
    double worst = 0.0;
    for (const auto& [key, value] : expected.items()) {
      if (!actual.contains(key)) {
        ADD_FAILURE() << path << ": missing key " << key;
        worst = INFINITY;
        continue;
      }
      worst = test::Worse(worst, MaxJsonDiff(actual[key], value, path + "." + key));
    }
    for (const auto& [key, value] : actual.items()) {
      if (!expected.contains(key)) ADD_FAILURE() << path << ": unexpected key " << key;
    }
    return worst;
  }
  EXPECT_EQ(actual, expected) << path;
  return 0.0;
}

}  // namespace attnscope::analysis::testing_util
