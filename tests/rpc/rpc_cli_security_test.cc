// Every attnscope command that talks to a server carries the connection
// flags: against a server that requires TLS, a client certificate and a
// bearer token, each command succeeds with --tls-ca, --tls-cert/--tls-key and
// the token (from --auth-token-file and from ATTNSCOPE_TOKEN), and is refused
// without the token. The list of commands is read from `attnscope --help`, so
// a new remote command is covered or the test says it is missing.
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "tests/cli/run_cli.h"
#include "tests/rpc/rpc_security_fixture.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// A small request of each command that runs on a server.
const std::map<std::string, std::vector<std::string>>& RemoteCommands() {
  static const auto* commands = new std::map<std::string, std::vector<std::string>>{
      {"tokenize", {"tokenize", "--text", "Over TLS", "--json"}},
      {"analyze", {"analyze", "--text", "Over TLS", "--json"}},
      {"generate", {"generate", "--text", "Over TLS", "--max-new-tokens", "2", "--json"}},
      {"models", {"models", "--json"}},
      {"health", {"health"}},
      {"heads", {"heads", "--n", "6", "--seqs", "1", "--seed", "3", "--json"}},
      {"ablate", {"ablate", "--heads", "1.2", "--n", "6", "--seqs", "1", "--json"}},
      {"lens", {"lens", "--text", "Over TLS", "--json"}},
      {"dla", {"dla", "--text", "Over TLS", "--json"}},
      {"patch", {"patch", "--clean", "Over TLS", "--corrupted", "Over SSL", "--target-ids", "11,13",
                 "--json"}},
      // --output is added per run (it must not exist); the results are read
      // from that file.
      {"batch", {"batch", "--input", WriteSecretFile("batch-prompts.jsonl",
                                                     "{\"id\": \"p1\", \"text\": \"Over TLS\"}\n")}},
  };
  return *commands;
}

// The commands `attnscope --help` says run with --server: the names in the
// parentheses of its "With --server TARGET, every command [but ...] (...)"
// sentence, plus health.
std::set<std::string> CommandsTheHelpNamesForServers() {
  const CliResult help = RunCli({"--help"});
  std::string text = help.out + help.err;
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  std::set<std::string> names = {"health"};
  // Not std::regex: GCC 12 with ASan at -O1 warns inside <regex>
  // (maybe-uninitialized), and the build treats warnings as errors.
  const size_t begin = text.find("every command");
  if (begin == std::string::npos) return names;
  const size_t open = text.find('(', begin);
  if (open == std::string::npos) return names;
  const size_t from = open + 1;
  const size_t close = text.find(')', from);
  if (close == std::string::npos) return names;
  for (absl::string_view w :
       absl::StrSplit(absl::string_view(text).substr(from, close - from), absl::ByAnyChar(" ,"),
                      absl::SkipEmpty())) {
    const bool command = std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || c == '-';
    }) && w.front() != '-';
    if (command && w != "with" && w != "and") names.insert(std::string(w));
  }
  return names;
}

TEST_F(RpcSecurityTest, EveryRemoteCommandCarriesTlsTheClientCertificateAndTheToken) {
  const std::set<std::string> from_help = CommandsTheHelpNamesForServers();
  ASSERT_GE(from_help.size(), 7u) << "could not read the remote commands from attnscope --help";
  for (const std::string& name : from_help) {
    EXPECT_TRUE(RemoteCommands().count(name)) << "no request for remote command '" << name << "'";
  }

  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key,
                     "--tls-client-ca", certs().ca, "--auth-token-file", TokenFile()});
  const std::vector<std::string> tls = {"--server", server_->address(), "--tls-ca", certs().ca,
                                        "--tls-cert", certs().client_cert, "--tls-key",
                                        certs().client_key};
  int batch_runs = 0;
  auto run = [&](std::vector<std::string> connection, const std::vector<std::string>& command) {
    connection.insert(connection.end(), command.begin(), command.end());
    if (command.front() != "batch") return RunCli(connection);
    const std::string output = MakeTestCerts().dir + "/batch-results-" +
                               std::to_string(++batch_runs) + ".jsonl";
    connection.insert(connection.end(), {"--output", output});
    CliResult result = RunCli(connection);
    std::ifstream in(output);
    result.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return result;
  };
  std::vector<std::string> with_file = tls;
  with_file.insert(with_file.end(), {"--auth-token-file", TokenFile()});
  for (const auto& [name, command] : RemoteCommands()) {
    const CliResult by_file = run(with_file, command);
    EXPECT_EQ(by_file.exit_code, 0) << name << " with --auth-token-file: " << by_file.err;
    EXPECT_FALSE(by_file.out.empty()) << name;

    ASSERT_EQ(setenv("ATTNSCOPE_TOKEN", kToken, 1), 0);
    const CliResult by_env = run(tls, command);
    unsetenv("ATTNSCOPE_TOKEN");
    EXPECT_EQ(by_env.exit_code, 0) << name << " with ATTNSCOPE_TOKEN: " << by_env.err;

    if (name == "health") continue;  // the health service is open without a token
    const CliResult without = run(tls, command);
    EXPECT_EQ(without.exit_code, 1) << name << " without a token: " << without.out;
    // batch records a prompt's failure in its output and goes on.
    EXPECT_THAT(without.err + without.out, HasSubstr("UNAUTHENTICATED")) << name;
  }
}

}  // namespace
}  // namespace attnscope::testing
