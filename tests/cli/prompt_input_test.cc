// Prompts from files and stdin (--text-file, --text -, --ids-file): any UTF-8
// with control characters, prompts beyond Linux's 128 KiB argument limit,
// and clear runtime errors for files that are not text prompts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/json_compare.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::RunCli;
using testing::RunCliWithStdin;

// Text with every kind of character a file may hold but an argument rarely
// does: tab, CR, LF, ESC, other C0 controls, DEL, accents, CJK and an emoji.
const std::string kControlText =
    "line one\tcol\r\nline two \x1b[1mbold\x1b[0m \x01\x02\x7f caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
    "\xf0\x9f\x98\x80 end\n";

class PromptInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "prompt-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string dir_;
};

TEST_F(PromptInputTest, FileAndStdinTokenizeLikeTheArgument) {
  const auto by_arg = RunCli({"tokenize", "--text", kControlText, "--json"});
  ASSERT_EQ(by_arg.exit_code, 0) << by_arg.err;
  const auto by_file = RunCli({"tokenize", "--text-file", Write("p.txt", kControlText), "--json"});
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  const auto by_stdin = RunCliWithStdin({"tokenize", "--text", "-", "--json"}, kControlText);
  ASSERT_EQ(by_stdin.exit_code, 0) << by_stdin.err;
  EXPECT_EQ(by_file.out, by_arg.out);
  EXPECT_EQ(by_stdin.out, by_arg.out);
  EXPECT_EQ(json::parse(by_file.out)["offsets"].back()[1], kControlText.size())
      << "every byte, the trailing newline included";
}

TEST_F(PromptInputTest, AnalyzeAndGenerateReadFilesAndStdin) {
  const std::string text = "The cat sat on the mat.\n\tThe cat sat on the mat.";
  auto strip = [](json j) {
    j.erase("forward_seconds");
    return j;
  };
  const auto by_arg = RunCli({"analyze", "--text", text, "--json"});
  ASSERT_EQ(by_arg.exit_code, 0) << by_arg.err;
  const auto by_file = RunCli({"analyze", "--text-file", Write("a.txt", text), "--json"});
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  const auto by_stdin = RunCliWithStdin({"analyze", "--text", "-", "--json"}, text);
  ASSERT_EQ(by_stdin.exit_code, 0) << by_stdin.err;
  // MaxJsonDiff, not ==: a NaN statistic is null on both sides, and null == null.
  EXPECT_EQ(test::MaxJsonDiff(strip(json::parse(by_file.out)), strip(json::parse(by_arg.out))), 0.0);
  EXPECT_EQ(test::MaxJsonDiff(strip(json::parse(by_stdin.out)), strip(json::parse(by_arg.out))), 0.0);

  const json ids = json::parse(by_arg.out)["input_ids"];
  std::string listed;  // one id a line, as a file of ids usually is
  for (const auto& id : ids) listed += std::to_string(id.get<int64_t>()) + "\n";
  const auto by_ids_file = RunCli({"analyze", "--ids-file", Write("ids.txt", listed), "--json"});
  ASSERT_EQ(by_ids_file.exit_code, 0) << by_ids_file.err;
  EXPECT_EQ(json::parse(by_ids_file.out)["input_ids"], ids);
  EXPECT_EQ(test::MaxJsonDiff(json::parse(by_ids_file.out)["z"], json::parse(by_arg.out)["z"]), 0.0);

  const auto gen_arg = RunCli({"generate", "--text", text, "--max-new-tokens", "3", "--json"});
  const auto gen_file =
      RunCli({"generate", "--text-file", Write("g.txt", text), "--max-new-tokens", "3", "--json"});
  const auto gen_stdin =
      RunCliWithStdin({"generate", "--text", "-", "--max-new-tokens", "3", "--json"}, text);
  ASSERT_EQ(gen_arg.exit_code, 0) << gen_arg.err;
  ASSERT_EQ(gen_file.exit_code, 0) << gen_file.err;
  ASSERT_EQ(gen_stdin.exit_code, 0) << gen_stdin.err;
  auto tokens = [](const std::string& out) { return json::parse(out)["tokens"]; };
  EXPECT_EQ(tokens(gen_file.out), tokens(gen_arg.out));
  EXPECT_EQ(tokens(gen_stdin.out), tokens(gen_arg.out));
}

TEST_F(PromptInputTest, PromptsBeyondTheArgumentLimitWorkThroughFileAndStdin) {
  // Linux caps one argument at 128 KiB (MAX_ARG_STRLEN): such a prompt cannot
  // be passed as --text at all.
  std::string big;
  while (big.size() < 200 * 1024) big += "The cat sat on the mat. Then it slept.\n";
  const auto as_argument = RunCli({"tokenize", "--text", big});
  EXPECT_EQ(as_argument.exit_code, -1) << "the kernel refuses the argument";
  EXPECT_THAT(as_argument.err, HasSubstr("Argument list too long"));

  const auto by_file = RunCli({"tokenize", "--text-file", Write("big.txt", big), "--json"});
  ASSERT_EQ(by_file.exit_code, 0) << by_file.err;
  const auto by_stdin = RunCliWithStdin({"tokenize", "--text", "-", "--json"}, big);
  ASSERT_EQ(by_stdin.exit_code, 0) << by_stdin.err;
  EXPECT_EQ(by_file.out, by_stdin.out);
  const json j = json::parse(by_file.out);
  EXPECT_EQ(j["offsets"].back()[1], big.size());
  EXPECT_GT(j["ids"].size(), 40000u);
  // analyze reads it too, and says how many tokens the model can take.
  const auto too_long = RunCli({"analyze", "--text-file", dir_ + "/big.txt"});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err, HasSubstr("tokens"));
}

TEST_F(PromptInputTest, FilesThatAreNotTextPromptsAreRuntimeErrors) {
  // A NUL byte is text: GPT-2's byte-level BPE maps byte 0 to "\u0100" (id
  // 188 of the vocabulary), between "ab" (397) and "cd" (10210).
  const auto nul =
      RunCli({"tokenize", "--text-file", Write("nul.txt", std::string("ab\0cd", 5)), "--json"});
  ASSERT_EQ(nul.exit_code, 0) << nul.err;
  EXPECT_EQ(json::parse(nul.out)["ids"], json::parse("[397, 188, 10210]"));
  const auto bad = RunCli({"analyze", "--text-file", Write("bad.txt", "ok \xff")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("bad.txt: invalid UTF-8 at byte 3"));
  const auto empty = RunCli({"analyze", "--text-file", Write("empty.txt", "")});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_THAT(empty.err, HasSubstr("empty.txt is empty"));
  const auto empty_stdin = RunCliWithStdin({"analyze", "--text", "-"}, "");
  EXPECT_EQ(empty_stdin.exit_code, 1);
  EXPECT_THAT(empty_stdin.err, HasSubstr("stdin"));
  const auto bad_ids = RunCli({"analyze", "--ids-file", Write("ids.txt", "1,,2\n")});
  EXPECT_EQ(bad_ids.exit_code, 1);
  EXPECT_THAT(bad_ids.err, HasSubstr("ids.txt: empty item"));
  const auto missing = RunCli({"generate", "--text-file", dir_ + "/missing.txt"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("missing.txt"));
}

}  // namespace
}  // namespace attnscope
