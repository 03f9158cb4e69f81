// attnscope --server HOST:PORT tokenize|analyze --export/--viewer|heads|ablate
// against the real server on a loopback port: every output equals the local
// command's (the same export bytes, the same viewer data, the same reports),
// on the bundled model and on the Llama-family fixture. The only difference
// allowed is where the model is named: its directory locally, its served
// name remotely (heads' "Model:" line and "model" key, the viewer's title).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/json_compare.h"
#include "tests/common/temp_path.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string DataDir(const std::string& sub) { return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/" + sub; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = test::UniqueTempPath("remote-cli-" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The JSON embedded in a viewer page, without its title.
json ViewerData(const std::string& path) {
  const std::string page = ReadAll(path);
  const std::string open = R"(id="attnscope-data">)";
  const size_t begin = page.find(open);
  const size_t end = page.find("</script>", begin);
  if (begin == std::string::npos || end == std::string::npos) return json();
  json data = json::parse(page.substr(begin + open.size(), end - begin - open.size()), nullptr,
                          false);
  if (data.is_object()) data.erase("title");
  return data;
}

// A model directory: the files of `weights` linked, plus `tokenizer`'s.
std::string Combined(const std::string& name, const std::string& weights,
                     const std::string& tokenizer) {
  // A unique parent: the directory's own name stays the model's.
  const std::string dir = test::UniqueTempPath("remote-cli") + "/remote-cli-" + name;
  std::filesystem::create_directories(dir);
  for (const std::string& from : {weights, tokenizer}) {
    for (const auto& entry : std::filesystem::directory_iterator(from)) {
      std::filesystem::create_symlink(entry.path(), dir + "/" + entry.path().filename().string());
    }
  }
  return dir;
}

// Equal JSON documents, compared with MaxJsonDiff rather than `a == b`:
// nlohmann's equality holds for null == null, which is how a NaN statistic
// is written on both sides.
void ExpectSameNumbers(const json& a, const json& b) {
  std::string mismatch;
  EXPECT_EQ(test::MaxJsonDiff(a, b, &mismatch), 0.0) << mismatch;
}

class RpcRemoteCliTest : public RpcTest {
 protected:
  // `args` locally with --model `dir`, then through the server with
  // --model `name`; both must succeed.
  std::pair<CliResult, CliResult> Both(const std::vector<std::string>& args,
                                       const std::string& dir, const std::string& name) {
    CliResult l = RunCli(WithModel(args, "--model", dir));
    CliResult r = RunCli(Remote(WithModel(args, "--model", name)));
    EXPECT_EQ(l.exit_code, 0) << l.err;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return {l, r};
  }

  // analyze --json --export --viewer both ways: equal JSON (but the timing),
  // byte-identical exports and equal viewer data.
  void ExpectSameAnalysis(const std::vector<std::string>& prompt, const std::string& dir,
                          const std::string& name, const std::vector<std::string>& outputs = {}) {
    const std::string out_dir = test::UniqueTempPath("remote-cli-" + name);
    std::filesystem::create_directories(out_dir);
    const std::string stem = out_dir + "/" + name;
    std::vector<std::string> local = {"analyze", "--json", "--export", stem + "-local.safetensors",
                                      "--viewer", stem + "-local.html"};
    local.insert(local.end(), prompt.begin(), prompt.end());
    local.insert(local.end(), outputs.begin(), outputs.end());
    std::vector<std::string> remote = local;
    remote[3] = stem + "-remote.safetensors";
    remote[5] = stem + "-remote.html";
    CliResult l = RunCli(WithModel(local, "--model", dir));
    CliResult r = RunCli(Remote(WithModel(remote, "--model", name)));
    ASSERT_EQ(l.exit_code, 0) << l.err;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("wrote " + stem + "-remote.safetensors"));
    json a = json::parse(l.out), b = json::parse(r.out);
    a.erase("forward_seconds");
    b.erase("forward_seconds");
    ExpectSameNumbers(a, b);
    const std::string exported = ReadAll(stem + "-local.safetensors");
    EXPECT_GT(exported.size(), 1000u);
    EXPECT_TRUE(exported == ReadAll(stem + "-remote.safetensors")) << "exports differ";
    const json viewer = ViewerData(stem + "-local.html");
    ASSERT_TRUE(viewer.is_object());
    ExpectSameNumbers(viewer, ViewerData(stem + "-remote.html"));
  }

  static std::vector<std::string> WithModel(std::vector<std::string> args, const char* flag,
                                            const std::string& value) {
    args.insert(args.begin() + 1, {flag, value});
    return args;
  }
  std::vector<std::string> Remote(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--server", server_->address()});
    return args;
  }
};

// JSON outputs equal once "model" (directory vs served name) is dropped.
void ExpectSameJsonButModel(const CliResult& local, const CliResult& remote,
                            const std::string& served) {
  json a = json::parse(local.out, nullptr, false), b = json::parse(remote.out, nullptr, false);
  ASSERT_TRUE(a.is_object()) << local.out;
  ASSERT_TRUE(b.is_object()) << remote.out;
  EXPECT_EQ(b["model"], served);
  a.erase("model");
  b.erase("model");
  ExpectSameNumbers(a, b);
}

// Text outputs equal after their first line ("Model: ..."), which names the model.
void ExpectSameTextButModelLine(const CliResult& local, const CliResult& remote,
                                const std::string& served) {
  const size_t a = local.out.find('\n'), b = remote.out.find('\n');
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(remote.out.substr(0, b), "Model: " + served);
  EXPECT_GT(local.out.size(), a + 100);
  EXPECT_EQ(local.out.substr(a), remote.out.substr(b));
}

TEST_F(RpcRemoteCliTest, AnalyzeExportAndViewerEqualTheLocalFilesOnTheBundledModel) {
  StartServer({"--model", "tiny=" + BundledModelDir()});
  ExpectSameAnalysis({"--text", "Caf\xc3\xa9 na\xc3\xafve \xe6\x9d\xb1\xe4\xba\xac, the cat sat."},
                     BundledModelDir(), "tiny");
  // Query blocks of 4 rows on both sides: blocks are stitched the same way.
  ExpectSameAnalysis({"--ids", "464,3290,286,262,995,318,257,1049,13", "--block-size", "4"},
                     BundledModelDir(), "tiny");
  // Selected heads in half precision for the export, others for the page:
  // the server sends the union, each file keeps its own.
  ExpectSameAnalysis({"--text", "The cat sat on the mat because it was warm."}, BundledModelDir(),
                     "tiny",
                     {"--attention-layers", "1,4-5", "--attention-heads", "0,3",
                      "--attention-dtype", "float16", "--viewer-layers", "2", "--viewer-heads",
                      "1-2"});
  // An export of half without a page travels as half: the server's rounding
  // equals the local conversion, byte for byte.
  const std::string half = test::UniqueTempPath("remote-cli-half");
  std::filesystem::create_directories(half);
  const std::vector<std::string> args = {"analyze", "--text", "A dog ran.", "--json",
                                         "--attention-dtype", "float16", "--attention-heads",
                                         "2", "--export"};
  std::vector<std::string> local = args, remote = args;
  local.push_back(half + "/local.safetensors");
  remote.push_back(half + "/remote.safetensors");
  CliResult l = RunCli(WithModel(local, "--model", BundledModelDir()));
  CliResult r = RunCli(Remote(WithModel(remote, "--model", "tiny")));
  ASSERT_EQ(l.exit_code, 0) << l.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string exported = ReadAll(half + "/local.safetensors");
  EXPECT_GT(exported.size(), 1000u);
  EXPECT_TRUE(exported == ReadAll(half + "/remote.safetensors")) << "half exports differ";
}

TEST_F(RpcRemoteCliTest, AnalyzeExportAndViewerEqualTheLocalFilesOnLlama) {
  const std::string llama = DataDir("models/llama");
  StartServer({"--model", "llama=" + llama});
  const json stats = json::parse(ReadAll(llama + "/stats.json"));
  std::string ids;
  for (const auto& id : stats["input_ids"]) ids += (ids.empty() ? "" : ",") + id.dump();
  ExpectSameAnalysis({"--ids", ids}, llama, "llama");
}

// On a terminal, a remote analysis shows the server's progress as a local one
// does (layer i/N from the layer events, T from their norms).
TEST_F(RpcRemoteCliTest, AnalyzeShowsTheServersLayerProgressOnATerminal) {
  StartServer({"--model", "tiny=" + BundledModelDir()});
  const CliResult terminal = RunCliOnTerminal("--server " + server_->address() +
                                              " analyze --ids 464,3797,3332,319,262,2603");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.out;
  EXPECT_THAT(terminal.out, HasSubstr("analyze: layer 1/6  "));
  EXPECT_THAT(terminal.out, HasSubstr("analyze: layer 6/6  6 tokens  "));
  EXPECT_THAT(terminal.out, HasSubstr("Context health"));
}

TEST_F(RpcRemoteCliTest, TokenizeEqualsTheLocalOutput) {
  // Llama 3's tokenizer and chat template next to the Llama fixture's weights.
  const std::string llama3 = Combined("llama3", DataDir("models/llama"), DataDir("tokenizers/llama3"));
  StartServer({"--model", "tiny=" + BundledModelDir(), "--model", "llama3=" + llama3});
  const std::string text = "Hello, world! \xe6\x9d\xb1\xe4\xba\xac   tabs\tand\nlines";
  for (const auto& [dir, name] : std::vector<std::pair<std::string, std::string>>{
           {BundledModelDir(), "tiny"}, {llama3, "llama3"}}) {
    auto [l, r] = Both({"tokenize", "--text", text, "--json"}, dir, name);
    EXPECT_EQ(l.out, r.out) << name;
    auto [l2, r2] = Both({"tokenize", "--text", text}, dir, name);
    EXPECT_EQ(l2.out, r2.out) << name;
    auto [l3, r3] = Both({"tokenize", "--text", text, "--no-special-tokens", "--json"}, dir, name);
    EXPECT_EQ(l3.out, r3.out) << name;
  }
  const std::string chat = Write(
      "chat.json", json::parse(ReadAll(DataDir("tokenizers/llama3/llama3_chat.json")))["chat"].dump());
  auto [l, r] = Both({"tokenize", "--chat", chat, "--add-generation-prompt", "--json"}, llama3,
                     "llama3");
  EXPECT_THAT(l.out, HasSubstr("<|start_header_id|>assistant<|end_header_id|>"));
  EXPECT_EQ(l.out, r.out);
  // The text of a file and of stdin travel the same way.
  const std::string file = Write("text.txt", text);
  auto [l4, r4] = Both({"tokenize", "--text-file", file, "--json"}, llama3, "llama3");
  EXPECT_EQ(l4.out, r4.out);
  const CliResult piped = RunCliWithStdin(
      {"--server", server_->address(), "tokenize", "--model", "llama3", "--text", "-", "--json"},
      text);
  EXPECT_EQ(piped.out, l4.out) << piped.err;
}

TEST_F(RpcRemoteCliTest, HeadsAndAblateEqualTheLocalOutputOnTheBundledModel) {
  StartServer({"--model", "tiny=" + BundledModelDir()});
  const std::string dir = BundledModelDir();
  auto [l, r] = Both({"heads", "--n", "20", "--seqs", "2", "--seed", "7", "--json"}, dir, "tiny");
  ExpectSameJsonButModel(l, r, "tiny");
  auto [lt, rt] = Both({"heads", "--n", "20", "--seqs", "2", "--color", "always"}, dir, "tiny");
  ExpectSameTextButModelLine(lt, rt, "tiny");
  const std::string text = Write("probe.txt", "The quick brown fox jumps over the lazy dog.");
  auto [lx, rx] = Both({"heads", "--text-file", text, "--json", "--top", "3"}, dir, "tiny");
  ExpectSameJsonButModel(lx, rx, "tiny");
  EXPECT_EQ(json::parse(lx.out)["probe"]["source"], "text");
  auto [la, ra] = Both({"ablate", "--heads", "1.4,5.3", "--n", "20", "--seqs", "2", "--json"},
                       dir, "tiny");
  ExpectSameJsonButModel(la, ra, "tiny");
  EXPECT_EQ(json::parse(la.out)["rows"].size(), 4u);
  auto [lm, rm] = Both({"ablate", "--heads", "2.1", "--mode", "mean", "--text-file", text}, dir,
                       "tiny");
  ExpectSameTextButModelLine(lm, rm, "tiny");
}

TEST_F(RpcRemoteCliTest, HeadsAndAblateEqualTheLocalOutputOnLlama) {
  const std::string llama = DataDir("models/llama");
  StartServer({"--model", "llama=" + llama});
  // The fixture's vocabulary is 256 tokens: the probe comes from a file.
  std::string lines;
  for (int s = 0; s < 3; ++s) {
    std::string span;
    for (int k = 0; k < 30; ++k) span += "," + std::to_string(3 + (k * 41 + s * 17) % 250);
    lines += "1" + span + span + "\n";
  }
  const std::string probe = Write("llama-probe.txt", lines);
  auto [l, r] = Both({"heads", "--ids-file", probe, "--json"}, llama, "llama");
  ExpectSameJsonButModel(l, r, "llama");
  EXPECT_EQ(json::parse(l.out)["probe"]["num_sequences"], 3);
  auto [lt, rt] = Both({"heads", "--ids-file", probe, "--color", "never"}, llama, "llama");
  ExpectSameTextButModelLine(lt, rt, "llama");
  auto [la, ra] = Both({"ablate", "--ids-file", probe, "--heads", "0.1,2.7", "--mode", "mean"},
                       llama, "llama");
  ExpectSameTextButModelLine(la, ra, "llama");
}

// lens, dla and patch through the Lens and Patch RPCs: the same JSON (but
// the model's name and the timing) and the same text as locally.
TEST_F(RpcRemoteCliTest, LensDlaAndPatchEqualTheLocalOutput) {
  StartServer({"--model", "tiny=" + BundledModelDir()});
  const std::string dir = BundledModelDir();
  const auto same_json = [](const CliResult& l, const CliResult& r, const char* timing) {
    json a = json::parse(l.out, nullptr, false), b = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(a.is_object()) << l.out;
    ASSERT_TRUE(b.is_object()) << r.out;
    EXPECT_EQ(b["model"], "tiny");
    for (json* j : {&a, &b}) {
      j->erase("model");
      j->erase(timing);
    }
    ExpectSameNumbers(a, b);
  };
  const std::vector<std::string> prompt = {"--text", "The Eiffel Tower is in the city of"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), prompt.begin(), prompt.end());
    return args;
  };
  // Every position but the last, whose next token is null (absent) on both
  // sides, which the NaN-safe comparison refuses by design.
  auto [l, r] = Both(with({"lens", "--json", "--positions", "0-8", "--top", "3", "--rollout",
                           "--rollout-queries", "3,9"}),
                     dir, "tiny");
  same_json(l, r, "forward_seconds");
  EXPECT_EQ(json::parse(l.out)["rollout"]["queries"].size(), 2u);
  EXPECT_EQ(json::parse(l.out)["lens"]["states"].size(), 7u);
  auto [lt, rt] = Both(with({"lens", "--positions", "0-4"}), dir, "tiny");
  EXPECT_GT(lt.out.size(), 200u);
  EXPECT_EQ(lt.out, rt.out);
  auto [ld, rd] = Both(with({"dla", "--json", "--positions", "2,5", "--target", " Paris"}), dir,
                       "tiny");
  same_json(ld, rd, "forward_seconds");
  auto [ldt, rdt] = Both(with({"dla", "--target-id", "6342"}), dir, "tiny");
  EXPECT_GT(ldt.out.size(), 200u);
  EXPECT_EQ(ldt.out, rdt.out);
  const std::vector<std::string> patch = {"patch", "--clean", "The Eiffel Tower is in the city of",
                                          "--corrupted", "The Colosseum is in the city of",
                                          "--target-a", " Paris", "--target-b", " Rome"};
  auto [lp, rp] = Both([&] { auto a = patch; a.push_back("--json"); return a; }(), dir, "tiny");
  same_json(lp, rp, "seconds");
  EXPECT_EQ(json::parse(lp.out)["recovery"].size(), 6u);
  auto [lpt, rpt] = Both([&] { auto a = patch; a.push_back("--residual"); return a; }(), dir,
                         "tiny");
  EXPECT_GT(lpt.out.size(), 200u);
  EXPECT_EQ(lpt.out, rpt.out);
  // Server-side errors name the field; usage errors stay on this side.
  CliResult e = RunCli(Remote({"dla", "--model", "tiny", "--target", " Eiffel Tower", "--text", "hi"}));
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_THAT(e.err, HasSubstr("INVALID_ARGUMENT: target_text \" Eiffel Tower\" is 4 tokens"));
  e = RunCli(Remote({"patch", "--model", "tiny", "--clean", "a b", "--corrupted", "a b c"}));
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_THAT(e.err, HasSubstr("same token length"));
  e = RunCli(Remote({"lens", "--chunk-rows", "8", "--text", "hi"}));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_THAT(e.err, HasSubstr("--chunk-rows works only without --server"));
}

TEST_F(RpcRemoteCliTest, ServerSideErrorsExitOneWithTheFieldAndTheServerKeepsServing) {
  StartServer({"--model", "tiny=" + BundledModelDir(), "--model", "llama=" + DataDir("models/llama")});
  const std::string at = server_->address();
  CliResult r = RunCli({"--server", at, "tokenize", "--model", "llama", "--text", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: text: model 'llama' has no tokenizer"));
  r = RunCli({"--server", at, "heads", "--model", "llama"});  // ids 1000..9999 > vocabulary 256
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: probe.random: random probe ids are drawn from 1000..9999"));
  r = RunCli({"--server", at, "heads", "--model", "tiny", "--n", "600"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("probe.random: n = 600 does not fit"));
  r = RunCli({"--server", at, "ablate", "--model", "tiny", "--heads", "9.0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: heads[0]: head 9.0 does not exist"));
  r = RunCli({"--server", at, "heads", "--model", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  // Usage errors stay on this side (exit 2).
  r = RunCli({"--server", at, "heads", "--threads", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--threads works only without --server"));
  r = RunCli({"--server", at, "heads", "--text", "a", "--n", "5"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli({"--server", at, "tokenize", "--ids", "1,2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(StillServes());
}

}  // namespace
}  // namespace attnscope::testing
