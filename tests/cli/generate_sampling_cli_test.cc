// attnscope generate's sampling flags end to end (--temperature, --top-k,
// --top-p, --seed) on the bundled model: --top-k 1 (or a tiny --top-p) is
// greedy whatever the temperature; a seed gives the same tokens again and
// other seeds other tokens; each drawn token lies in the allowed set (seen
// from its probability and its 19 most likely alternatives); and the tokens
// equal the draw written out here (service/engine/sampling.h: logits /
// temperature, top-k, the top-p prefix, one 53-bit uniform per token from
// mt19937_64(seed) walked most likely first) over logits from one full pass
// through the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/engine/engine_test_util.h"

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

constexpr char kPrompt[] = "The cat sat on the mat. The cat";
constexpr int kNew = 16;

struct Sampling {
  std::string temperature = "0";
  int top_k = 0;
  std::string top_p = "0";
  int seed = 0;
};

json Generate(const Sampling& s) {
  auto r = RunCli({"generate", "--text", kPrompt, "--max-new-tokens", std::to_string(kNew),
                   "--ignore-eos", "--json", "--alternatives", "19", "--threads", "1",
                   "--temperature", s.temperature, "--top-k", std::to_string(s.top_k), "--top-p",
                   s.top_p, "--seed", std::to_string(s.seed)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

std::vector<int64_t> TokenIds(const json& out) {
  std::vector<int64_t> ids;
  if (!out.is_object()) return ids;
  for (const json& t : out["tokens"]) ids.push_back(t["id"].get<int64_t>());
  return ids;
}

TEST(GenerateSamplingCliTest, TopKOneOrATinyTopPIsGreedy) {
  const std::vector<int64_t> greedy = TokenIds(Generate({}));
  ASSERT_EQ(greedy.size(), static_cast<size_t>(kNew));
  EXPECT_EQ(TokenIds(Generate({"1.5", 1, "0", 3})), greedy);
  EXPECT_EQ(TokenIds(Generate({"2", 0, "1e-9", 4})), greedy);
  // Sampling at that temperature without a cut does not follow the greedy
  // choice (the comparison above could fail).
  EXPECT_NE(TokenIds(Generate({"1.5", 0, "0", 3})), greedy);
}

TEST(GenerateSamplingCliTest, SameSeedSameTokensOtherSeedsOtherTokens) {
  const json first = Generate({"1", 0, "0", 11});
  const json again = Generate({"1", 0, "0", 11});
  ASSERT_TRUE(first.is_object() && again.is_object());
  EXPECT_EQ(TokenIds(first), TokenIds(again));
  EXPECT_EQ(first["text"], again["text"]);
  int differing = 0;
  for (int seed : {12, 13, 14}) differing += TokenIds(Generate({"1", 0, "0", seed})) != TokenIds(first);
  EXPECT_EQ(differing, 3);
}

// At temperature 1 the reported probabilities are the sampling ones. top-k:
// fewer than k tokens are more likely than the drawn one. top-p: the tokens
// more likely than the drawn one hold less than p of the mass (the drawn one
// is in the smallest most-likely-first prefix reaching p).
TEST(GenerateSamplingCliTest, DrawsStayInTheAllowedSet) {
  int not_argmax = 0;
  for (int seed : {1, 2, 3}) {
    const json k3 = Generate({"1", 3, "0", seed});
    ASSERT_TRUE(k3.is_object());
    for (const json& t : k3["tokens"]) {
      int more_likely = 0;
      for (const json& a : t["alternatives"]) {
        more_likely += a["probability"].get<double>() > t["probability"].get<double>();
      }
      EXPECT_LT(more_likely, 3) << "seed " << seed << " token " << t["index"];
      not_argmax += more_likely > 0;
    }
    const json p04 = Generate({"1", 0, "0.4", seed});
    ASSERT_TRUE(p04.is_object());
    for (const json& t : p04["tokens"]) {
      double mass = 0;
      for (const json& a : t["alternatives"]) {
        if (a["probability"].get<double>() > t["probability"].get<double>()) {
          mass += a["probability"].get<double>();
        }
      }
      EXPECT_LT(mass, 0.4) << "seed " << seed << " token " << t["index"];
      not_argmax += mass > 0;
    }
  }
  // Some draws were not the most likely token: the sets were really sampled.
  EXPECT_GT(not_argmax, 10);
}

// The draw of sampling.h, written out: logits / T, most likely first (lower
// id first on ties), the first k, then the shortest prefix whose weight
// reaches p of the kept total, and u = (rng() >> 11) * 2^-53 * total walked
// through the kept weights.
int64_t ReferenceDraw(const float* logits, int64_t vocab, double temperature, int top_k,
                      double top_p, std::mt19937_64& rng) {
  std::vector<double> scaled(vocab);
  for (int64_t i = 0; i < vocab; ++i) scaled[i] = logits[i] / temperature;
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scaled[a] > scaled[b]; });
  size_t keep = top_k > 0 && top_k < vocab ? static_cast<size_t>(top_k) : order.size();
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    w[i] = std::exp(scaled[order[i]] - scaled[order[0]]);
    total += w[i];
  }
  if (top_p > 0 && top_p < 1) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += w[i];
      if (mass >= top_p * total) {
        keep = i + 1;
        total = mass;
        break;
      }
    }
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += w[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

TEST(GenerateSamplingCliTest, DrawsEqualTheSamplingRuleOverFullPasses) {
  absl::StatusOr<std::unique_ptr<engine::ModelBundle>> bundle =
      engine::LoadModelBundle(engine::testing::TinyModelDir());
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const engine::ModelBundle& b = **bundle;
  const int64_t vocab = b.config().vocab_size;
  struct Case {
    Sampling s;
    double temperature, top_p;
  };
  for (const Case& c : std::vector<Case>{{{"1.3", 5, "0", 5}, 1.3, 0},
                                         {{"0.8", 0, "0.6", 9}, 0.8, 0.6},
                                         {{"1", 8, "0.5", 21}, 1.0, 0.5}}) {
    const json out = Generate(c.s);
    ASSERT_TRUE(out.is_object());
    std::vector<int64_t> ids = out["input_ids"].get<std::vector<int64_t>>();
    const int64_t prompt = static_cast<int64_t>(ids.size());
    const std::vector<int64_t> drawn = TokenIds(out);
    ids.insert(ids.end(), drawn.begin(), drawn.end());
    // Row prompt - 1 + k of one full pass is what token k was drawn from.
    const model::FullRecorder full = engine::testing::FullPass(b, ids);
    std::mt19937_64 rng(static_cast<uint64_t>(c.s.seed));
    std::vector<int64_t> want;
    for (int64_t k = 0; k < static_cast<int64_t>(drawn.size()); ++k) {
      want.push_back(ReferenceDraw(full.logits().data() + (prompt - 1 + k) * vocab, vocab,
                                   c.temperature, c.s.top_k, c.top_p, rng));
    }
    EXPECT_EQ(drawn, want) << "temperature " << c.temperature << " top-k " << c.s.top_k
                           << " top-p " << c.top_p << " seed " << c.s.seed;
  }
}

}  // namespace
}  // namespace attnscope
