// The viewer page's embedded data: every head's lower triangle quantised per
// row to 8 bits, as dense or sparse rows (at most K keys), deflated and
// base64-encoded (decoded here independently from the documented format),
// the thumbnails, the per-token statistics, and token text that cannot break
// out of its <script>.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"
#include "service/engine/viewer_html.h"

namespace attnscope::engine {
namespace {

constexpr char kOpen[] = R"(<script type="application/json" id="attnscope-data">)";

nlohmann::json EmbeddedData(const std::string& page) {
  const size_t begin = page.find(kOpen);
  EXPECT_NE(begin, std::string::npos);
  const size_t start = begin + sizeof(kOpen) - 1;
  const size_t end = page.find("</script>", start);
  return nlohmann::json::parse(page.substr(start, end - start));
}

ViewerData Make(std::string title, std::string prompt, std::vector<std::string> tokens,
                int64_t layers, int64_t heads, int64_t num_tokens, absl::Span<const float> a) {
  ViewerData d;
  d.title = std::move(title);
  d.prompt_text = std::move(prompt);
  d.tokens = std::move(tokens);
  d.num_layers = layers;
  d.num_heads = heads;
  d.num_tokens = num_tokens;
  d.attentions = a;
  return d;
}

// Base64, then zlib's uncompress: the bytes the page's script decodes.
std::string Unpack(const std::string& b64, size_t expected_size) {
  std::string packed;
  EXPECT_TRUE(absl::Base64Unescape(b64, &packed));
  std::string raw(expected_size + 16, '\0');
  uLongf size = static_cast<uLongf>(raw.size());
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &size,
                       reinterpret_cast<const Bytef*>(packed.data()),
                       static_cast<uLong>(packed.size())),
            Z_OK);
  raw.resize(size);
  return raw;
}

// One head of the page as the documented format describes it: a T x T
// matrix (zeros above the diagonal and for keys a sparse row leaves out), and
// the number of levels each row stored.
struct DecodedHead {
  std::vector<float> weights;
  std::vector<float> maxima;
  std::vector<int64_t> stored;  // per row: keys stored (dense: i + 1)
  bool ok = false;
};
DecodedHead Decode(const std::string& b64, int64_t T) {
  DecodedHead out;
  const std::string raw = Unpack(b64, static_cast<size_t>(T * (T + 1) / 2 + 8 * T));
  if (raw.size() < static_cast<size_t>(4 * T)) return out;
  const size_t end = raw.size() - static_cast<size_t>(4 * T);
  out.maxima.resize(static_cast<size_t>(T));
  std::memcpy(out.maxima.data(), raw.data() + end, 4 * static_cast<size_t>(T));
  out.weights.assign(static_cast<size_t>(T * T), 0.0f);
  const auto byte = [&](size_t at) { return static_cast<unsigned char>(raw[at]); };
  size_t o = 0;
  for (int64_t i = 0; i < T; ++i) {
    if (o >= end) return out;
    const double scale = out.maxima[static_cast<size_t>(i)] / 255.0;
    if (byte(o) == 0) {
      for (int64_t j = 0; j <= i; ++j) out.weights[i * T + j] = static_cast<float>(byte(o + 1 + j) * scale);
      out.stored.push_back(i + 1);
      o += static_cast<size_t>(i + 2);
    } else {
      if (byte(o) != 1) return out;
      const size_t c = byte(o + 1) | (byte(o + 2) << 8), keys = o + 3, levels = keys + 2 * c;
      for (size_t k = 0; k < c; ++k) {
        const size_t j = byte(keys + 2 * k) | (byte(keys + 2 * k + 1) << 8);
        if (static_cast<int64_t>(j) > i) return out;
        out.weights[i * T + static_cast<int64_t>(j)] = static_cast<float>(byte(levels + k) * scale);
      }
      out.stored.push_back(static_cast<int64_t>(c));
      o = levels + c;
    }
  }
  out.ok = o == end;
  return out;
}

// Causal rows that sum to 1, with one weight far below the row's largest.
std::vector<float> RandomAttention(int64_t L, int64_t H, int64_t T) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> a(L * H * T * T, 0.0f);
  for (int64_t r = 0; r < L * H * T; ++r) {
    const int64_t i = r % T;
    float* row = a.data() + r * T;
    float sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += row[j] = j == 1 ? 3e-8f : u(rng);
    for (int64_t j = 0; j <= i; ++j) row[j] /= sum;
  }
  return a;
}

// Sharp causal rows, as trained heads have: a sink at key 0, a few keys of
// weight, and a long tail of tiny weights (most quantise to level 0; every
// `dense_every`-th row has a tail of weights that do not).
std::vector<float> SharpAttention(int64_t L, int64_t H, int64_t T, int64_t dense_every) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> a(L * H * T * T, 0.0f);
  for (int64_t r = 0; r < L * H * T; ++r) {
    const int64_t i = r % T;
    float* row = a.data() + r * T;
    const bool dense_tail = r % dense_every == 0;
    float sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      float w = dense_tail ? 0.05f + 0.05f * u(rng) : 1e-5f * u(rng);
      if (j == 0) w = 5.0f;
      if (j % 17 == 3) w += 1.0f + u(rng);
      sum += row[j] = w;
    }
    for (int64_t j = 0; j <= i; ++j) row[j] /= sum;
  }
  return a;
}

// Row i's error bound: m_i / 510 for a kept key; a key a truncated row left
// out reads 0 and is at most the K-th largest weight of its row.
void ExpectWithinTheDocumentedError(const DecodedHead& d, const float* head, int64_t T,
                                    int64_t K, const std::string& what, double* worst) {
  ASSERT_TRUE(d.ok) << what << ": the rows do not decode";
  for (int64_t i = 0; i < T; ++i) {
    const float* row = head + i * T;
    const float m = *std::max_element(row, row + i + 1);
    EXPECT_EQ(d.maxima[static_cast<size_t>(i)], m) << what << " row " << i;
    std::vector<float> sorted(row, row + i + 1);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<size_t>(std::min(K, i + 1) - 1)];
    for (int64_t j = 0; j <= i; ++j) {
      const double decoded = d.weights[static_cast<size_t>(i * T + j)];
      const double err = std::fabs(decoded - row[j]);
      const bool dropped = decoded == 0 && row[j] <= kth;
      if (!(err <= m * kViewerRowQuantisationError + 1e-7) && !dropped) {
        ADD_FAILURE() << what << " [" << i << "][" << j << "] decoded " << decoded << ", true "
                      << row[j];
        return;
      }
      if (worst != nullptr) *worst = std::max(*worst, err / m);
    }
    for (int64_t j = i + 1; j < T; ++j) EXPECT_EQ(d.weights[static_cast<size_t>(i * T + j)], 0.0f);
  }
}

// The pieces of every head of (L, H, T, T) float32 attentions, cut every
// `cut` bytes (not a multiple of a row, nor of a float).
void AddAll(ViewerPageBuilder& builder, const std::vector<float>& a, int64_t L, int64_t H,
            int64_t T, int64_t cut) {
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      const char* data = reinterpret_cast<const char*>(a.data() + (l * H + h) * T * T);
      for (int64_t at = 0; at < T * T * 4; at += cut) {
        TensorPiece p;
        p.layer = l;
        p.head = h;
        p.rows = p.cols = T;
        p.offset = at;
        p.data = data + at;
        p.size = std::min(cut, T * T * 4 - at);
        ASSERT_TRUE(builder.Add(p).ok()) << l << "." << h << " at " << at;
      }
    }
  }
}

TEST(ViewerHtmlTest, HeadsDecodeWithinTheDocumentedError) {
  const int64_t L = 2, H = 3, T = 57;
  const std::vector<float> a = RandomAttention(L, H, T);
  std::vector<std::string> tokens(T, "t");
  tokens[1] = " b";
  ViewerData data = Make("model", "a prompt", tokens, L, H, T, a);
  auto page = RenderViewerHtml(data);
  ASSERT_TRUE(page.ok()) << page.status();
  const nlohmann::json d = EmbeddedData(*page);
  EXPECT_EQ(d["layers"], L);
  EXPECT_EQ(d["heads"], H);
  EXPECT_EQ(d["tokens"][1], " b");
  EXPECT_EQ(d["format"], "q8row-sparse-deflate-b64");
  EXPECT_EQ(d["row_keys"], T);
  EXPECT_EQ(d["truncated_rows"], 0);
  ASSERT_EQ(d["attn"].size(), static_cast<size_t>(L * H));
  double worst = 0;
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      const float* head = a.data() + (l * H + h) * T * T;
      const DecodedHead decoded = Decode(d["attn"][l * H + h].get<std::string>(), T);
      ExpectWithinTheDocumentedError(decoded, head, T, T, std::to_string(l) + "." + std::to_string(h), &worst);
      EXPECT_DOUBLE_EQ(d["sink"][l][h].get<double>(), head[(T - 1) * T]);
    }
  }
  EXPECT_GT(worst, 0.0) << "8 bits cannot be exact on random weights";
  // No address at all.
  EXPECT_EQ(page->find("http"), std::string::npos);
  EXPECT_EQ(page->find("src="), std::string::npos);
}

// Sharp rows are stored sparse and exactly (to the level); with K keys a
// row, a row of more levels keeps its K largest weights, the page stays
// within ViewerPageBound whatever the weights, and says how many rows it cut.
TEST(ViewerHtmlTest, SparseRowsKeepTheLargestKeysWithinTheBound) {
  const int64_t L = 1, H = 2, T = 300, K = 20;
  const std::vector<float> a = SharpAttention(L, H, T, 5);
  ViewerData data = Make("m", "", std::vector<std::string>(T, "x"), L, H, T, {});
  for (int64_t keys : {int64_t{0}, K}) {
    ViewerPageBuilder builder(HeadSelection::All(L, H), T, keys);
    AddAll(builder, a, L, H, T, 4 * T);
    auto page = builder.Render(data);
    ASSERT_TRUE(page.ok()) << page.status();
    const nlohmann::json d = EmbeddedData(*page);
    const int64_t k = keys == 0 ? T : keys;
    EXPECT_EQ(d["row_keys"], k);
    EXPECT_LE(static_cast<int64_t>(page->size()), ViewerPageBound(L * H, T, k));
    int64_t sparse = 0, cut = 0;
    for (int64_t h = 0; h < H; ++h) {
      const DecodedHead decoded = Decode(d["attn"][h].get<std::string>(), T);
      ExpectWithinTheDocumentedError(decoded, a.data() + h * T * T, T, k,
                                     "K " + std::to_string(k) + " head " + std::to_string(h), nullptr);
      for (int64_t i = 0; i < T && decoded.ok; ++i) {
        const int64_t stored = decoded.stored[static_cast<size_t>(i)];
        EXPECT_LE(stored, std::max(k, std::min(i + 1, 3 * k + 2))) << "row " << i;
        sparse += stored < i + 1 ? 1 : 0;
        cut += stored == k && k < i + 1 && i + 1 > 3 * k + 2 ? 1 : 0;
      }
    }
    EXPECT_GT(sparse, T) << "sharp rows are stored sparse";
    if (keys == 0) {
      EXPECT_EQ(d["truncated_rows"], 0);
    } else {
      EXPECT_GT(d["truncated_rows"].get<int64_t>(), 0) << "every fifth row has a long tail of levels";
      EXPECT_GE(cut, d["truncated_rows"].get<int64_t>());
    }
  }
}

// Pieces cut at any byte give the page that whole heads give; a selection
// holds its heads only, named by their model indices.
TEST(ViewerHtmlTest, PiecesAndSelectionsGiveTheSameHeads) {
  const int64_t L = 3, H = 4, T = 40;
  const std::vector<float> a = RandomAttention(L, H, T);
  ViewerData data = Make("m", "", std::vector<std::string>(T, "x"), L, H, T, a);
  auto whole = RenderViewerHtml(data);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ViewerPageBuilder cut(HeadSelection::All(L, H), T, 0);
  AddAll(cut, a, L, H, T, 7);
  ViewerData no_span = data;
  no_span.attentions = {};
  auto pieced = cut.Render(no_span);
  ASSERT_TRUE(pieced.ok()) << pieced.status();
  EXPECT_TRUE(*pieced == *whole) << "pieces cut every 7 bytes changed the page";

  HeadSelection some;
  some.layers = {1};
  some.heads = {0, 2};
  ViewerPageBuilder selected(some, T, 0);
  AddAll(selected, a, L, H, T, 4 * T);
  auto page = selected.Render(no_span);
  ASSERT_TRUE(page.ok()) << page.status();
  const nlohmann::json d = EmbeddedData(*page), full = EmbeddedData(*whole);
  EXPECT_EQ(d["layers"], 1);
  EXPECT_EQ(d["heads"], 2);
  EXPECT_EQ(d["layer_ids"], nlohmann::json({1}));
  EXPECT_EQ(d["head_ids"], nlohmann::json({0, 2}));
  EXPECT_EQ(d["model_layers"], L);
  EXPECT_EQ(d["model_heads"], H);
  ASSERT_EQ(d["attn"].size(), 2u);
  EXPECT_EQ(d["attn"][0], full["attn"][1 * H + 0]);
  EXPECT_EQ(d["attn"][1], full["attn"][1 * H + 2]);
  EXPECT_EQ(d["sink"][0][1], full["sink"][1][2]);

  // A head whose rows did not all arrive is named.
  ViewerPageBuilder partial(some, T, 0);
  TensorPiece p;
  p.layer = 1;
  p.head = 0;
  p.rows = p.cols = T;
  p.data = reinterpret_cast<const char*>(a.data() + (1 * H + 0) * T * T);
  p.size = 4 * T * T;
  ASSERT_TRUE(partial.Add(p).ok());
  auto incomplete = partial.Render(no_span);
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.status().message().find("head 1.2 is incomplete"), std::string::npos)
      << incomplete.status();
  // Out of order.
  p.offset = 8;
  EXPECT_EQ(partial.Add(p).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ViewerHtmlTest, ThumbnailsHoldBlockMaxima) {
  const int64_t L = 1, H = 2, T = 96;  // thumbnails are 48 x 48: 2 x 2 blocks
  const std::vector<float> a = RandomAttention(L, H, T);
  auto page = RenderViewerHtml(Make("m", "", std::vector<std::string>(T, "x"), L, H, T, a));
  ASSERT_TRUE(page.ok()) << page.status();
  const nlohmann::json d = EmbeddedData(*page);
  ASSERT_EQ(d["thumb_size"], 48);
  std::string thumbs;
  ASSERT_TRUE(absl::Base64Unescape(d["thumbs"].get<std::string>(), &thumbs));
  ASSERT_EQ(thumbs.size(), static_cast<size_t>(H * 48 * 48));
  const float* head = a.data() + T * T;  // head 1
  for (int64_t r = 0; r < 48; ++r) {
    for (int64_t c = 0; c <= r; ++c) {
      float m = 0;
      for (int64_t i = 2 * r; i < 2 * r + 2; ++i) {
        for (int64_t j = 2 * c; j < std::min(2 * c + 2, i + 1); ++j) m = std::max(m, head[i * T + j]);
      }
      EXPECT_EQ(static_cast<unsigned char>(thumbs[48 * 48 + r * 48 + c]), std::lround(255.0 * m))
          << r << "," << c;
    }
  }
}

TEST(ViewerHtmlTest, PerTokenStatisticsAreEmbedded) {
  const std::vector<float> a = {1.0f, 0.0f, 0.5f, 0.5f};
  ViewerData data = Make("m", "", {"a", "b"}, 1, 1, 2, a);
  data.z = {7.5, std::nan("")};
  data.max_norm = {3000.0, 25.0};
  data.entropy_nats = {1.25, 2.5};
  data.sinks = {0};
  auto page = RenderViewerHtml(data);
  ASSERT_TRUE(page.ok()) << page.status();
  const nlohmann::json d = EmbeddedData(*page);
  EXPECT_EQ(d["z"][0], 7.5);
  EXPECT_TRUE(d["z"][1].is_null()) << "NaN has no JSON spelling";
  EXPECT_EQ(d["norm"][0], 3000.0);
  EXPECT_EQ(d["entropy"][1], 2.5);
  EXPECT_EQ(d["sinks"], nlohmann::json::array({0}));
  data.entropy_nats = {1.0};
  EXPECT_EQ(RenderViewerHtml(data).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ViewerHtmlTest, TokenTextCannotCloseTheScript) {
  const std::vector<float> a = {1.0f};
  ViewerData data = Make("</script><b>x", "<!-- p", {"</script>"}, 1, 1, 1, a);
  auto page = RenderViewerHtml(data);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->find("</script><b>"), std::string::npos);
  const nlohmann::json d = EmbeddedData(*page);
  EXPECT_EQ(d["tokens"][0], "</script>");
  EXPECT_EQ(d["title"], "</script><b>x");
  EXPECT_EQ(d["prompt"], "<!-- p");
}

TEST(ViewerHtmlTest, ShapeMismatchesAreRefused) {
  const std::vector<float> a(2 * 2 * 3 * 3, 0.0f);
  ViewerData data = Make("m", "", {"a", "b", "c"}, 2, 2, 3, a);
  EXPECT_TRUE(RenderViewerHtml(data).ok());
  data.tokens.pop_back();
  EXPECT_EQ(RenderViewerHtml(data).status().code(), absl::StatusCode::kInvalidArgument);
  data.tokens.push_back("c");
  data.num_heads = 3;
  EXPECT_NE(RenderViewerHtml(data).status().message().find("needs 54"), std::string::npos);
  data.num_heads = 0;
  EXPECT_FALSE(RenderViewerHtml(data).ok());
  const std::vector<float> one = {1.0f};
  EXPECT_FALSE(
      WriteViewerHtml("/nonexistent/dir/page.html", Make("m", "", {"a"}, 1, 1, 1, one)).ok());
}

}  // namespace
}  // namespace attnscope::engine
