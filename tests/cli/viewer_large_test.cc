// The viewer at a real size: a random-weight 12-layer, 12-head GPT-2-shaped
// checkpoint (width 48, vocabulary 96, 1024 positions) written at test time
// with the project's safetensors writer, analyzed at T = 1024 with --viewer
// and --export. The page must stay under 60 MB and open in headless Chromium
// without a JavaScript error, decoding and drawing a head within the
// documented quantisation error of the exported attentions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
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
constexpr double kMaxPageBytes = 60e6;
constexpr double kPixelError = 0.5 / 202.0 + 1e-6;  // one canvas level (see viewer_test)

std::vector<float> Normal(std::mt19937& rng, size_t n, float stddev, float mean = 0.0f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// GPT-2 tensors with random weights. The query/key weights are large enough
// that heads attend sharply to a few random keys: attention that does not
// compress to nothing, unlike the near-uniform rows of a fresh initialisation.
void WriteRandomModel(const std::string& dir) {
  std::mt19937 rng(11);
  const auto d = static_cast<size_t>(kWidth);
  std::vector<TensorToWrite> t;
  t.push_back(MakeF32Tensor("wte.weight", {kVocab, kWidth}, Normal(rng, kVocab * d, 1.0f)));
  t.push_back(MakeF32Tensor("wpe.weight", {kTokens, kWidth}, Normal(rng, kTokens * d, 1.0f)));
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      t.push_back(MakeF32Tensor(p + ln + ".weight", {kWidth}, std::vector<float>(d, 1.0f)));
      t.push_back(MakeF32Tensor(p + ln + ".bias", {kWidth}, std::vector<float>(d, 0.0f)));
    }
    t.push_back(MakeF32Tensor(p + "attn.c_attn.weight", {kWidth, 3 * kWidth}, Normal(rng, 3 * d * d, 0.4f)));
    t.push_back(MakeF32Tensor(p + "attn.c_attn.bias", {3 * kWidth}, std::vector<float>(3 * d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "attn.c_proj.weight", {kWidth, kWidth}, Normal(rng, d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "attn.c_proj.bias", {kWidth}, std::vector<float>(d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_fc.weight", {kWidth, 4 * kWidth}, Normal(rng, 4 * d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_fc.bias", {4 * kWidth}, std::vector<float>(4 * d, 0.0f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_proj.weight", {4 * kWidth, kWidth}, Normal(rng, 4 * d * d, 0.05f)));
    t.push_back(MakeF32Tensor(p + "mlp.c_proj.bias", {kWidth}, std::vector<float>(d, 0.0f)));
  }
  t.push_back(MakeF32Tensor("ln_f.weight", {kWidth}, std::vector<float>(d, 1.0f)));
  t.push_back(MakeF32Tensor("ln_f.bias", {kWidth}, std::vector<float>(d, 0.0f)));
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", t).ok());
  std::ofstream(dir + "/config.json") << json{
      {"model_type", "gpt2"}, {"vocab_size", kVocab},  {"n_positions", kTokens},
      {"n_embd", kWidth},     {"n_layer", kLayers},    {"n_head", kHeads},
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
};

std::string* ViewerLargeTest::dir_ = nullptr;
SafetensorsFile* ViewerLargeTest::tensors_ = nullptr;

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
