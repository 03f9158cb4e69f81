// The local --deadline of analyze, generate, heads and ablate on the bundled
// model: a deadline that is over before the work starts (one microsecond,
// counted from the parsing of the flags) stops the run with exit code 1, a
// message naming --deadline on stderr and nothing on stdout; a generous one
// gives the same output as no deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::RunCli;

struct Command {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> timing_keys;  // JSON keys that hold measured times
};

std::vector<Command> Commands() {
  return {
      {"analyze", {"analyze", "--text", "The cat sat on the mat.", "--json"}, {"forward_seconds"}},
      {"generate",
       {"generate", "--text", "The cat sat on the mat.", "--max-new-tokens", "4", "--json"},
       {"tokens_per_second"}},
      {"heads", {"heads", "--n", "8", "--seqs", "2", "--json"}, {}},
      {"ablate", {"ablate", "--heads", "1.2", "--n", "8", "--seqs", "2", "--json"}, {}},
  };
}

json WithoutTiming(const std::string& out, const std::vector<std::string>& keys) {
  json j = json::parse(out);
  for (const std::string& k : keys) {
    EXPECT_TRUE(j.contains(k)) << k;
    j.erase(k);
  }
  return j;
}

TEST(DeadlineCliTest, AnExpiredDeadlineStopsTheRunWithExitCodeOne) {
  for (const Command& c : Commands()) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--deadline", "0.000001", "--threads", "1"});
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("attnscope " + c.name + ": no complete answer within --deadline 1e-06 s; gave up"))
        << c.name;
    EXPECT_EQ(r.out, "") << c.name;
  }
}

TEST(DeadlineCliTest, AGenerousDeadlineChangesNothing) {
  for (const Command& c : Commands()) {
    std::vector<std::string> plain = c.args, bounded = c.args;
    plain.insert(plain.end(), {"--threads", "1"});
    bounded.insert(bounded.end(), {"--deadline", "600", "--threads", "1"});
    auto without = RunCli(plain);
    auto with = RunCli(bounded);
    ASSERT_EQ(without.exit_code, 0) << c.name << ": " << without.err;
    ASSERT_EQ(with.exit_code, 0) << c.name << ": " << with.err;
    EXPECT_EQ(WithoutTiming(with.out, c.timing_keys), WithoutTiming(without.out, c.timing_keys))
        << c.name;
  }
}

}  // namespace
}  // namespace attnscope
