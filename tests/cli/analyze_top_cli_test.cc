// attnscope analyze's next-token predictions end to end on the bundled model:
// --json's top_predictions (5 per position, most likely first) and
// next_token_surprisal_nats against the softmax of the logits written by
// --export, computed here in double; and --top N in the text report: exactly
// the N positions whose next token was most surprising, in position order,
// each with its 3 most likely next tokens as --json gives them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::RunCli;

constexpr char kText[] =
    "The cat sat on the keyboard again. It typed a long line of nonsense, and then it slept.";

TEST(AnalyzeTopCliTest, PredictionsAndSurprisalAreTheSoftmaxOfTheLogits) {
  const std::string exported = test::UniqueTempPath("analyze-top.safetensors");
  auto r = RunCli({"analyze", "--text", kText, "--json", "--export", exported, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  auto file = SafetensorsFile::Open(exported);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<float> logits = testing::Floats(**file, "logits");
  const std::vector<int64_t> ids = j["input_ids"].get<std::vector<int64_t>>();
  const int64_t t = static_cast<int64_t>(ids.size());
  ASSERT_GT(t, 10);
  ASSERT_EQ(logits.size() % t, 0u);
  const int64_t vocab = static_cast<int64_t>(logits.size()) / t;
  ASSERT_EQ(j["top_predictions"].size(), static_cast<size_t>(t));
  ASSERT_EQ(j["next_token_surprisal_nats"].size(), static_cast<size_t>(t - 1));
  double worst_p = 0, worst_surprisal = 0;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = logits.data() + i * vocab;
    double m = row[0];
    for (int64_t v = 1; v < vocab; ++v) m = std::max(m, static_cast<double>(row[v]));
    double z = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(row[v] - m);
    auto log_p = [&](int64_t v) { return row[v] - m - std::log(z); };
    // The 5 largest logits, lower id first on ties.
    std::vector<int64_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    const json& top = j["top_predictions"][i];
    ASSERT_EQ(top.size(), 5u) << "position " << i;
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(top[k]["id"].get<int64_t>(), order[k]) << "position " << i << " rank " << k;
      const double p = top[k]["p"].get<double>();
      worst_p = test::Worse(worst_p, test::AbsDiff(p, std::exp(log_p(order[k]))));
      if (k > 0) {
        EXPECT_LE(p, top[k - 1]["p"].get<double>()) << "position " << i;
      }
    }
    if (i + 1 < t) {
      worst_surprisal = test::Worse(
          worst_surprisal,
          test::AbsDiff(j["next_token_surprisal_nats"][i].get<double>(), -log_p(ids[i + 1])));
    }
  }
  EXPECT_LE(worst_p, 1e-6);
  EXPECT_LE(worst_surprisal, 1e-5);
}

// The rows of the report's next-token section: position, and the
// probabilities of its top predictions as printed ("tok" 0.123).
struct Row {
  int64_t position;
  std::vector<std::string> probabilities;
};

std::vector<Row> PredictionRows(const std::string& report) {
  std::vector<Row> rows;
  const size_t section = report.find("Next token at each position");
  if (section == std::string::npos) return rows;
  // Not std::regex: GCC 12 with ASan at -O1 warns inside <regex>
  // (maybe-uninitialized), and the build treats warnings as errors.
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (absl::string_view line : absl::StrSplit(report.substr(section), '\n')) {
    // A row starts "  #<position> "; each probability follows a quoted
    // token as `" d.ddd` with d in {0, 1}.
    if (!absl::StartsWith(line, "  #")) continue;
    size_t end = 3;
    while (end < line.size() && digit(line[end])) ++end;
    if (end == 3 || end == line.size() || line[end] != ' ') continue;
    Row row{std::stoll(std::string(line.substr(3, end - 3))), {}};
    for (size_t at = line.find("\" ", end); at != absl::string_view::npos;
         at = line.find("\" ", at + 1)) {
      const absl::string_view p = line.substr(at + 2, 5);
      if (p.size() == 5 && (p[0] == '0' || p[0] == '1') && p[1] == '.' && digit(p[2]) &&
          digit(p[3]) && digit(p[4])) {
        row.probabilities.emplace_back(p);
      }
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(AnalyzeTopCliTest, TopKeepsTheMostSurprisingPositionsInOrder) {
  auto js = RunCli({"analyze", "--text", kText, "--json", "--threads", "1"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const json j = json::parse(js.out);
  const std::vector<double> surprisal = j["next_token_surprisal_nats"].get<std::vector<double>>();
  const int64_t t = static_cast<int64_t>(j["input_ids"].size());
  for (int n : {2, 9}) {
    auto r = RunCli({"analyze", "--text", kText, "--top", std::to_string(n), "--color", "never",
                     "--threads", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("the " + std::to_string(n) + " most surprising of " +
                                 std::to_string(t) + " positions"));
    // The n largest surprisals (the last position has none), in position order.
    std::vector<int64_t> want(surprisal.size());
    std::iota(want.begin(), want.end(), 0);
    std::stable_sort(want.begin(), want.end(),
                     [&](int64_t a, int64_t b) { return surprisal[a] > surprisal[b]; });
    want.resize(n);
    std::sort(want.begin(), want.end());
    const std::vector<Row> rows = PredictionRows(r.out);
    std::vector<int64_t> got;
    for (const Row& row : rows) got.push_back(row.position);
    EXPECT_EQ(got, want) << "--top " << n;
    for (const Row& row : rows) {
      ASSERT_EQ(row.probabilities.size(), 3u) << "position " << row.position;
      for (size_t k = 0; k < 3; ++k) {
        char shown[16];
        std::snprintf(shown, sizeof(shown), "%.3f",
                      j["top_predictions"][row.position][k]["p"].get<double>());
        EXPECT_EQ(row.probabilities[k], shown) << "position " << row.position << " rank " << k;
        if (k > 0) {
          EXPECT_LE(std::stod(row.probabilities[k]), std::stod(row.probabilities[k - 1]));
        }
      }
    }
  }
  // Without --top (and with --top above T) every position is listed.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--top", std::to_string(t + 5)}}) {
    std::vector<std::string> args = {"analyze", "--text", kText, "--color", "never", "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(PredictionRows(r.out).size(), static_cast<size_t>(t));
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("most surprising of")));
  }
}

}  // namespace
}  // namespace attnscope
