// The viewer page's embedded data: every head's lower triangle quantised per
// row to 8 bits, deflated and base64-encoded (decoded here independently),
// the thumbnails, the per-token statistics, and token text that cannot break
// out of its <script>.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
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
  EXPECT_EQ(d["format"], "q8row-deflate-b64");
  ASSERT_EQ(d["attn"].size(), static_cast<size_t>(L * H));
  const size_t tri = static_cast<size_t>(T * (T + 1) / 2);
  double worst = 0;
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      const float* head = a.data() + (l * H + h) * T * T;
      const std::string raw = Unpack(d["attn"][l * H + h].get<std::string>(), tri + 4 * T);
      ASSERT_EQ(raw.size(), tri + 4 * T) << "triangle bytes, then T float32 maxima";
      std::vector<float> maxima(static_cast<size_t>(T));
      std::memcpy(maxima.data(), raw.data() + tri, 4 * static_cast<size_t>(T));
      size_t at = 0;
      for (int64_t i = 0; i < T; ++i) {
        const float m = *std::max_element(head + i * T, head + i * T + i + 1);
        EXPECT_EQ(maxima[static_cast<size_t>(i)], m);
        for (int64_t j = 0; j <= i; ++j, ++at) {
          const double decoded = static_cast<unsigned char>(raw[at]) * m / 255.0;
          const double err = std::fabs(decoded - head[i * T + j]);
          EXPECT_TRUE(err <= m * kViewerRowQuantisationError + 1e-7)
              << l << "." << h << " [" << i << "][" << j << "] " << decoded;
          worst = std::max(worst, err / m);
        }
      }
      EXPECT_DOUBLE_EQ(d["sink"][l][h].get<double>(), head[(T - 1) * T]);
    }
  }
  EXPECT_GT(worst, 0.0) << "8 bits cannot be exact on random weights";
  // No address at all.
  EXPECT_EQ(page->find("http"), std::string::npos);
  EXPECT_EQ(page->find("src="), std::string::npos);
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
