// attnscope lens end to end: --json against the independent float64 golden
// file of the Llama fixture (scripts/reference/lens_reference.py), the text
// table against the JSON, --viewer's page (the same document, drawn in
// headless Chromium), and the errors that need a prompt to be seen.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/chromium.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/json_compare.h"
#include "tests/common/golden_tensors.h"

namespace attnscope {
namespace {

using test::ReadTensor;
using test::TestDataPath;

using ::testing::HasSubstr;
using testing::RunCli;

class LensCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = test::OpenGolden("reference/lens-llama.safetensors");
    ASSERT_NE(golden_, nullptr);
    ids_ = ReadTensor<int64_t>(*golden_, "input_ids");
    queries_ = ReadTensor<int64_t>(*golden_, "rollout_queries");
  }
  std::vector<std::string> Args(std::vector<std::string> more) const {
    return test::WithArgs(
        {"lens", "--model", TestDataPath("models/llama"), "--ids", absl::StrJoin(ids_, ",")}, more);
  }
  std::unique_ptr<SafetensorsFile> golden_;
  std::vector<int64_t> ids_, queries_;
};

TEST_F(LensCliTest, JsonMatchesTheFloat64Reference) {
  const auto r = RunCli(Args({"--positions", "all", "--json", "--rollout", "--rollout-queries",
                              absl::StrCat(queries_[0], ",", queries_[1])}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const std::vector<double> top_p = ReadTensor<double>(*golden_, "lens_top_p");
  const std::vector<double> next_p = ReadTensor<double>(*golden_, "lens_next_p");
  const std::vector<int64_t> rank = ReadTensor<int64_t>(*golden_, "lens_next_rank");
  const std::vector<double> entropy = ReadTensor<double>(*golden_, "lens_entropy");
  const auto t = ids_.size();
  const auto& states = out["lens"]["states"];
  ASSERT_EQ(states.size(), 4u);
  double worst = 0;
  for (size_t s = 0; s < states.size(); ++s) {
    ASSERT_EQ(states[s].size(), t);
    for (size_t i = 0; i < t; ++i) {
      const auto& cell = states[s][i];
      const size_t at = s * t + i;
      EXPECT_EQ(cell["position"].get<size_t>(), i);
      ASSERT_EQ(cell["top"].size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        worst = test::Worse(worst, test::AbsDiff(cell["top"][k]["p"].get<double>(), top_p[at * 5 + k]));
      }
      worst = test::Worse(worst, test::AbsDiff(cell["entropy"].get<double>(), entropy[at]));
      if (i + 1 < t) {
        worst = test::Worse(worst, test::AbsDiff(cell["next_p"].get<double>(), next_p[at]));
        EXPECT_EQ(cell["next_rank"].get<int64_t>(), rank[at]);
        EXPECT_EQ(cell["next_id"].get<int64_t>(), ids_[i + 1]);
      } else {
        EXPECT_TRUE(cell["next_p"].is_null() && cell["next_rank"].is_null());
      }
    }
  }
  EXPECT_TRUE(test::Within(worst, 1e-5)) << worst;
  std::vector<double> rows;
  for (const auto& layer : out["rollout"]["rows"]) {
    for (const auto& row : layer) {
      for (const auto& v : row) rows.push_back(v.get<double>());
    }
  }
  const double rollout = test::MaxAbsDiff(rows, ReadTensor<double>(*golden_, "rollout"));
  EXPECT_TRUE(test::Within(rollout, 1e-5)) << rollout;
  EXPECT_EQ(out["rollout"]["queries"], nlohmann::json(queries_));
}

// The table's last-state row shows the top token of the JSON's last state,
// the default position being the last.
TEST_F(LensCliTest, TableShowsTheTopTokenOfEveryState) {
  const auto json = RunCli(Args({"--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  ASSERT_EQ(out["lens"]["positions"], nlohmann::json({ids_.size() - 1}));
  const auto text = RunCli(Args({"--rollout"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("Logit lens"));
  EXPECT_THAT(text.out, HasSubstr("Attention rollout"));
  for (size_t s = 0; s < 4; ++s) {
    const std::string name = s == 0 ? "0 embed" : s == 3 ? "3 final" : std::to_string(s);
    const auto& top = out["lens"]["states"][s][0]["top"][0];
    SCOPED_TRACE(name);
    EXPECT_THAT(text.out, HasSubstr(top["token"].get<std::string>()));
    EXPECT_NE(text.out.find("\n" + name), std::string::npos);
  }
}

TEST_F(LensCliTest, PositionsOutsideThePromptAreUsageErrors) {
  const auto r = RunCli(Args({"--positions", "0,99"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("--positions 99 is outside the prompt: its ",
                                            ids_.size(), " tokens")));
  EXPECT_TRUE(r.out.empty());
  const auto q = RunCli(Args({"--rollout", "--rollout-queries", "40"}));
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_THAT(q.err, HasSubstr("--rollout-queries 40 is outside the prompt"));
}

// --viewer writes the very document --json prints (read back from the page),
// and the page draws every (state, position) cell, grey exactly where there is
// no value (the last position has no next token), and the rollout strip of a
// query whose weights sum to 1.
TEST_F(LensCliTest, ViewerPageHoldsTheJsonDocumentAndDrawsIt) {
  std::string pattern = (std::filesystem::temp_directory_path() / "lens-viewer-XXXXXX").string();
  const std::string dir = mkdtemp(pattern.data());
  const std::string page = dir + "/lens.html";
  const auto r = RunCli(Args({"--positions", "all", "--top", "3", "--rollout", "--rollout-queries",
                              absl::StrCat(queries_[0], ",", queries_[1]), "--json", "--viewer",
                              page}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("wrote " + page));
  const nlohmann::json embedded = testing::PageDocument(page);
  ASSERT_TRUE(embedded.is_object()) << page;
  EXPECT_EQ(embedded, nlohmann::json::parse(r.out));

  const int64_t t = static_cast<int64_t>(ids_.size());
  const int64_t layers = embedded["num_layers"].get<int64_t>();
  const testing::PageResult drawn = testing::OpenPage("file://" + page + "#test", dir);
  ASSERT_EQ(drawn.exit_code, 0);
  ASSERT_FALSE(drawn.report.is_null()) << drawn.dom_excerpt;
  const nlohmann::json& report = drawn.report;
  EXPECT_EQ(report["states"], layers + 1);
  EXPECT_EQ(report["positions"], t);
  EXPECT_EQ(report["cells"], (layers + 1) * t);
  EXPECT_EQ(report["grey"], layers + 1);
  EXPECT_EQ(report["rollout_layers"], layers);
  EXPECT_EQ(report["rollout_queries"], 2);
  EXPECT_EQ(report["spans"], t);
  const double sum = test::JsonNumber(report["strip_sum"]);
  EXPECT_TRUE(test::Within(test::AbsDiff(sum, 1.0), 1e-6)) << sum;

  const std::string png = std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/lens-viewer-llama.png";
  std::filesystem::remove(png);
  EXPECT_EQ(testing::Screenshot("file://" + page, png, dir, 1300, 700), 0);
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
  std::filesystem::remove_all(dir);
}

TEST_F(LensCliTest, ViewerPathErrorsComeBeforeTheModelLoads) {
  auto r = RunCli(Args({"--viewer", "/nonexistent-attnscope-dir/lens.html"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the directory '/nonexistent-attnscope-dir' does not exist"));
  r = RunCli(Args({"--viewer", std::filesystem::temp_directory_path().string()}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--viewer takes a file name, not the directory"));
}

}  // namespace
}  // namespace attnscope
