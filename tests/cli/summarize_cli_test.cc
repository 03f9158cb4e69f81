// `attnscope summarize` on the batch results of two models of the same shape
// (the qwen2 and mistral fixtures, 3 layers x 4 heads, on token ids): its
// JSON against the population figures recomputed here from the per-prompt
// lines, and its HTML report in headless Chromium (with a screenshot).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/chromium.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/json_compare.h"

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

std::vector<json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

class SummarizeCliTest : public ::testing::Test {
 protected:
  // Eight prompts of 6..20 ids and one id outside the vocabulary (an error
  // line), through batch on each model.
  static void SetUpTestSuite() {
    std::string pattern = (std::filesystem::temp_directory_path() / "summarize-XXXXXX").string();
    dir_ = new std::string(mkdtemp(pattern.data()));
    const std::string input = *dir_ + "/prompts.jsonl";
    {
      std::ofstream out(input);
      for (int p = 0; p < 8; ++p) {
        json ids = json::array();
        for (int i = 0; i < 6 + 2 * p; ++i) ids.push_back(1 + (37 * i + 11 * p) % 250);
        out << json({{"id", "q" + std::to_string(p)}, {"ids", ids}}).dump() << "\n";
      }
      out << R"({"id": "oov", "ids": [5, 300]})" << "\n";
    }
    for (const char* model : {"qwen2", "mistral"}) {
      const testing::CliResult r = RunCli({"batch", "--model", testing::Fixture(model), "--input",
                                           input, "--output", Results(model)});
      ASSERT_EQ(r.exit_code, 1) << r.err;  // the oov line
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string Results(const std::string& model) { return *dir_ + "/" + model + ".jsonl"; }

  static std::string* dir_;
};
std::string* SummarizeCliTest::dir_ = nullptr;

// The figures of definitions.md's "Population metrics", from the lines.
struct Expected {
  double sink_eps = 0, batch_sink_eps = 0;
  std::vector<std::vector<double>> share, mean;
  int prompts = 0;
};

Expected Recompute(const std::string& path, double epsilon) {
  Expected e;
  for (const json& line : ReadLines(path)) {
    if (line.contains("error")) continue;
    const json& alpha = line["first_token_importance"];
    if (e.share.empty()) {
      e.share.assign(alpha.size(), std::vector<double>(alpha[0].size(), 0));
      e.mean = e.share;
    }
    double above = 0, heads = 0;
    for (size_t l = 0; l < alpha.size(); ++l) {
      for (size_t h = 0; h < alpha[l].size(); ++h) {
        const double a = alpha[l][h].get<double>();
        above += a > epsilon;
        heads += 1;
        e.share[l][h] += a > epsilon;
        e.mean[l][h] += a;
      }
    }
    e.sink_eps += above / heads;
    e.batch_sink_eps += line["sink_eps"].get<double>();
    ++e.prompts;
  }
  for (auto* grid : {&e.share, &e.mean}) {
    for (auto& row : *grid) {
      for (double& v : row) v /= e.prompts;
    }
  }
  e.sink_eps /= e.prompts;
  e.batch_sink_eps /= e.prompts;
  return e;
}

TEST_F(SummarizeCliTest, JsonEqualsThePopulationFiguresOfThePerPromptLines) {
  for (const double epsilon : {0.3, 0.5}) {
    const testing::CliResult r =
        RunCli({"summarize", Results("qwen2"), Results("mistral"), "--json", "--sink-epsilon",
                std::to_string(epsilon)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json out = json::parse(r.out);
    ASSERT_EQ(out["results"].size(), 2u);
    std::vector<Expected> expected;
    for (size_t f = 0; f < 2; ++f) {
      const json& s = out["results"][f];
      const Expected e = Recompute(f == 0 ? Results("qwen2") : Results("mistral"), epsilon);
      EXPECT_EQ(s["prompts"], 8);
      EXPECT_EQ(s["errors"], 1);
      EXPECT_LE(test::AbsDiff(s["sink_eps"].get<double>(), e.sink_eps), 1e-12) << f;
      // At the default cut, batch's own per-prompt sink_eps (computed by the
      // analysis library) averages to the same figure.
      if (epsilon == 0.3) {
        EXPECT_LE(test::AbsDiff(s["sink_eps"].get<double>(), e.batch_sink_eps), 1e-12) << f;
      }
      EXPECT_LE(test::MaxJsonDiff(s["share_above_epsilon"], json(e.share)), 1e-12) << f;
      EXPECT_LE(test::MaxJsonDiff(s["mean_first_token_importance"], json(e.mean)), 1e-12) << f;
      std::cout << "eps " << epsilon << " file " << f << ": Sink-eps " << e.sink_eps << "\n";
      expected.push_back(e);
    }
    // The check means something only if the figures are not trivial.
    EXPECT_GT(expected[0].sink_eps + expected[1].sink_eps, 0) << epsilon;
    EXPECT_LE(test::AbsDiff(out["delta"]["sink_eps"].get<double>(),
                            expected[1].sink_eps - expected[0].sink_eps),
              1e-12);
  }
}

TEST_F(SummarizeCliTest, ModelsOfDifferentShapesAreNotComparedHeadByHead) {
  const std::string input = *dir_ + "/text.jsonl";
  std::ofstream(input) << R"({"id": "t", "text": "The cat sat."})" << "\n";
  const std::string bundled = *dir_ + "/bundled.jsonl";
  ASSERT_EQ(RunCli({"batch", "--input", input, "--output", bundled}).exit_code, 0);
  const testing::CliResult r = RunCli({"summarize", Results("qwen2"), bundled});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("3 x 4 and 6 x 6"), std::string::npos) << r.err;
  EXPECT_EQ(RunCli({"summarize"}).exit_code, 2);
}

TEST_F(SummarizeCliTest, HtmlReportOpensInHeadlessChromium) {
  const std::string page = *dir_ + "/report.html";
  const testing::CliResult r =
      RunCli({"summarize", Results("qwen2"), Results("mistral"), "--html", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const testing::PageResult opened = testing::OpenPage("file://" + page + "#test", *dir_);
  ASSERT_EQ(opened.exit_code, 0);
  ASSERT_TRUE(opened.report.is_object()) << opened.dom_excerpt;
  // The difference, then per file Sink-eps and mean alpha: 5 maps of 3 x 4.
  EXPECT_EQ(opened.report["heatmaps"], 5);
  EXPECT_EQ(opened.report["cells"], 5 * 12);
  // Per file: health 10, per-prompt Sink-eps 10, entropy 12, mass 3 layers.
  EXPECT_EQ(opened.report["bars"], 2 * (10 + 10 + 12 + 3));
  const std::string png = std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/summarize-report.png";
  std::filesystem::create_directories(ATTNSCOPE_TEST_OUTPUT_DIR);
  EXPECT_EQ(testing::Screenshot("file://" + page, png, *dir_, 1300, 1400), 0);
  EXPECT_TRUE(std::filesystem::exists(png));
}

}  // namespace
}  // namespace attnscope
