// The viewer page's embedded data: the lower triangle of every head, rounded
// to 7 decimals, and token text that cannot break out of its <script>.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

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

// Causal rows that sum to 1, with some weights below the 7-decimal grain.
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

TEST(ViewerHtmlTest, EmbedsTheLowerTriangleOfEveryHead) {
  const int64_t L = 2, H = 3, T = 5;
  const std::vector<float> a = RandomAttention(L, H, T);
  ViewerData data{"model", "a prompt", {"a", " b", "c", "d", "e"}, L, H, T, a};
  auto page = RenderViewerHtml(data);
  ASSERT_TRUE(page.ok()) << page.status();
  const nlohmann::json d = EmbeddedData(*page);
  EXPECT_EQ(d["layers"], L);
  EXPECT_EQ(d["heads"], H);
  EXPECT_EQ(d["tokens"][1], " b");
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        const nlohmann::json& row = d["attentions"][l][h][i];
        ASSERT_EQ(row.size(), static_cast<size_t>(i + 1)) << "only keys j <= i";
        for (int64_t j = 0; j <= i; ++j) {
          EXPECT_NEAR(row[j].get<double>(), a[((l * H + h) * T + i) * T + j], 5.1e-8);
        }
      }
    }
  }
  EXPECT_EQ(d["attentions"][0][0][2][1].get<double>(), 0.0);  // 3e-8 rounds to 0
  // No address at all but the SVG namespace name (which is never fetched).
  std::string rest = *page;
  for (size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;) {
    rest.erase(at, 26);
  }
  EXPECT_EQ(rest.find("http"), std::string::npos);
  EXPECT_EQ(rest.find("src="), std::string::npos);
}

TEST(ViewerHtmlTest, TokenTextCannotCloseTheScript) {
  const std::vector<float> a = {1.0f};
  ViewerData data{"</script><b>x", "<!-- p", {"</script>"}, 1, 1, 1, a};
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
  ViewerData data{"m", "", {"a", "b", "c"}, 2, 2, 3, a};
  EXPECT_TRUE(RenderViewerHtml(data).ok());
  data.tokens.pop_back();
  EXPECT_EQ(RenderViewerHtml(data).status().code(), absl::StatusCode::kInvalidArgument);
  data.tokens.push_back("c");
  data.num_heads = 3;
  EXPECT_NE(RenderViewerHtml(data).status().message().find("needs 54"), std::string::npos);
  data.num_heads = 0;
  EXPECT_FALSE(RenderViewerHtml(data).ok());
  EXPECT_FALSE(WriteViewerHtml("/nonexistent/dir/page.html",
                               ViewerData{"m", "", {"a"}, 1, 1, 1, std::vector<float>{1.0f}})
                   .ok());
}

}  // namespace
}  // namespace attnscope::engine
