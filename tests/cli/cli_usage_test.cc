// Exit codes of the attnscope binaries as a table: every usage error is 2
// (with a message naming the flag), runtime errors are 1, --version is 0 on
// every binary; --threads above the core count warns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/chromium.h"
#include "tests/cli/run_cli.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using testing::RunCli;

struct Case {
  std::vector<std::string> args;
  int exit_code;
  std::string message;  // a substring of stderr
};

std::string Show(const std::vector<std::string>& args) {
  std::string s = "attnscope";
  for (const std::string& a : args) s += " '" + a + "'";
  return s;
}

TEST(CliExitCodeTest, EveryUsageErrorExitsWithTwo) {
  const std::string same = test::UniqueTempPath("export-and-viewer.out");
  const std::vector<Case> cases = {
      {{"generate", "--text", "hi", "--temperature", "-1"}, 2, "--temperature must be in [0, 100]"},
      {{"generate", "--text", "hi", "--temperature", "101"}, 2, "--temperature"},
      {{"generate", "--text", "hi", "--temperature", "nan"}, 2, "--temperature"},
      {{"generate", "--text", "hi", "--top-p", "1.5"}, 2, "--top-p must be in [0, 1]"},
      {{"generate", "--text", "hi", "--top-p", "-0.1"}, 2, "--top-p"},
      {{"generate", "--text", "hi", "--top-k", "-1"}, 2, "--top-k"},
      {{"generate", "--text", "hi", "--max-new-tokens", "0"}, 2, "--max-new-tokens"},
      {{"generate", "--text", "hi", "--alternatives", "20"}, 2, "--alternatives"},
      {{"generate", "--text", "hi", "--seed", "-3"}, 2, "--seed"},
      {{"generate"}, 2, "give exactly one of"},
      {{"generate", "--text", ""}, 2, "--text is empty"},
      {{"analyze", "--text", ""}, 2, "--text is empty"},
      {{"tokenize", "--text", ""}, 2, "--text is empty"},
      {{"analyze", "--ids", "1,,2"}, 2, "empty item at byte 2 (two commas)"},
      {{"analyze", "--ids", ",1"}, 2, "a leading comma"},
      {{"analyze", "--ids", "1,2,"}, 2, "a trailing comma"},
      {{"analyze", "--ids", "1, ,2"}, 2, "two commas"},
      {{"generate", "--ids", "1,,2"}, 2, "two commas"},
      {{"analyze", "--text", "a", "--text-file", "f.txt"}, 2, "give exactly one of"},
      {{"analyze", "--ids", "1", "--ids-file", "f.txt"}, 2, "give exactly one of"},
      {{"analyze", "--text-file", ""}, 2, "--text-file needs a file name"},
      {{"analyze", "--text", "hi", "--top", "-1"}, 2, "--top"},
      {{"analyze", "--text", "hi", "--threshold", "abc"}, 2, "--threshold"},
      {{"analyze", "--text", "hi", "--template", "xml"}, 2, "xml"},
      {{"analyze", "--text", "hi", "--color", "sometimes"}, 2, "--color"},
      {{"analyze", "--text", "hi", "--block-size", "-1"}, 2, "--block-size"},
      {{"analyze", "--text", "hi", "--threads", "many"}, 2, "--threads"},
      {{"analyze", "--text", "hi", "--export", same, "--viewer", same}, 2,
       "--export and --viewer both name"},
      {{"analyze", "--text", "hi", "--bogus"}, 2, "unknown flag --bogus"},
      {{"tokenize", "--text", "a", "--text-file", "f.txt"}, 2, "give exactly one of"},
      {{"tokenize"}, 2, "give exactly one of"},
      {{"heads", "--n", "0"}, 2, "--n"},
      {{"models", "--bogus"}, 2, "--bogus"},
      {{"frobnicate"}, 2, "unknown command"},
      {{"--server"}, 2, "--server needs HOST:PORT"},
      {{"--server", "ipv4:not-an-address", "models"}, 2, "'not-an-address': no port"},
      {{"--server", "ipv4:not-an-address:1", "models"}, 2, "'not-an-address' is not an IPv4 address"},
      {{"--server", "localhost", "models"}, 2, "'localhost' is not a server address: no port"},
      {{"--server", "127.0.0.1:70000", "models"}, 2, "the port '70000' is not a number in 1..65535"},
      {{"--server", "::1:50051", "models"}, 2, "an IPv6 address goes in brackets"},
      {{"--server", "dns:///:50051", "models"}, 2, "the host is empty"},
      {{"--server", "ipv6:[::1]", "models"}, 2, "no port after the address"},
      {{"--server", "127.0.0.1:1", "tokenize", "--text", "hi", "--deadline", "0"}, 2,
       "--deadline must be"},
      {{"--server", "127.0.0.1:1", "heads", "--threads", "2"}, 2,
       "--threads works only without --server"},
      {{"tokenize", "--text", "hi", "--deadline", "5"}, 2, "--deadline applies with --server only"},
      {{"analyze", "--text", "hi", "--threads", "0"}, 2, "--threads must be an integer in [1, 1024]"},
      {{"generate", "--text", "hi", "--threads", "0"}, 2, "--threads must be an integer in [1,"},
      {{"analyze", "--text", "hi", "--threshold", "-3"}, 2, "--threshold must be a positive z-score"},
      {{"analyze", "--text", "hi", "--threshold", "0"}, 2, "--threshold must be a positive"},
      {{"heads", "--text", "a", "--n", "3"}, 2, "--n, --seqs and --seed shape the random probe"},
      {{"lens"}, 2, "give exactly one of"},
      {{"lens", "--text", "hi", "--positions", "x"}, 2, "--positions 'x'"},
      {{"lens", "--text", "hi", "--positions", "3-1"}, 2, "a reversed range"},
      {{"lens", "--text", "hi", "--top", "0"}, 2, "--top"},
      {{"lens", "--text", "hi", "--chunk-rows", "0"}, 2, "--chunk-rows"},
      {{"lens", "--text", "hi", "--rollout-queries", "3"}, 2, "need --rollout"},
      {{"lens", "--text", "hi", "--rollout", "--rollout-queries", "all"}, 2, "not all"},
      {{"lens", "--text", "hi", "--rollout", "--no-lens", "--top", "3"}, 2,
       "which --no-lens leaves out"},
      {{"lens", "--text", "hi", "--bogus"}, 2, "unknown flag --bogus"},
      {{"--server", "127.0.0.1:1", "lens", "--text", "hi", "--chunk-rows", "8"}, 2,
       "--chunk-rows works only without --server"},
      {{"dla"}, 2, "give exactly one of"},
      {{"dla", "--text", "hi", "--positions", "x"}, 2, "--positions 'x'"},
      {{"dla", "--text", "hi", "--target", " a", "--target-id", "3"}, 2, "not both"},
      {{"dla", "--text", "hi", "--target-id", "all"}, 2, "--target-id takes token ids"},
      {{"dla", "--text", "hi", "--bogus"}, 2, "unknown flag --bogus"},
      {{"--server", "127.0.0.1:1", "dla", "--text", "hi", "--device", "cpu"}, 2,
       "--device works only without --server"},
      // Runtime errors: the command line is fine, the input or the world is not.
      {{"analyze", "--text-file", "/nonexistent/prompt.txt"}, 1, "/nonexistent/prompt.txt"},
      {{"analyze", "--model", "/nonexistent/model", "--text", "hi"}, 1, "/nonexistent/model"},
      {{"analyze", "--text", "hi", "--viewer", "/nonexistent/dir/v.html"}, 1, "/nonexistent/dir"},
      {{"analyze", "--text-file", ::testing::TempDir()}, 1, "is a directory; give a file of text"},
      {{"analyze", "--ids-file", ::testing::TempDir()}, 1, "is a directory; give a file of token ids"},
      {{"analyze", "--ids-file", "/dev/null"}, 1, "is empty: the prompt needs token ids"},
      {{"analyze", "--text-file", "/dev/null"}, 1, "is empty: the prompt needs text"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Show(c.args));
    const auto r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    if (c.exit_code == 2) {
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(same)) << "a refused command line wrote " << same;
}

TEST(CliExitCodeTest, VersionOnEveryBinary) {
  for (const char* binary : {"attnscope", "attnscope-server", "attnscope-dashboard"}) {
    SCOPED_TRACE(binary);
    const std::string out = test::UniqueTempPath(std::string(binary) + "-version.out");
    const int rc = testing::RunProgram({std::string(ATTNSCOPE_BIN_DIR) + "/" + binary, "--version"},
                                       out, "/dev/null", 30);
    EXPECT_EQ(rc, 0);
    std::string text;
    if (FILE* f = std::fopen(out.c_str(), "r")) {
      char buffer[256];
      text.assign(buffer, std::fread(buffer, 1, sizeof(buffer), f));
      std::fclose(f);
    }
    // "attnscope 0.1.0 (git 0123456789ab)": the CMake project version and the
    // git revision baked in at configure time.
    EXPECT_THAT(text, ::testing::MatchesRegex(std::string(binary) +
                                              " [0-9]+\\.[0-9]+\\.[0-9]+ \\(git [0-9a-f]+(-dirty)?\\)\n"));
  }
}

// The dashboard answers --help and refuses a bad command line without a
// display (with no DISPLAY and Qt's default platform it used to abort, 134).
TEST(CliExitCodeTest, DashboardHelpAndUsageErrorsNeedNoDisplay) {
  struct DashboardCase {
    std::vector<std::string> args;
    int exit_code;
    std::string text;  // a substring of stdout (exit 0) or stderr
  };
  const std::vector<DashboardCase> cases = {
      {{"--help"}, 0, "--auth-token-file"},
      {{"-h"}, 0, "Usage: attnscope-dashboard"},
      {{"--version"}, 0, "attnscope-dashboard "},
      {{"--bogus"}, 2, "bogus"},
      {{"--tls-cert", "c.pem"}, 2, "--tls-cert and --tls-key go together"},
      {{"--server", "dns:///"}, 2, "--server"},
      {{"stray"}, 2, "unexpected argument 'stray'"},
  };
  for (const DashboardCase& c : cases) {
    std::vector<std::string> args = {"/usr/bin/env", "-u", "DISPLAY", "-u", "WAYLAND_DISPLAY",
                                     "-u", "QT_QPA_PLATFORM",
                                     std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-dashboard"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(Show(args));
    const std::string out = test::UniqueTempPath("dashboard.out");
    const std::string err = test::UniqueTempPath("dashboard.err");
    const int rc = testing::RunProgram(args, out, err, 30);
    auto read = [](const std::string& path) {
      std::string text;
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buffer[4096];
        size_t n;
        while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
        std::fclose(f);
      }
      std::filesystem::remove(path);
      return text;
    };
    const std::string out_text = read(out), err_text = read(err);
    EXPECT_EQ(rc, c.exit_code) << err_text;
    EXPECT_THAT(c.exit_code == 0 ? out_text : err_text, HasSubstr(c.text));
    if (c.exit_code == 2) {
      EXPECT_TRUE(out_text.empty()) << out_text;
    }
  }
}

TEST(CliExitCodeTest, ThreadsAboveTheCoreCountWarn) {
  const unsigned cores = std::thread::hardware_concurrency();
  ASSERT_GT(cores, 0u);
  auto many = RunCli({"analyze", "--text", "hi", "--threads", std::to_string(cores + 1)});
  EXPECT_EQ(many.exit_code, 0) << many.err;
  EXPECT_THAT(many.err, HasSubstr("warning: --threads " + std::to_string(cores + 1) +
                                  " is more than the " + std::to_string(cores) + " cores"));
  auto fits = RunCli({"analyze", "--text", "hi", "--threads", std::to_string(cores)});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_THAT(fits.err, ::testing::Not(HasSubstr("warning")));
}

}  // namespace
}  // namespace attnscope
