// attnscope-server's command line and start-up failures, on the real binary:
// bad flags exit 2 with a message naming the flag and the value, start-up
// failures (unloadable models, duplicate names, an address in use) exit 1
// naming what to fix, and nothing is left listening.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/cli/run_cli.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// Runs the server to its exit (a server that starts serving instead is
// killed after 60 s and gives -1, so a missed validation fails, not hangs).
CliResult RunServer(const std::vector<std::string>& args) {
  return RunBinary("attnscope-server", args, 60);
}

TEST(ServerFlagsTest, HelpPrintsUsageAndExitsZero) {
  const CliResult r = RunServer({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("Usage: attnscope-server"));
  EXPECT_THAT(r.out, HasSubstr("--max-subscribers"));
}

TEST(ServerFlagsTest, PortsOutsideTheRangeAreRejectedBeforeListening) {
  // 70000 used to be accepted and served on 70000 mod 65536 = 4464. (Each
  // run loads libtorch, seconds on a loaded machine: a few cases only.)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--listen", "127.0.0.1:70000"},       {"--listen", "127.0.0.1"},
      {"--listen", "127.0.0.1:http"},        {"--metrics-listen", "127.0.0.1:65536"},
      {"--metrics-listen", "127.0.0.1:-1"},
  };
  for (const auto& [flag, address] : cases) {
    const CliResult r = RunServer({flag, address});
    EXPECT_EQ(r.exit_code, 2) << flag << " " << address << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(flag + ": '" + address + "'"));
    EXPECT_THAT(r.err, HasSubstr("0..65535"));
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("listening")));
  }
}

TEST(ServerFlagsTest, MalformedValuesNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--threads", "many"}, "--threads: 'many' is not an integer in [0, 1024]"},
      {{"--max-subscribers", "-3"}, "--max-subscribers: '-3' is not an integer in [0, 65536]"},
      {{"--drain-seconds", "nan"}, "--drain-seconds: 'nan' is not a number of seconds"},
      {{"--model", "nodir"}, "--model: 'nodir' is not NAME=DIR"},
      {{"--colour"}, "unknown flag --colour"},
      {{"serve"}, "unexpected argument 'serve'"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = RunServer(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_THAT(r.err, HasSubstr(message)) << args[0];
    EXPECT_THAT(r.err, HasSubstr("attnscope-server --help"));
  }
}

TEST(ServerFlagsTest, MissingModelDirectoryExitsOneNamingIt) {
  const std::string missing = "/nonexistent/attnscope-no-model";
  const CliResult r = RunServer({"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                 "--model", "ghost=" + missing});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--model ghost=" + missing));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("listening")));
}

TEST(ServerFlagsTest, TwoModelsWithOneNameExitOne) {
  const CliResult r =
      RunServer({"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--model",
                 "twin=" + FixtureModelDir(), "--model", "twin=" + FixtureModelDir()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("twin"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("listening")));
}

// A loopback socket that holds a port (listening) for the test's lifetime.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~HeldPort() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ServerFlagsTest, AddressesInUseExitOneNamingTheFlag) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  CliResult r = RunServer({"--listen", held.address(), "--metrics-listen", "127.0.0.1:0",
                           "--model", "fixture=" + FixtureModelDir()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot listen on '" + held.address() + "'"));
  EXPECT_THAT(r.err, HasSubstr("--listen"));
  r = RunServer({"--listen", "127.0.0.1:0", "--metrics-listen", held.address(), "--model",
                 "fixture=" + FixtureModelDir()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot serve metrics on '" + held.address() + "'"));
}

TEST(ServerFlagsTest, PortZeroReportsTheBoundPorts) {
  std::string error;
  auto server = ServerProcess::Start({"--model", "fixture=" + FixtureModelDir()}, &error);
  ASSERT_NE(server, nullptr) << error;
  for (const std::string& address : {server->address(), server->metrics_address()}) {
    EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    EXPECT_GT(port, 0) << address;
    EXPECT_LE(port, 65535) << address;
  }
  EXPECT_NE(server->address(), server->metrics_address());
  EXPECT_FALSE(ScrapeMetrics(server->metrics_address()).empty());
}

}  // namespace
}  // namespace attnscope::testing
