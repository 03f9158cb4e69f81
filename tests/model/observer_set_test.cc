// How the runtime hands attention blocks to its observers: whole blocks to
// every observer, and head by head (Needs().attention_by_head) either from a
// kernel that calls StartAttention / PublishAttentionHead or, when a kernel
// does not, from PublishAttention itself.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "service/model/observer_set.h"

namespace attnscope::model {
namespace {

// Records every attention event it sees.
class Recording : public ForwardObserver {
 public:
  explicit Recording(bool by_head) : by_head_(by_head) {}
  ObserverNeeds Needs() const override {
    ObserverNeeds needs;
    needs.attention = true;
    needs.attention_by_head = by_head_;
    return needs;
  }
  void OnAttentionStart(const AttentionBlock& block) override {
    starts.push_back(block);
  }
  void OnAttentionHead(const AttentionBlock& block, int64_t head) override {
    std::lock_guard<std::mutex> lock(mu_);
    // The head's rows are in place by now: its first value tells which head.
    const int64_t rows = block.query_end - block.query_begin;
    heads.push_back({block.sequence, head});
    first_values.push_back(block.probs[head * rows * block.num_keys]);
    wholes_before_head.push_back(wholes.size());
  }
  void OnAttention(const AttentionBlock& block) override { wholes.push_back(block); }

  std::vector<AttentionBlock> starts, wholes;
  std::vector<std::pair<int, int64_t>> heads;
  std::vector<float> first_values;
  std::vector<size_t> wholes_before_head;

 private:
  bool by_head_;
  std::mutex mu_;
};

// (B = 2, H = 3, rows = 4, S = 5): entry (b, h, r, j) = 100 b + 10 h + r + j / 10.
at::Tensor Probs() {
  at::Tensor p = at::empty({2, 3, 4, 5});
  auto a = p.accessor<float, 4>();
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 5; ++j) a[b][h][r][j] = 100.0f * b + 10.0f * h + r + j / 10.0f;
  return p;
}

void ExpectEveryHeadOnce(const Recording& o, const at::Tensor& probs) {
  ASSERT_EQ(o.heads.size(), 6u);
  std::set<std::pair<int, int64_t>> seen(o.heads.begin(), o.heads.end());
  EXPECT_EQ(seen.size(), 6u);
  for (size_t i = 0; i < o.heads.size(); ++i) {
    const auto [b, h] = o.heads[i];
    EXPECT_EQ(o.first_values[i], probs[b][h][0][0].item<float>());
    EXPECT_EQ(o.wholes_before_head[i], 0u) << "a head came after its block's OnAttention";
  }
}

TEST(ObserverSetTest, PublishAttentionHandsHeadsToThoseWhoAskWhenTheKernelDidNot) {
  Recording by_head(true), whole(false);
  ObserverSet set({&by_head, &whole});
  EXPECT_TRUE(set.attention_by_head());
  const at::Tensor probs = Probs();
  const at::Tensor norms = at::rand({2, 3, 5});
  set.PublishAttention(/*layer=*/3, /*query_begin=*/8, probs, norms);

  ASSERT_EQ(by_head.starts.size(), 2u);
  for (int b = 0; b < 2; ++b) {
    const AttentionBlock& s = by_head.starts[b];
    EXPECT_EQ(s.sequence, b);
    EXPECT_EQ(s.layer, 3);
    EXPECT_EQ(s.query_begin, 8);
    EXPECT_EQ(s.query_end, 12);
    EXPECT_EQ(s.num_heads, 3);
    EXPECT_EQ(s.num_keys, 5);
    EXPECT_EQ(s.value_norms[0], norms[b][0][0].item<float>());
  }
  ExpectEveryHeadOnce(by_head, probs);
  ASSERT_EQ(by_head.wholes.size(), 2u);
  ASSERT_EQ(whole.wholes.size(), 2u);
  for (int b = 0; b < 2; ++b) {
    EXPECT_TRUE(by_head.wholes[b].heads_published);
    EXPECT_FALSE(whole.wholes[b].heads_published);
    EXPECT_EQ(whole.wholes[b].probs[0], probs[b][0][0][0].item<float>());
    EXPECT_EQ(whole.wholes[b].value_norms[4], norms[b][0][4].item<float>());
  }
  EXPECT_TRUE(whole.starts.empty());
  EXPECT_TRUE(whole.heads.empty());

  // The next block starts afresh.
  set.PublishAttention(4, 0, probs, at::Tensor());
  EXPECT_EQ(by_head.starts.size(), 4u);
  EXPECT_EQ(by_head.heads.size(), 12u);
  EXPECT_EQ(by_head.starts[2].value_norms, nullptr);
}

TEST(ObserverSetTest, AKernelPublishesEachHeadAsItIsComputed) {
  Recording by_head(true), whole(false);
  ObserverSet set({&by_head, &whole});
  at::Tensor probs = at::zeros({2, 3, 4, 5});
  set.StartAttention(1, 0, 2, 3, 4, 5, probs.data_ptr<float>(), at::Tensor());
  ASSERT_EQ(by_head.starts.size(), 2u);
  EXPECT_EQ(by_head.starts[1].probs, probs.data_ptr<float>() + 3 * 4 * 5);
  EXPECT_TRUE(by_head.heads.empty());
  const at::Tensor filled = Probs();
  for (int64_t bh = 5; bh >= 0; --bh) {  // any order
    probs[bh / 3][bh % 3].copy_(filled[bh / 3][bh % 3]);
    set.PublishAttentionHead(bh / 3, bh % 3);
  }
  set.PublishAttention(1, 0, probs, at::Tensor());
  ExpectEveryHeadOnce(by_head, filled);
  ASSERT_EQ(by_head.wholes.size(), 2u);
  EXPECT_TRUE(by_head.wholes[0].heads_published);
  ASSERT_EQ(whole.wholes.size(), 2u);
  EXPECT_FALSE(whole.wholes[0].heads_published);
  EXPECT_EQ(by_head.starts.size(), 2u) << "PublishAttention must not start the block again";
}

// Row entropies are asked for only with attention, and each sequence's
// block points at its own (H, rows) slice of the (B, H, rows) buffer.
TEST(ObserverSetTest, RowEntropiesReachEachSequencesBlock) {
  class WantsEntropy : public Recording {
   public:
    WantsEntropy() : Recording(true) {}
    ObserverNeeds Needs() const override {
      ObserverNeeds needs = Recording::Needs();
      needs.row_entropy = true;
      return needs;
    }
  };
  WantsEntropy wants;
  Recording plain(false);
  EXPECT_TRUE(ObserverSet({&wants, &plain}).needs().row_entropy);
  EXPECT_FALSE(ObserverSet({&plain}).needs().row_entropy);
  ObserverSet set({&wants, &plain});
  at::Tensor probs = Probs();
  std::vector<double> entropy(2 * 3 * 4);
  set.StartAttention(0, 0, 2, 3, 4, 5, probs.data_ptr<float>(), at::Tensor(), entropy.data());
  ASSERT_EQ(wants.starts.size(), 2u);
  EXPECT_EQ(wants.starts[1].row_entropy, entropy.data() + 3 * 4);
  for (int64_t bh = 0; bh < 6; ++bh) set.PublishAttentionHead(bh / 3, bh % 3);
  set.PublishAttention(0, 0, probs, at::Tensor(), entropy.data());
  ASSERT_EQ(plain.wholes.size(), 2u);
  EXPECT_EQ(plain.wholes[0].row_entropy, entropy.data());
  EXPECT_EQ(plain.wholes[1].row_entropy, entropy.data() + 3 * 4);
  set.PublishAttention(1, 0, probs, at::Tensor());  // a block without them
  EXPECT_EQ(plain.wholes[2].row_entropy, nullptr);
}

TEST(ObserverSetTest, WithoutHeadByHeadObserversNothingIsStarted) {
  Recording whole(false);
  ObserverSet set({&whole});
  EXPECT_FALSE(set.attention_by_head());
  at::Tensor probs = Probs();
  set.StartAttention(0, 0, 2, 3, 4, 5, probs.data_ptr<float>(), at::Tensor());
  set.PublishAttentionHead(0, 0);
  set.PublishAttention(0, 0, probs, at::Tensor());
  EXPECT_TRUE(whole.starts.empty());
  EXPECT_TRUE(whole.heads.empty());
  ASSERT_EQ(whole.wholes.size(), 2u);
  EXPECT_FALSE(whole.wholes[0].heads_published);
}

}  // namespace
}  // namespace attnscope::model
