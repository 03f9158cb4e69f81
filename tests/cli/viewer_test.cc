// `attnscope analyze --viewer`: the page opened in headless Chromium (Debian's
// chromium package), a head selected and a row hovered by the page's test
// hook, and what it draws compared with the exported attentions.
#include <gmock/gmock.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/run_cli.h"

extern char** environ;

namespace attnscope {
namespace {

using nlohmann::json;
using testing::RunCli;

constexpr char kPrompt[] =
    "The cat sat on the mat. The cat sat on the </script> mat, and then it slept until the "
    "birds sang.";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `argv` (looked up in PATH) with stdout to `out_path`, stderr discarded;
// the exit code, or -1 if it could not start or ran over 90 s (then killed).
int RunProgram(const std::vector<std::string>& args, const std::string& out_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  for (int waited = 0; waitpid(pid, &status, WNOHANG) == 0; ++waited) {
    if (waited == 900) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

  // Loads the page at #test=l,h,row and returns the test hook's report.
  static json Hover(int64_t l, int64_t h, int64_t row) {
    const std::string out = *dir_ + "/dom.html";
    const int rc = RunProgram(
        {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--user-data-dir=" + *dir_ + "/profile", "--virtual-time-budget=5000",
         "--window-size=1200,900", "--dump-dom",
         "file://" + Page() + "#test=" + std::to_string(l) + "," + std::to_string(h) + "," +
             std::to_string(row)},
        out);
    EXPECT_EQ(rc, 0) << "chromium (Debian package 'chromium', see scripts/setup.sh) failed";
    const std::string dom = Slurp(out);
    const std::string open = "<pre id=\"test-output\">";
    const size_t begin = dom.find(open), end = dom.find("</pre>", begin);
    if (begin == std::string::npos || end == std::string::npos) {
      ADD_FAILURE() << "no test output in the page's DOM:\n" << dom.substr(0, 2000);
      return json::object();
    }
    std::string text = dom.substr(begin + open.size(), end - begin - open.size());
    for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
             {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
      for (size_t at; (at = text.find(entity)) != std::string::npos;) text.replace(at, entity.size(), c);
    }
    return json::parse(text);
  }

  static void ExpectRowDrawn(int64_t l, int64_t h, int64_t row) {
    SCOPED_TRACE("layer " + std::to_string(l) + " head " + std::to_string(h) + " row " +
                 std::to_string(row));
    const json r = Hover(l, h, row);
    ASSERT_TRUE(r.contains("highlighted"));
    EXPECT_EQ(r["layer"], l);
    EXPECT_EQ(r["head"], h);
    EXPECT_EQ(r["row"], row);
    EXPECT_EQ(r["upper_cells"], 0) << "cells drawn above the diagonal";
    EXPECT_GT(r["cells"].get<int64_t>(), T());
    EXPECT_LE(r["cells"].get<int64_t>(), T() * (T() + 1) / 2);
    int64_t visible = 0;  // weights that survive the page's 7 decimals
    for (int64_t j = 0; j <= row; ++j) visible += A(l, h, row, j) >= 1e-7;
    EXPECT_GE(static_cast<int64_t>(r["highlighted"].size()), visible);
    EXPECT_LE(static_cast<int64_t>(r["highlighted"].size()), row + 1);
    for (const json& c : r["highlighted"]) {
      const int64_t j = c["j"];
      EXPECT_EQ(c["i"], row);
      ASSERT_LE(j, row);
      EXPECT_NEAR(c["w"].get<double>(), A(l, h, row, j), 1e-6) << "key " << j;
      EXPECT_NEAR(c["opacity"].get<double>(), A(l, h, row, j), 1e-6) << "key " << j;
    }
    ASSERT_EQ(r["readout"].size(), static_cast<size_t>(row + 1));
    for (const json& e : r["readout"]) {
      const int64_t j = e["j"];
      EXPECT_NEAR(std::stod(e["num"].get<std::string>()), A(l, h, row, j), 5.01e-5);
    }
    ASSERT_EQ(r["query_labels"].size(), static_cast<size_t>(T()));
    for (int64_t i = 0; i < T(); ++i) {
      EXPECT_EQ(r["query_labels"][i], Label(i)) << i;
      EXPECT_EQ(r["key_labels"][i], Label(i)) << i;
    }
  }

  static std::string* dir_;
  static std::vector<int64_t>* shape_;
  static std::vector<float>* attentions_;
  static json* offsets_;
};

std::string* ViewerTest::dir_ = nullptr;
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
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("</script> mat"), std::string::npos) << "prompt text closed the script";
}

TEST_F(ViewerTest, UnwritablePageIsARuntimeError) {
  auto r = RunCli({"analyze", "--text", "hi", "--viewer", "/nonexistent/dir/page.html"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("/nonexistent/dir/page.html"));
}

TEST_F(ViewerTest, Screenshot) {
  const std::string png = std::string(ATTNSCOPE_TEST_OUTPUT_DIR) + "/viewer-screenshot.png";
  std::filesystem::remove(png);
  const int rc = RunProgram(
      {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
       "--disable-component-update", "--disable-sync", "--no-first-run",
       "--user-data-dir=" + *dir_ + "/profile", "--virtual-time-budget=5000",
       "--hide-scrollbars", "--window-size=1200,900", "--screenshot=" + png,
       "file://" + Page() + "#test=3,4,12"},
      *dir_ + "/screenshot.log");
  EXPECT_EQ(rc, 0);
  const std::string bytes = Slurp(png);
  ASSERT_GT(bytes.size(), 20000u) << png;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace attnscope
