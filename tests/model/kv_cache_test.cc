// The decoder's KV cache with eviction, on tensors: keys cached before the
// rotary embedding, evicted, then rotated by cache index (the runtime's way)
// must equal keys rotated at their text positions, evicted, then re-rotated
// by (cache index - text position) (StreamingLLM's way, computed here
// independently in double precision).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "service/model/kv_cache.h"
#include "service/model/rotary.h"
#include "tests/common/float_compare.h"

namespace attnscope::model {
namespace {

// Rotates pairs (i, i + dim/2) of the first `dim` entries of `x` by
// angle position * base^(-2i/dim), in double.
std::vector<double> RotateHalf(const std::vector<double>& x, int64_t dim, double base,
                               double position) {
  std::vector<double> out = x;
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = 1.0 / std::pow(base, (2.0 * i) / dim);
    const double a = position * inv_freq, c = std::cos(a), s = std::sin(a);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
  return out;
}

void ExpectRotateThenEvictEqualsEvictThenRotate(int64_t head_dim, int64_t rotary_dim) {
  RopeSpec rope;
  rope.kind = RopeKind::kDefault;
  rope.theta = 10000.0;
  rope.rotary_dim = rotary_dim;
  const int64_t kv = 2, tokens = 12;
  at::manual_seed(3);
  const at::Tensor keys = at::randn({1, kv, tokens, head_dim});  // un-rotated
  const at::Tensor values = at::randn({1, kv, tokens, head_dim});
  const std::vector<int64_t> kept = {0, 1, 2, 7, 9, 10, 11};

  // Evict then rotate by cache index: the runtime's cache.
  DecoderCache cache(1, CachePositions::kCache);
  cache.Append(0, keys, values);
  cache.Commit(tokens);
  ASSERT_TRUE(cache.Keep(kept).ok());
  EXPECT_EQ(cache.length(), 7);
  EXPECT_EQ(cache.next_position(), tokens);
  EXPECT_EQ(cache.positions(), kept);
  const auto empty = at::empty({1, kv, 0, head_dim});
  const at::Tensor cached = cache.Append(0, empty, empty).first;  // (1, KV, 7, d)
  const at::Tensor runtime =
      ApplyRotary(cached, MakeRotaryTables(rope, 0, static_cast<int64_t>(kept.size())));

  // Rotate at the text position, evict, re-rotate by index - position.
  double worst = 0;
  for (int64_t h = 0; h < kv; ++h) {
    for (size_t i = 0; i < kept.size(); ++i) {
      const at::Tensor k = keys[0][h][kept[i]].to(at::kDouble).contiguous();
      std::vector<double> x(k.data_ptr<double>(), k.data_ptr<double>() + head_dim);
      const std::vector<double> at_text = RotateHalf(x, rotary_dim, rope.theta, kept[i]);
      const std::vector<double> shifted = RotateHalf(
          at_text, rotary_dim, rope.theta, static_cast<double>(i) - static_cast<double>(kept[i]));
      const at::Tensor got = runtime[0][h][static_cast<int64_t>(i)].to(at::kDouble).contiguous();
      for (int64_t j = 0; j < head_dim; ++j) {
        worst = test::Worse(worst, test::AbsDiff(got.data_ptr<double>()[j], shifted[j]));
      }
    }
  }
  std::printf("head_dim %lld rotary_dim %lld: max |runtime - re-rotated| %.3g\n",
              static_cast<long long>(head_dim), static_cast<long long>(rotary_dim), worst);
  EXPECT_LE(worst, 1e-5);
}

TEST(KvCacheTest, RotateThenEvictEqualsEvictThenRotate) {
  ExpectRotateThenEvictEqualsEvictThenRotate(16, 16);
}

TEST(KvCacheTest, RotateThenEvictEqualsEvictThenRotatePartialRotary) {
  ExpectRotateThenEvictEqualsEvictThenRotate(16, 8);
}

TEST(KvCacheTest, OriginalPositionsKeepTextPositionsForTheMask) {
  DecoderCache cache(1, CachePositions::kOriginal);
  const at::Tensor k = at::randn({1, 1, 6, 4});
  cache.Append(0, k, k);
  cache.Commit(6);
  EXPECT_FALSE(cache.KeyPositions(1).defined());  // nothing evicted: 0 .. S-1
  ASSERT_TRUE(cache.Keep({0, 4, 5}).ok());
  EXPECT_EQ(cache.first_new_position(), 6);
  const at::Tensor p = cache.KeyPositions(2);
  ASSERT_TRUE(p.defined());
  EXPECT_EQ(std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel()),
            (std::vector<int64_t>{0, 4, 5, 6, 7}));
  EXPECT_EQ(cache.bytes(), 2 * 3 * 4 * 4);  // K + V, 3 tokens, 1 head of 4 floats
}

TEST(KvCacheTest, KeepRejectsIndicesThatAreNotStrictlyAscending) {
  DecoderCache cache(1, CachePositions::kCache);
  const at::Tensor k = at::randn({1, 1, 4, 4});
  cache.Append(0, k, k);
  cache.Commit(4);
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{1, 1}, std::vector<int64_t>{2, 0}, std::vector<int64_t>{4},
        std::vector<int64_t>{-1}}) {
    const absl::Status s = cache.Keep(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("strictly ascending in [0, 4)"), std::string::npos) << s;
  }
  EXPECT_EQ(cache.length(), 4);  // unchanged
}

}  // namespace
}  // namespace attnscope::model
