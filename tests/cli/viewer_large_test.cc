// The viewer at a real size: a random-weight 12-layer, 12-head GPT-2-shaped
// checkpoint (width 48, vocabulary 96, 1024 positions) written at test time
// with the project's safetensors writer, analyzed at T = 1024 with --viewer
// and --export. The page must stay under 60 MB and open in headless Chromium
// without a JavaScript error, decoding and drawing a head within the
// documented quantisation error of the exported attentions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "service/engine/viewer_html.h"
#include "tests/cli/chromium.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

constexpr int64_t kLayers = 12, kHeads = 12, kWidth = 48, kVocab = 96, kTokens = 1024;
// The real shape: Qwen2.5-0.5B's 24 layers x 14 heads at T = 2,000.
constexpr int64_t kRealLayers = 24, kRealHeads = 14, kRealWidth = 56, kRealTokens = 2000;
constexpr double kMaxPageBytes = 60e6;
constexpr double kPixelError = 0.5 / 202.0 + 1e-6;  // one canvas level (see viewer_test)

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> Normal(std::mt19937& rng, size_t n, float stddev, float mean = 0.0f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// GPT-2 tensors with random weights. The query/key weights are large enough
// that heads attend sharply to a few random keys: attention that does not
// compress to nothing, unlike the near-uniform rows of a fresh initialisation.
void WriteRandomModel(const std::string& dir, int64_t layers = kLayers, int64_t heads = kHeads,
                      int64_t width = kWidth, int64_t positions = kTokens) {
  std::mt19937 rng(11);
  const auto d = static_cast<size_t>(width);
  std::vector<TensorToWrite> t;
  t.push_back(MakeF32Tensor("wte.weight", {kVocab, width}, Normal(rng, kVocab * d, 1.0f)));
  t.push_back(MakeF32Tensor("wpe.weight", {positions, width}, Normal(rng, positions * d, 1.0f)));
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      t.push_back(MakeF32Tensor(p + ln + ".weight", {width}, std::vector<float>(d, 1.0f)));
      t.push_back(MakeF32Tensor(p + ln + ".bias", {width}, std::vector<float>(d, 0.0f)));
    }
    t.push_back(MakeF32Tensor(p + "attn.c_attn.weight", {width, 3 * width}, Normal(rng, 3 * d * d, 0.4f)));
    t.push_back(MakeF32Tensor(p + "attn.c_attn.bias", {3 * width}, std::vector<float>(3 * d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "attn.c_proj.weight", {width, width}, Normal(rng, d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "attn.c_proj.bias", {width}, std::vector<float>(d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_fc.weight", {width, 4 * width}, Normal(rng, 4 * d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_fc.bias", {4 * width}, std::vector<float>(4 * d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_proj.weight", {4 * width, width}, Normal(rng, 4 * d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_proj.bias", {width}, std::vector<float>(d, 0.0f)));
  }
  t.push_back(MakeF32Tensor("ln_f.weight", {width}, std::vector<float>(d, 1.0f)));
  t.push_back(MakeF32Tensor("ln_f.bias", {width}, std::vector<float>(d, 0.0f)));
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", t).ok());
  std::ofstream(dir + "/config.json") << json{
      {"model_type", "gpt2"}, {"vocab_size", kVocab},  {"n_positions", positions},
      {"n_embd", width},     {"n_layer", layers},    {"n_head", heads},
      {"bos_token_id", 0},    {"eos_token_id", 0},     {"torch_dtype", "float32"}}.dump();
}

class ViewerLargeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::UniqueTempPath("viewer-large"));
    ASSERT_TRUE(std::filesystem::create_directories(*dir_)) << *dir_;
    WriteRandomModel(*dir_);
    std::mt19937 rng(5);
    std::uniform_int_distribution<int64_t> id(1, kVocab - 1);
    std::ofstream ids(*dir_ + "/ids.txt");
    for (int64_t i = 0; i < kTokens; ++i) ids << id(rng) << (i % 32 == 31 ? "\n" : " ");
    ids.close();
    auto r = RunCli({"analyze", "--model", *dir_, "--ids-file", *dir_ + "/ids.txt", "--viewer",
                     Page(), "--export", *dir_ + "/tensors.safetensors", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    peak_rss_kib_ = r.peak_rss_kib;
    auto file = SafetensorsFile::Open(*dir_ + "/tensors.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    tensors_ = file->release();
  }
  static void TearDownTestSuite() {
    delete tensors_;
    tensors_ = nullptr;
    delete dir_;  // the directory itself goes at exit (UniqueTempPath)
    dir_ = nullptr;
  }

  static std::string Page() { return *dir_ + "/viewer.html"; }
  // Row i of head (l, h) of the exported attentions (float32, (L, H, T, T)).
  static std::vector<float> Row(int64_t l, int64_t h, int64_t i) {
    const TensorRef* a = tensors_->Find("attentions");
    EXPECT_EQ(a->shape, (std::vector<int64_t>{kLayers, kHeads, kTokens, kTokens}));
    std::vector<float> row(static_cast<size_t>(kTokens));
    std::memcpy(row.data(), a->data + 4 * (((l * kHeads + h) * kTokens + i) * kTokens),
                4 * static_cast<size_t>(kTokens));
    return row;
  }

  static std::string* dir_;
  static SafetensorsFile* tensors_;
  static int64_t peak_rss_kib_;
};

std::string* ViewerLargeTest::dir_ = nullptr;
SafetensorsFile* ViewerLargeTest::tensors_ = nullptr;
int64_t ViewerLargeTest::peak_rss_kib_ = -1;

// The export and the page are written as the pass goes: the process never
// holds the 604 MB of attentions it writes (nor the float32 copy of them
// that a recorder kept before).
TEST_F(ViewerLargeTest, ExportStreamsToDiskWithoutHoldingTheAttentions) {
  const double attention_bytes = 4.0 * kLayers * kHeads * kTokens * kTokens;
  const auto file_bytes = std::filesystem::file_size(*dir_ + "/tensors.safetensors");
  std::cout << "12x12 heads at T = 1024: export " << static_cast<double>(file_bytes) / 1e6
            << " MB (attentions " << attention_bytes / 1e6 << " MB), peak resident "
            << static_cast<double>(peak_rss_kib_) / 1e3 << " MB\n";
  ASSERT_GT(peak_rss_kib_, 0) << "wait4 gave no peak";
  EXPECT_GT(static_cast<double>(file_bytes), attention_bytes);
  EXPECT_LT(1024.0 * static_cast<double>(peak_rss_kib_), attention_bytes)
      << "the process held the attentions it exported";
}

TEST_F(ViewerLargeTest, PageOf144HeadsAt1024TokensIsSmall) {
  const auto bytes = std::filesystem::file_size(Page());
  std::cout << "12x12 heads at T = 1024: page " << static_cast<double>(bytes) / 1e6 << " MB\n";
  EXPECT_LT(static_cast<double>(bytes), kMaxPageBytes);
  EXPECT_GT(bytes, 1000000u) << "144 heads of 1024 random-ish rows cannot fit in 1 MB";
}

TEST_F(ViewerLargeTest, OpensAndDrawsAHeadWithinTheQuantisationError) {
  const int64_t l = 11, h = 7, i = 1000;
  const testing::PageResult page = testing::OpenPage(
      "file://" + Page() + "#test=" + std::to_string(l) + "," + std::to_string(h) + "," +
          std::to_string(i),
      *dir_, 10000);
  std::cout << "headless Chromium: opened, decoded one head and hovered a row in " << page.seconds
            << " s\n";
  ASSERT_EQ(page.exit_code, 0) << "chromium (Debian package 'chromium', see scripts/setup.sh)";
  // A page that does not finish within RunProgram's limit (120 s) is killed: exit code -1.
  ASSERT_TRUE(page.report.is_object()) << "no test output in the page's DOM:\n" << page.dom_excerpt;
  const json& r = page.report;
  EXPECT_EQ(r["errors"], json::array());
  EXPECT_EQ(r["layer"], l);
  EXPECT_EQ(r["head"], h);
  EXPECT_EQ(r["row"], i);
  EXPECT_EQ(r["cell"], 1) << "1024 tokens: one pixel per token";
  EXPECT_EQ(r["thumbs"], kLayers * kHeads);
  EXPECT_EQ(r["thumbs_drawn"], kLayers * kHeads);
  EXPECT_EQ(r["upper_drawn"], 0);
  const std::vector<float> a = Row(l, h, i);
  double row_max = 0;  // NaN if any weight is: every comparison below then fails
  for (int64_t j = 0; j <= i; ++j) row_max = test::Worse(row_max, a[static_cast<size_t>(j)]);
  ASSERT_GT(row_max, 0) << "row " << i << " of head " << l << "." << h;
  const double tol = row_max * engine::kViewerRowQuantisationError + 1e-6;
  ASSERT_EQ(r["weights"].size(), static_cast<size_t>(i + 1));
  ASSERT_EQ(r["drawn"].size(), static_cast<size_t>(i + 1));
  int64_t bad = 0;
  for (int64_t j = 0; j <= i; ++j) {
    const double w = a[static_cast<size_t>(j)];
    const double decoded = r["weights"][j].get<double>(), drawn = r["drawn"][j].get<double>();
    if (!(std::fabs(decoded - w) <= tol) || !(std::fabs(drawn - w) <= tol + kPixelError)) {
      if (++bad <= 5) ADD_FAILURE() << "key " << j << ": exported " << w << ", decoded " << decoded
                                    << ", drawn " << drawn;
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(r["readout"].size(), 100u) << "long rows list their 100 largest weights";
  EXPECT_THAT(r["qstats"].get<std::string>(), ::testing::HasSubstr("position 1000"));
}

// Left in build/test-output/ for a person to look at (docs/viewer-12x12-*.png).
TEST_F(ViewerLargeTest, Screenshots) {
  for (const auto& [name, hash] : {std::pair{"model", "#model"}, std::pair{"head", "#test=11,7,700"}}) {
    const std::string png =
        std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/viewer-12x12-" + name + ".png";
    std::filesystem::remove(png);
    EXPECT_EQ(testing::Screenshot("file://" + Page() + hash, png, *dir_, 1400, 1100, 10000), 0);
    ASSERT_TRUE(std::filesystem::exists(png));
    EXPECT_GT(std::filesystem::file_size(png), 50000u) << png;
  }
}

}  // namespace
}  // namespace attnscope

namespace attnscope {
namespace {

// The page at the shape users bring: 24 layers x 14 heads (Qwen2.5-0.5B's)
// and a 2,000-token prompt, every head on one page within the default
// --viewer-max-mb, opened in headless Chromium; one head's row is checked
// against the exported attentions of that head (--attention-layers and
// --attention-heads) within the documented error.
class ViewerRealShapeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::UniqueTempPath("viewer-real-shape"));
    ASSERT_TRUE(std::filesystem::create_directories(*dir_)) << *dir_;
    WriteRandomModel(*dir_, kRealLayers, kRealHeads, kRealWidth, kRealTokens);
    std::mt19937 rng(6);
    std::uniform_int_distribution<int64_t> id(1, kVocab - 1);
    std::ofstream ids(*dir_ + "/ids.txt");
    for (int64_t i = 0; i < kRealTokens; ++i) ids << id(rng) << (i % 32 == 31 ? "\n" : " ");
    ids.close();
    auto r = RunCli({"analyze", "--model", *dir_, "--ids-file", *dir_ + "/ids.txt", "--viewer",
                     Page(), "--export", *dir_ + "/head.safetensors", "--attention-layers",
                     std::to_string(kLayer), "--attention-heads", std::to_string(kHead), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto file = SafetensorsFile::Open(*dir_ + "/head.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    tensors_ = file->release();
  }
  static void TearDownTestSuite() {
    delete tensors_;
    tensors_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Page() { return *dir_ + "/viewer.html"; }

  static constexpr int64_t kLayer = 17, kHead = 9;
  static std::string* dir_;
  static SafetensorsFile* tensors_;
};
std::string* ViewerRealShapeTest::dir_ = nullptr;
SafetensorsFile* ViewerRealShapeTest::tensors_ = nullptr;

TEST_F(ViewerRealShapeTest, EveryHeadAt2000TokensOpensWithinTheCap) {
  const auto bytes = std::filesystem::file_size(Page());
  const int64_t i = 1900;
  const testing::PageResult page = testing::OpenPage(
      "file://" + Page() + "#test=" + std::to_string(kLayer) + "," + std::to_string(kHead) + "," +
          std::to_string(i),
      *dir_, 20000);
  std::cout << "24x14 heads at T = 2000: page " << static_cast<double>(bytes) / 1e6
            << " MB; in headless Chromium every thumbnail and the first head were drawn "
            << page.report.value("ready_ms", json()).dump() << " ms after navigation started\n";
  EXPECT_LE(static_cast<double>(bytes), 128e6) << "the default --viewer-max-mb";
  ASSERT_EQ(page.exit_code, 0) << "chromium (Debian package 'chromium', see scripts/setup.sh)";
  ASSERT_TRUE(page.report.is_object()) << "no test output in the page's DOM:\n" << page.dom_excerpt;
  const json& r = page.report;
  EXPECT_EQ(r["errors"], json::array());
  EXPECT_EQ(r["layer"], kLayer);
  EXPECT_EQ(r["head"], kHead);
  EXPECT_EQ(r["thumbs"], kRealLayers * kRealHeads);
  EXPECT_EQ(r["thumbs_drawn"], kRealLayers * kRealHeads);
  EXPECT_EQ(r["upper_drawn"], 0);
  const TensorRef* a = tensors_->Find("attentions");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->shape, (std::vector<int64_t>{1, 1, kRealTokens, kRealTokens}));
  std::vector<float> row(static_cast<size_t>(i + 1));
  std::memcpy(row.data(), a->data + 4 * i * kRealTokens, 4 * row.size());
  double row_max = 0;
  for (float w : row) row_max = test::Worse(row_max, w);
  ASSERT_GT(row_max, 0);
  std::vector<float> sorted = row;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  ASSERT_EQ(r["weights"].size(), row.size());
  // The page's K keys a row: a key outside a truncated row's K largest reads 0.
  const json data = [&] {
    const std::string text = Slurp(Page());
    const std::string open = R"(<script type="application/json" id="attnscope-data">)";
    const size_t start = text.find(open) + open.size();
    json d = json::parse(text.substr(start, text.find("</script>", start) - start));
    d.erase("attn");
    return d;
  }();
  const int64_t keys = data["row_keys"];
  std::cout << "  rows keep up to " << keys << " keys; " << data["truncated_rows"]
            << " rows were cut to them\n";
  EXPECT_GE(keys, 16);
  const double kth = sorted[static_cast<size_t>(std::min<int64_t>(keys, i + 1) - 1)];
  const double tol = row_max * engine::kViewerRowQuantisationError + 1e-6;
  int64_t bad = 0;
  for (int64_t j = 0; j <= i; ++j) {
    const double w = row[static_cast<size_t>(j)], decoded = r["weights"][j].get<double>();
    const bool within = std::fabs(decoded - w) <= tol || (decoded == 0 && w <= kth);
    if (!within && ++bad <= 5) ADD_FAILURE() << "key " << j << ": exported " << w << ", decoded " << decoded;
  }
  EXPECT_EQ(bad, 0);
  // Left in build/test-output/ for a person to look at (docs/viewer-24x14-*.png),
  // with the wall time of the whole Chromium process beside an empty page's.
  const std::string blank = *dir_ + "/blank.html";
  std::ofstream(blank) << "<html><body>blank</body></html>";
  for (const auto& [name, url] : {std::pair{"blank", "file://" + blank},
                                  std::pair{"model", "file://" + Page() + "#model"},
                                  std::pair{"head", "file://" + Page() + "#test=17,9,1900"}}) {
    const std::string png =
        std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/viewer-24x14-" + name + ".png";
    std::filesystem::remove(png);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(testing::Screenshot(url, png, *dir_, 1400, 1100, 20000), 0);
    std::cout << "  screenshot of " << name << ": Chromium ran "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
              << " s\n";
    if (std::string(name) != "blank") {
      EXPECT_GT(std::filesystem::file_size(png), 50000u) << png;
    }
  }
}

}  // namespace
}  // namespace attnscope
