// attnscope patch end to end: --json (heads and --residual) against the
// independent float64 golden file of scripts/reference/patch_reference.py
// on the GPT-2 fixture, the text grid against the JSON, --viewer's page (the
// same document, drawn in headless Chromium), --target-a/-b as one token
// each, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/chromium.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/golden_tensors.h"
#include "tests/common/json_compare.h"

namespace attnscope {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using ::testing::HasSubstr;
using testing::RunCli;
using test::AbsDiff;
using test::JsonNumber;
using test::Worse;

class PatchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = test::OpenGolden("reference/patch-gpt2-random-hub-layout.safetensors");
    ASSERT_NE(golden_, nullptr);
    clean_ = ReadTensor<int64_t>(*golden_, "clean_ids");
    corrupted_ = ReadTensor<int64_t>(*golden_, "corrupted_ids");
  }
  std::vector<std::string> Args(std::vector<std::string> more) const {
    return test::WithArgs({"patch", "--model", TestDataPath("models/gpt2-random-hub-layout"),
                           "--clean-ids", absl::StrJoin(clean_, ","), "--corrupted-ids",
                           absl::StrJoin(corrupted_, ",")},
                          more);
  }
  std::unique_ptr<SafetensorsFile> golden_;
  std::vector<int64_t> clean_, corrupted_;
};

TEST_F(PatchCliTest, JsonMatchesTheFloat64Reference) {
  const auto targets = ReadTensor<int64_t>(*golden_, "targets");
  const auto metrics = ReadTensor<double>(*golden_, "metrics");
  for (const std::string what : {"heads", "residual"}) {
    const auto r = RunCli(Args(what == "heads" ? std::vector<std::string>{"--json"}
                                               : std::vector<std::string>{"--json", "--residual"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out["patched"], what);
    EXPECT_EQ(out["target_a"]["id"].get<int64_t>(), targets[0]);
    EXPECT_EQ(out["target_b"]["id"].get<int64_t>(), targets[1]);
    double worst = Worse(AbsDiff(JsonNumber(out["clean_metric"]), metrics[0]),
                         AbsDiff(JsonNumber(out["corrupted_metric"]), metrics[1]));
    const auto metric = ReadTensor<double>(*golden_, what + "_metric");
    const auto recovery = ReadTensor<double>(*golden_, what + "_recovery");
    const size_t columns = what == "heads" ? 4 : clean_.size();
    ASSERT_EQ(out["recovery"].size(), 3u);
    for (size_t l = 0; l < 3; ++l) {
      ASSERT_EQ(out["recovery"][l].size(), columns);
      for (size_t c = 0; c < columns; ++c) {
        worst = Worse(worst, AbsDiff(JsonNumber(out["metric"][l][c]), metric[l * columns + c]));
        worst = Worse(worst, AbsDiff(JsonNumber(out["recovery"][l][c]), recovery[l * columns + c]));
      }
    }
    std::cout << what << ": max |diff| from the float64 reference " << worst << "\n";
    EXPECT_TRUE(test::Within(worst, 1e-4)) << what << " " << worst;
    EXPECT_EQ(out["passes"].get<int64_t>(), static_cast<int64_t>(3 * columns));
  }
}

TEST_F(PatchCliTest, TextGridShowsEachRecovery) {
  const auto json = RunCli(Args({"--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  const auto text = RunCli(Args({}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("12 patched passes"));
  EXPECT_THAT(text.out, HasSubstr(absl::StrFormat("clean %.4f, corrupted %.4f",
                                                  JsonNumber(out["clean_metric"]),
                                                  JsonNumber(out["corrupted_metric"]))));
  for (size_t l = 0; l < 3; ++l) {
    std::string row = absl::StrFormat("%-6d", l);
    for (size_t h = 0; h < 4; ++h) {
      const double r = JsonNumber(out["recovery"][l][h]);
      row += absl::StrFormat(" %+9.3f", std::fabs(r) < 5e-4 ? 0.0 : r);
    }
    EXPECT_THAT(text.out, HasSubstr(row));
  }
}

TEST_F(PatchCliTest, ErrorsAreClear) {
  auto r = RunCli(Args({"--target-ids", "5"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--target-ids takes two token ids"));
  r = RunCli(Args({"--target-ids", "5,5"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("nothing to recover"));
  r = RunCli({"patch", "--model", TestDataPath("models/gpt2-random-hub-layout"), "--clean-ids",
              "1,2,3", "--corrupted-ids", "1,2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the clean prompt has 3 tokens and the corrupted one 2"));
  r = RunCli({"patch", "--clean", "a"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("give exactly one of --corrupted and --corrupted-ids"));
  // The bundled model's tokenizer: a target must be one token.
  r = RunCli({"patch", "--clean", "The cat sat", "--corrupted", "The dog sat", "--target-a",
              " Parisian Eiffel"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("not one; give a single token"));
  // With --server the run is the server's: its threads and device are not the CLI's to set.
  r = RunCli({"--server", "127.0.0.1:1", "patch", "--clean", "a", "--corrupted", "b", "--threads",
              "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--threads works only without --server"));
}

// --viewer writes the very document --json prints (read back from the page)
// beside both prompts' tokens, and the page draws every (layer, position)
// cell with its largest recovery where the JSON has it.
TEST_F(PatchCliTest, ViewerPageHoldsTheJsonDocumentAndDrawsTheGrid) {
  std::string pattern = (std::filesystem::temp_directory_path() / "patch-viewer-XXXXXX").string();
  const std::string dir = mkdtemp(pattern.data());
  const std::string page = dir + "/patch.html";
  const auto r = RunCli(Args({"--residual", "--json", "--viewer", page}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("wrote " + page));
  const nlohmann::json embedded = testing::PageDocument(page);
  ASSERT_TRUE(embedded.is_object()) << page;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(embedded["patch"], out);
  ASSERT_EQ(embedded["clean_tokens"].size(), clean_.size());
  ASSERT_EQ(embedded["corrupted_tokens"].size(), corrupted_.size());
  for (size_t i = 0; i < clean_.size(); ++i) {
    // The page's tokens differ exactly where the ids do.
    EXPECT_EQ(embedded["clean_tokens"][i] == embedded["corrupted_tokens"][i],
              clean_[i] == corrupted_[i]) << i;
  }
  double best = -test::kInf;
  size_t best_l = 0, best_c = 0;
  for (size_t l = 0; l < out["recovery"].size(); ++l) {
    for (size_t c = 0; c < out["recovery"][l].size(); ++c) {
      const double v = JsonNumber(out["recovery"][l][c]);
      ASSERT_TRUE(std::isfinite(v)) << l << "," << c;
      if (v > best) best = v, best_l = l, best_c = c;
    }
  }
  const testing::PageResult drawn = testing::OpenPage("file://" + page + "#test", dir);
  ASSERT_EQ(drawn.exit_code, 0);
  ASSERT_FALSE(drawn.report.is_null()) << drawn.dom_excerpt;
  EXPECT_EQ(drawn.report["layers"], 3);
  EXPECT_EQ(drawn.report["columns"], clean_.size());
  EXPECT_EQ(drawn.report["cells"], 3 * clean_.size());
  EXPECT_TRUE(test::Within(AbsDiff(JsonNumber(drawn.report["best"]), best), 1e-12));
  EXPECT_EQ(drawn.report["best_at"], nlohmann::json::array({best_l, best_c}));
  const std::string png = std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/patch-viewer-gpt2.png";
  std::filesystem::remove(png);
  EXPECT_EQ(testing::Screenshot("file://" + page, png, dir, 1100, 420), 0);
  EXPECT_GT(std::filesystem::file_size(png), 5000u);
  const auto missing = RunCli(Args({"--viewer", "/nonexistent-attnscope-dir/patch.html"}));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("the directory '/nonexistent-attnscope-dir' does not exist"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace attnscope
