// PackMatrices (decoder_weights.h): what happens to a matrix's source once
// it is packed, for the three kinds of head a checkpoint gives: a converted
// tied head (F16 / BF16 checkpoints), a converted untied one, and a tied one
// viewed in the mapped file (F32 checkpoints); and a BF16 head packed for
// the AVX2 kernel.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "service/model/decoder_weights.h"
#include "service/model/gemm.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

constexpr int64_t kVocab = 50, kWidth = 24;

// Packs `w` with `release` answering `mapped`; returns how often let_go ran.
int Pack(DecoderWeights& w, bool mapped) {
  int let_go = 0;
  PackMatrices(
      w, PackedType::kFloat32, [&](const at::Tensor&) { return mapped; }, [&] { ++let_go; });
  return let_go;
}

// The embedding rows `ids` as Embed reads them from the packed head.
std::vector<float> Gathered(const DecoderWeights& w, const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * kWidth);
  w.head_packed->GatherRows(ids.data(), static_cast<int64_t>(ids.size()), out.data());
  return out;
}

TEST(PackMatricesTest, AConvertedTiedHeadServesTheEmbeddingAndIsLetGo) {
  const at::Tensor original = at::randn({kVocab, kWidth});
  DecoderWeights w;
  w.embed = original.clone();  // owned memory, as a converted F16 / BF16 tensor
  w.head = w.embed;            // tied
  EXPECT_EQ(Pack(w, /*mapped=*/false), 1);
  ASSERT_NE(w.head_packed, nullptr);
  EXPECT_TRUE(w.embed_in_head);
  EXPECT_FALSE(w.embed.defined());  // no second float32 copy beside the packed head
  EXPECT_FALSE(w.head.defined());
  const std::vector<int64_t> ids = {0, 7, kVocab - 1, 7};
  const std::vector<float> got = Gathered(w, ids);
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      // Packing float32 is a copy: the rows come back bit for bit.
      EXPECT_EQ(got[r * kWidth + static_cast<size_t>(c)], original[ids[r]][c].item<float>())
          << "row " << ids[r] << " column " << c;
    }
  }
}

TEST(PackMatricesTest, AConvertedUntiedHeadIsLetGoAndTheEmbeddingKept) {
  DecoderWeights w;
  w.embed = at::randn({kVocab, kWidth});
  w.head = at::randn({kVocab, kWidth});
  EXPECT_EQ(Pack(w, /*mapped=*/false), 1);
  ASSERT_NE(w.head_packed, nullptr);
  EXPECT_FALSE(w.embed_in_head);
  EXPECT_TRUE(w.embed.defined());
  EXPECT_FALSE(w.head.defined());
}

TEST(PackMatricesTest, AMappedTiedHeadKeepsItsViewAndIsNotLetGo) {
  DecoderWeights w;
  w.embed = at::randn({kVocab, kWidth});
  w.head = w.embed;
  EXPECT_EQ(Pack(w, /*mapped=*/true), 0);  // its pages were dropped: the view stays
  EXPECT_TRUE(w.embed_in_head);
  EXPECT_TRUE(w.embed.defined());
  EXPECT_TRUE(w.head.defined());
}

TEST(PackMatricesTest, ConvertedProjectionsAreLetGoOneByOne) {
  DecoderWeights w;
  w.layers.resize(2);
  for (LayerWeights& l : w.layers) {
    l.qkv.weight = at::randn({3 * kWidth, kWidth});
    l.o.weight = at::randn({kWidth, kWidth});
  }
  EXPECT_EQ(Pack(w, /*mapped=*/false), 4);
  for (const LayerWeights& l : w.layers) {
    EXPECT_NE(l.qkv.packed, nullptr);
    EXPECT_FALSE(l.qkv.weight.defined());
    EXPECT_NE(l.o.packed, nullptr);
    EXPECT_FALSE(l.o.weight.defined());
  }
}

// On CPUs without AVX-512: a BF16 checkpoint's head packed for the AVX2
// kernel, its source let go; its panels serve a tied embedding's lookups
// with its values exactly; the projections are left as they are (each
// product packs its blocks).
TEST(PackMatricesTest, Bf16HeadPanelsTakeTheHeadAndServeATiedEmbedding) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  DecoderWeights w;
  w.embed = at::randn({kVocab, kWidth}).to(at::kBFloat16);  // owned, as a fused or converted copy
  w.head = w.embed;
  const at::Tensor values = w.embed.to(at::kFloat);
  w.layers.resize(1);
  w.layers[0].qkv.weight = at::randn({3 * kWidth, kWidth}).to(at::kBFloat16);
  w.layers[0].o.weight = at::randn({kWidth, kWidth});
  int let_go = 0;
  PackMatrices(
      w, PackedType::kBfloat16, [](const at::Tensor&) { return false; }, [&] { ++let_go; },
      PackLayout::kBf16HeadPanels);
  EXPECT_EQ(let_go, 1);  // the head, with the embedding it serves
  ASSERT_NE(w.head_packed, nullptr);
  EXPECT_FALSE(w.head_packed->FusesEpilogue());
  EXPECT_TRUE(w.embed_in_head);
  EXPECT_FALSE(w.embed.defined());
  EXPECT_FALSE(w.head.defined());
  EXPECT_EQ(w.layers[0].qkv.packed, nullptr);
  EXPECT_TRUE(w.layers[0].qkv.weight.defined());
  EXPECT_EQ(w.layers[0].o.packed, nullptr);
  EXPECT_TRUE(w.layers[0].o.weight.defined());
  const std::vector<int64_t> ids = {kVocab - 1, 0, 16, 3};
  const std::vector<float> got = Gathered(w, ids);
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      EXPECT_EQ(got[r * kWidth + static_cast<size_t>(c)], values[ids[r]][c].item<float>())
          << "row " << ids[r] << " column " << c;
    }
  }
}

}  // namespace
}  // namespace attnscope::model
