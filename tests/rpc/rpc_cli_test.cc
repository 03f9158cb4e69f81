// attnscope --server HOST:PORT analyze|generate|models prints what the local
// commands print.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>


#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/json_compare.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// A text report that printed a non-finite number ("nan", "-nan", "inf"):
// two such reports compare equal as strings, so each is checked alone.
bool HasNonFiniteNumber(const std::string& text) {
  // printf's spellings, as whole words (the prompts and greedy texts here
  // hold no such word). Not std::regex: GCC 12 with ASan at -O1 warns inside
  // <regex> (maybe-uninitialized), and the build treats warnings as errors.
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (const char* word : {"nan", "inf"}) {
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
      const size_t end = at + 3;
      if ((at == 0 || !letter(text[at - 1])) && (end == text.size() || !letter(text[end]))) {
        return true;
      }
    }
  }
  return false;
}

class RpcCliTest : public RpcTest {
 protected:
  // Runs the command locally and through the server; both must succeed.
  std::pair<CliResult, CliResult> Both(const std::vector<std::string>& args) {
    CliResult local = RunCli(args);
    std::vector<std::string> remote_args = {"--server", server_->address()};
    remote_args.insert(remote_args.end(), args.begin(), args.end());
    CliResult remote = RunCli(remote_args);
    EXPECT_EQ(local.exit_code, 0) << local.err;
    EXPECT_EQ(remote.exit_code, 0) << remote.err;
    return {local, remote};
  }

  // JSON outputs equal once the timing field is dropped. MaxJsonDiff, not
  // `a == b`: nlohmann's equality holds for null == null, which is how a NaN
  // statistic is written on both sides.
  void ExpectSameJson(const std::vector<std::string>& args, const std::string& timing_field) {
    auto [local, remote] = Both(args);
    nlohmann::json a = nlohmann::json::parse(local.out, nullptr, false);
    nlohmann::json b = nlohmann::json::parse(remote.out, nullptr, false);
    ASSERT_FALSE(a.is_discarded()) << local.out;
    ASSERT_FALSE(b.is_discarded()) << remote.out;
    if (!timing_field.empty()) {
      EXPECT_TRUE(b.contains(timing_field));
      a.erase(timing_field);
      b.erase(timing_field);
    }
    std::string mismatch;
    EXPECT_EQ(test::MaxJsonDiff(a, b, &mismatch), 0.0) << mismatch;
  }
};

TEST_F(RpcCliTest, AnalyzeJsonEqualsTheLocalOutput) {
  StartServer();
  ExpectSameJson({"analyze", "--text", "The tower is 324 metres tall. The tower is", "--json"},
                 "forward_seconds");
  ExpectSameJson({"analyze", "--ids", "464,3290,286,262,995,318,257,1049,13,198,464,3290",
                  "--json", "--threshold", "1.0", "--template", "chatml", "--block-size", "5"},
                 "forward_seconds");
}

TEST_F(RpcCliTest, AnalyzeReportEqualsTheLocalReport) {
  StartServer();
  // Multi-byte characters split across tokens exercise the display texts.
  auto [local, remote] =
      Both({"analyze", "--text", "Caf\xc3\xa9 na\xc3\xafve \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80 ok",
            "--color", "never"});
  EXPECT_FALSE(local.out.empty());
  EXPECT_FALSE(HasNonFiniteNumber(local.out)) << local.out;
  EXPECT_EQ(local.out, remote.out);
}

TEST_F(RpcCliTest, GenerateEqualsTheLocalOutput) {
  StartServer();
  ExpectSameJson({"generate", "--text", "Once upon a time", "--max-new-tokens", "8", "--json",
                  "--alternatives", "3", "--sink-scores"},
                 "tokens_per_second");
  auto [local, remote] = Both({"generate", "--text", "Once upon a time", "--max-new-tokens", "6"});
  EXPECT_THAT(local.out, HasSubstr("6 new tokens (stop: max_new_tokens)"));
  EXPECT_FALSE(HasNonFiniteNumber(local.out)) << local.out;
  EXPECT_EQ(local.out, remote.out);
}

TEST_F(RpcCliTest, ModelsEqualsTheLocalOutput) {
  StartServer();
  ExpectSameJson({"models", "--json"}, "");
  auto [local, remote] = Both({"models"});
  EXPECT_THAT(local.out, HasSubstr("tiny-gpt2"));
  EXPECT_EQ(local.out, remote.out);
}

TEST_F(RpcCliTest, ServerErrorsPrintTheStatusCodeAndExitOne) {
  StartServer();
  CliResult r = RunCli({"--server", server_->address(), "analyze", "--model", "nope", "--text",
                        "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(r.err, HasSubstr("'nope' is not loaded"));
  // --temperature -1 is a usage error (2) before anything is sent; more new
  // tokens than the model's positions is the server's to refuse (the local
  // run cuts it to fit).
  r = RunCli({"--server", server_->address(), "generate", "--text", "hi", "--temperature", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli({"--server", server_->address(), "generate", "--text", "hi", "--max-new-tokens",
              "1000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: max_new_tokens=1000"));
  // Beyond the server's own limit (--max-new-tokens, 1024) it says so first.
  r = RunCli({"--server", server_->address(), "generate", "--text", "hi", "--max-new-tokens",
              "100000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: max_new_tokens: 100000 is over the server's "
                               "limit of 1024 generated tokens (--max-new-tokens)"));
}

// A server that does not answer (stopped with SIGSTOP: connections are
// accepted by the kernel, nothing replies): the CLI says it is waiting after
// a second and gives up at --deadline with exit code 1.
TEST_F(RpcCliTest, WaitingLineAndDeadline) {
  StartServer();
  ASSERT_EQ(kill(server_->pid(), SIGSTOP), 0);
  CliResult stalled =
      RunCli({"--server", server_->address(), "analyze", "--text", "hi", "--deadline", "2.5"});
  CliResult stalled_generate =
      RunCli({"--server", server_->address(), "generate", "--text", "hi", "--deadline", "1.5"});
  ASSERT_EQ(kill(server_->pid(), SIGCONT), 0);
  EXPECT_EQ(stalled.exit_code, 1);
  EXPECT_THAT(stalled.err, HasSubstr("attnscope analyze: waiting for " + server_->address() +
                                     ": no reply after 1 s"));
  EXPECT_THAT(stalled.err, HasSubstr("no complete answer within --deadline 2.5 s"));
  EXPECT_THAT(stalled.err, HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_EQ(stalled_generate.exit_code, 1);
  EXPECT_THAT(stalled_generate.err, HasSubstr("attnscope generate: waiting for"));
  EXPECT_THAT(stalled_generate.err, HasSubstr("--deadline 1.5 s"));
  // Running again, it answers within a generous deadline.
  CliResult ok =
      RunCli({"--server", server_->address(), "analyze", "--text", "hi", "--deadline", "120"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("Context health"));
  CliResult bad = RunCli({"--server", server_->address(), "analyze", "--text", "hi", "--deadline", "0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--deadline must be a number of seconds > 0, got '0'"));
  EXPECT_EQ(bad.out, "");
}

TEST_F(RpcCliTest, LocalOnlyFlagsAreUsageErrorsWithServer) {
  StartServer();
  // --threads sizes the local thread pool: meaningless with --server.
  CliResult r = RunCli({"--server", server_->address(), "analyze", "--text", "hi", "--threads",
                        "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--threads works only without --server"));
  r = RunCli({"--server", server_->address(), "ablate", "--heads", "1.1", "--threads", "2"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli({"--server"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(RpcCliNoServerTest, UnreachableServerExitsOneWithUnavailable) {
  // A port this test holds bound but not listening: connections to it are
  // refused, and no other process can take it meanwhile.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const CliResult r = RunCli({"--server", "127.0.0.1:" + std::to_string(ntohs(addr.sin_port)),
                              "models"});
  close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace attnscope::testing
