// `attnscope analyze --viewer`: the page opened in headless Chromium (Debian's
// chromium package), a head selected through the page's controls and a row
// hovered by a real mouse event (the page's test hook), and what it decodes
// and draws on the canvas compared with the exported attentions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "service/engine/viewer_html.h"
#include "tests/cli/chromium.h"
#include "tests/cli/run_cli.h"

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

constexpr char kPrompt[] =
    "The cat sat on the mat. The cat sat on the </script> mat, and then it slept until the "
    "birds sang.";
// A canvas pixel holds the weight in 202 levels (red 238 -> 36): half a level.
constexpr double kPixelError = 0.5 / 202.0 + 1e-6;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ViewerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (std::filesystem::temp_directory_path() / "viewer-XXXXXX").string();
    dir_ = new std::string(mkdtemp(pattern.data()));
    const std::string tensors = *dir_ + "/tensors.safetensors";
    auto r = RunCli({"analyze", "--text", kPrompt, "--export", tensors, "--viewer", Page(),
                     "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    stderr_ = new std::string(r.err);
    stats_ = new json(json::parse(r.out));
    auto file = SafetensorsFile::Open(tensors);
    ASSERT_TRUE(file.ok()) << file.status();
    const TensorRef* a = (*file)->Find("attentions");
    shape_ = new std::vector<int64_t>(a->shape);
    attentions_ = new std::vector<float>(*ToFloat32(*a));
    auto tok = RunCli({"tokenize", "--text", kPrompt, "--json"});
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    offsets_ = new json(json::parse(tok.out)["offsets"]);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(*dir_); }

  static std::string Page() { return *dir_ + "/viewer.html"; }
  static int64_t T() { return (*shape_)[2]; }
  static double A(int64_t l, int64_t h, int64_t i, int64_t j) {
    const int64_t H = (*shape_)[1];
    return (*attentions_)[((l * H + h) * T() + i) * T() + j];
  }
  // The label the page should draw for token i: its bytes, spaces as "·",
  // cut to 14 characters.
  static std::string Label(int64_t i) {
    const int64_t b = (*offsets_)[i][0], e = (*offsets_)[i][1];
    std::string s;
    for (char c : std::string(kPrompt).substr(b, e - b)) s += c == ' ' ? "\u00b7" : std::string(1, c);
    return s;  // every token of kPrompt is shorter than 14 characters
  }

  static void ExpectRowDrawn(int64_t l, int64_t h, int64_t row) {
    SCOPED_TRACE("layer " + std::to_string(l) + " head " + std::to_string(h) + " row " +
                 std::to_string(row));
    const testing::PageResult page = testing::OpenPage(
        "file://" + Page() + "#test=" + std::to_string(l) + "," + std::to_string(h) + "," +
            std::to_string(row),
        *dir_);
    ASSERT_EQ(page.exit_code, 0) << "chromium (Debian package 'chromium', see scripts/setup.sh)";
    ASSERT_TRUE(page.report.is_object()) << "no test output in the page's DOM:\n" << page.dom_excerpt;
    const json& r = page.report;
    EXPECT_EQ(r["errors"], json::array()) << "JavaScript errors";
    EXPECT_EQ(r["layer"], l);
    EXPECT_EQ(r["head"], h);
    EXPECT_EQ(r["row"], row);
    EXPECT_EQ(r["upper_drawn"], 0) << "pixels drawn above the diagonal";
    double row_max = 0;
    for (int64_t j = 0; j <= row; ++j) row_max = std::max(row_max, A(l, h, row, j));
    const double tol = row_max * engine::kViewerRowQuantisationError + 1e-6;
    ASSERT_EQ(r["weights"].size(), static_cast<size_t>(row + 1));
    ASSERT_EQ(r["drawn"].size(), static_cast<size_t>(row + 1));
    for (int64_t j = 0; j <= row; ++j) {
      const double a = A(l, h, row, j);
      const double decoded = r["weights"][j].get<double>(), drawn = r["drawn"][j].get<double>();
      EXPECT_TRUE(std::fabs(decoded - a) <= tol) << "key " << j << ": " << decoded << " vs " << a;
      EXPECT_TRUE(std::fabs(drawn - a) <= tol + kPixelError) << "key " << j << ": " << drawn;
    }
    ASSERT_EQ(r["readout"].size(), static_cast<size_t>(std::min<int64_t>(row + 1, 100)));
    double previous = 2.0;
    for (const json& e : r["readout"]) {
      const int64_t j = e["j"];
      const double shown = std::stod(e["num"].get<std::string>());
      EXPECT_TRUE(std::fabs(shown - A(l, h, row, j)) <= tol + 5.01e-5) << "key " << j;
      if (row >= 24) {
        EXPECT_LE(shown, previous) << "long rows are listed by weight";
      }
      previous = shown;
    }
    ASSERT_EQ(r["labels"].size(), static_cast<size_t>(T()));
    for (int64_t i = 0; i < T(); ++i) EXPECT_EQ(r["labels"][i], Label(i)) << i;
    const double z = (*stats_)["z"][row].get<double>();
    char z_text[32];
    std::snprintf(z_text, sizeof(z_text), "z %.2f", z);
    EXPECT_THAT(r["qstats"].get<std::string>(),
                ::testing::AllOf(::testing::HasSubstr("position " + std::to_string(row)),
                                 ::testing::HasSubstr(z_text), ::testing::HasSubstr("max norm"),
                                 ::testing::HasSubstr("next-token entropy")));
    EXPECT_THAT(r["tip"].get<std::string>(), ::testing::HasSubstr("key 0"));
    EXPECT_EQ(r["thumbs"], (*shape_)[0] * (*shape_)[1]);
    EXPECT_EQ(r["thumbs_drawn"], r["thumbs"]);
  }

  static std::string* dir_;
  static std::string* stderr_;
  static json* stats_;
  static std::vector<int64_t>* shape_;
  static std::vector<float>* attentions_;
  static json* offsets_;
};

std::string* ViewerTest::dir_ = nullptr;
std::string* ViewerTest::stderr_ = nullptr;
json* ViewerTest::stats_ = nullptr;
std::vector<int64_t>* ViewerTest::shape_ = nullptr;
std::vector<float>* ViewerTest::attentions_ = nullptr;
json* ViewerTest::offsets_ = nullptr;

TEST_F(ViewerTest, HoveredRowShowsTheExportedWeights) {
  ASSERT_EQ(shape_->size(), 4u);
  EXPECT_EQ((*shape_)[0], 6);
  ASSERT_GT(T(), 25) << "a long row is listed by weight: keep one in the test";
  ExpectRowDrawn(0, 0, T() - 1);
  ExpectRowDrawn(3, 4, 9);
  ExpectRowDrawn(5, 2, 1);
}

TEST_F(ViewerTest, PageIsSelfContained) {
  const std::string page = Slurp(Page());
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_EQ(page.find("</script> mat"), std::string::npos) << "prompt text closed the script";
}

TEST_F(ViewerTest, SaysWhatItWrote) {
  EXPECT_THAT(*stderr_, ::testing::HasSubstr("wrote " + Page()));
  EXPECT_THAT(*stderr_, ::testing::HasSubstr("wrote " + *dir_ + "/tensors.safetensors"));
}

TEST_F(ViewerTest, SamePathForExportAndViewerIsAUsageError) {
  const std::string path = *dir_ + "/same.out";
  auto r = RunCli({"analyze", "--text", "hi", "--export", path, "--viewer", path});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("--export and --viewer both name"));
  EXPECT_FALSE(std::filesystem::exists(path));
  auto dotted = RunCli({"analyze", "--text", "hi", "--export", path, "--viewer",
                        *dir_ + "/./same.out"});
  EXPECT_EQ(dotted.exit_code, 2) << "the same file through another spelling";
  EXPECT_THAT(dotted.err, ::testing::HasSubstr("--export and --viewer both name"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ViewerTest, UnwritablePageIsARuntimeError) {
  auto r = RunCli({"analyze", "--text", "hi", "--viewer", "/nonexistent/dir/page.html"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("/nonexistent/dir/page.html"));
}

TEST_F(ViewerTest, Screenshot) {
  const std::string png = std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/viewer-screenshot.png";
  std::filesystem::remove(png);
  EXPECT_EQ(testing::Screenshot("file://" + Page() + "#test=3,4,12", png, *dir_), 0);
  const std::string bytes = Slurp(png);
  ASSERT_GT(bytes.size(), 20000u) << png;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace attnscope
