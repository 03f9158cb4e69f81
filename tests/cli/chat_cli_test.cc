// attnscope tokenize / analyze with tokenizer.json tokenizers and chat
// templates, end to end: real processes on the fixtures' Llama 3 files and
// on a tiny random GPT-2 whose vocabulary covers Llama 3's ids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/run_cli.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using testing::RunCli;
using nlohmann::json;

const std::string kTokenizers = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/tokenizers";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json Llama3Chat() { return json::parse(ReadAll(kTokenizers + "/llama3/llama3_chat.json"))["chat"]; }

std::string WriteChatFile(const json& messages) {
  const std::string path = test::UniqueTempPath("chat.json");
  std::ofstream(path) << messages.dump();
  return path;
}

// Random N(0, scale)-ish values from a fixed LCG: reproducible weights.
std::vector<float> Random(size_t n, float scale, uint64_t seed) {
  std::vector<float> out(n);
  for (float& v : out) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    v = scale * (static_cast<float>((seed >> 33) % 20001) / 10000.0f - 1.0f);
  }
  return out;
}

// A 2-layer GPT-2 with random weights and Llama 3's 128,256-token vocabulary,
// next to the Llama 3 tokenizer files.
std::string TinyLlama3TokenizedModel() {
  const std::string dir = test::UniqueTempPath("tiny-gpt2-llama3-tokenizer");
  std::filesystem::create_directories(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(kTokenizers + "/llama3/" + f, dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  const int64_t v = 128256, d = 16, p = 128, layers = 2;
  json config = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", v},
                 {"n_positions", p}, {"n_embd", d}, {"n_layer", layers}, {"n_head", 2},
                 {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"},
                 {"bos_token_id", 128000}, {"eos_token_id", 128009}, {"tie_word_embeddings", true}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::vector<TensorToWrite> t;
  uint64_t seed = 1;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> values = Random(static_cast<size_t>(n), scale, ++seed);
    for (float& x : values) x += offset;
    t.push_back(MakeF32Tensor(name, shape, values));
  };
  add("transformer.wte.weight", {v, d}, 0.5f);
  add("transformer.wpe.weight", {p, d}, 0.1f);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {d}, 0.1f, 1.0f);
    add(h + "ln_1.bias", {d}, 0.1f);
    add(h + "attn.c_attn.weight", {d, 3 * d}, 0.5f);
    add(h + "attn.c_attn.bias", {3 * d}, 0.1f);
    add(h + "attn.c_proj.weight", {d, d}, 0.2f);
    add(h + "attn.c_proj.bias", {d}, 0.1f);
    add(h + "ln_2.weight", {d}, 0.1f, 1.0f);
    add(h + "ln_2.bias", {d}, 0.1f);
    add(h + "mlp.c_fc.weight", {d, 4 * d}, 0.2f);
    add(h + "mlp.c_fc.bias", {4 * d}, 0.1f);
    add(h + "mlp.c_proj.weight", {4 * d, d}, 0.2f);
    add(h + "mlp.c_proj.bias", {d}, 0.1f);
  }
  add("transformer.ln_f.weight", {d}, 0.1f, 1.0f);
  add("transformer.ln_f.bias", {d}, 0.1f);
  EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", t).ok());
  return dir;
}

TEST(TokenizeCli, FollowsHuggingFaceSpecialTokenDefaultsOnTokenizerOnlyDirectories) {
  const std::string llama3 = kTokenizers + "/llama3";  // tokenizer files only, no weights
  auto with = RunCli({"tokenize", "--model", llama3, "--text", "Hello world"});
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, "128000 9906 1917\n");
  auto without = RunCli({"tokenize", "--model", llama3, "--text", "Hello world", "--no-special-tokens"});
  EXPECT_EQ(without.out, "9906 1917\n");
  auto gpt2 = RunCli({"tokenize", "--text", "Hello world"});  // the bundled GPT-2 adds nothing
  EXPECT_EQ(gpt2.out, "15496 995\n");
  auto llama2 = RunCli({"tokenize", "--model", kTokenizers + "/llama2", "--text", "Hello world", "--json"});
  EXPECT_EQ(json::parse(llama2.out)["ids"], json({1, 15043, 3186}));
}

TEST(TokenizeCli, ChatPrintsTheRenderedTextAndItsIds) {
  const json chat = Llama3Chat();
  ASSERT_EQ(chat["renders"].size(), 2u);
  const std::string file = WriteChatFile(chat["messages"]);
  for (const auto& render : chat["renders"]) {
    std::vector<std::string> args = {"tokenize", "--model", kTokenizers + "/llama3", "--chat", file, "--json"};
    if (render["add_generation_prompt"].get<bool>()) args.push_back("--add-generation-prompt");
    auto r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json out = json::parse(r.out);
    EXPECT_EQ(out["text"], render["tokenize_false_text"]);
    EXPECT_EQ(out["ids"], render["tokenize_true_ids"]);
  }
  std::filesystem::remove(file);
}

// The reference renders of Qwen3's chat with the generation prompt: thinking
// on (the default) and off (enable_thinking=False); nullptr where missing.
std::pair<const json*, const json*> QwenRenders(const json& chat) {
  const json* on = nullptr;
  const json* off = nullptr;
  for (const json& render : chat["renders"]) {
    if (!render["add_generation_prompt"].get<bool>()) continue;
    (render.value("enable_thinking", true) ? on : off) = &render;
  }
  return {on, off};
}

// Qwen3's render with enable_thinking=False (Hugging Face's reference ids),
// asked for with --chat-template-kwargs or inside the --chat file as vLLM's
// request body carries it; without it the default render (thinking on).
TEST(TokenizeCli, ChatTemplateKwargsGiveHuggingFacesRender) {
  const json chat =
      json::parse(ReadAll(kTokenizers + "/qwen3/qwen3_chat.json"))["chat"];
  const auto [on, off] = QwenRenders(chat);
  ASSERT_NE(off, nullptr);
  ASSERT_NE(on, nullptr);
  ASSERT_NE((*off)["tokenize_true_ids"], (*on)["tokenize_true_ids"]);
  const std::string qwen3 = kTokenizers + "/qwen3";
  const std::string messages = WriteChatFile(chat["messages"]);
  const std::string with_kwargs = WriteChatFile(
      {{"messages", chat["messages"]}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  const std::vector<std::pair<std::vector<std::string>, const json*>> runs = {
      {{"--chat", messages}, on},
      {{"--chat", messages, "--chat-template-kwargs", R"({"enable_thinking": false})"}, off},
      {{"--chat", with_kwargs}, off},
      // The flag over the file's variables.
      {{"--chat", with_kwargs, "--chat-template-kwargs", R"({"enable_thinking": true})"}, on},
  };
  for (const auto& [flags, expected] : runs) {
    std::vector<std::string> args = {"tokenize", "--model", qwen3, "--add-generation-prompt", "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json out = json::parse(r.out);
    EXPECT_EQ(out["text"], (*expected)["tokenize_false_text"]) << flags.back();
    EXPECT_EQ(out["ids"], (*expected)["tokenize_true_ids"]) << flags.back();
  }
  // Refused before anything runs.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--text", "hi", "--chat-template-kwargs", "{}"}, "--chat-template-kwargs needs --chat FILE"},
      {{"--chat", messages, "--chat-template-kwargs", "[]"}, "expected a JSON object"},
      {{"--chat", messages, "--chat-template-kwargs", R"({"add_generation_prompt": true})"},
       "\"add_generation_prompt\" is the request's own"},
  };
  for (const auto& [flags, message] : refused) {
    std::vector<std::string> args = {"tokenize", "--model", qwen3};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
  std::filesystem::remove(messages);
  std::filesystem::remove(with_kwargs);
}

// tokenize --input: many prompts in one process, each line's ids as Hugging
// Face gives them (Llama 3's BOS rule, Qwen3's chat renders with and
// without enable_thinking), bad lines as error lines in their place.
TEST(TokenizeCli, InputFileGivesEachLinesIdsInOneProcess) {
  const json chat = json::parse(ReadAll(kTokenizers + "/qwen3/qwen3_chat.json"))["chat"];
  const auto [on, off] = QwenRenders(chat);
  ASSERT_NE(off, nullptr);
  ASSERT_NE(on, nullptr);
  const std::string qwen_input = test::UniqueTempPath("tokenize-qwen.jsonl");
  std::ofstream(qwen_input)
      << json({{"id", "on"}, {"messages", chat["messages"]}, {"add_generation_prompt", true}}).dump()
      << "\n"
      << json({{"id", "off"},
               {"messages", chat["messages"]},
               {"add_generation_prompt", true},
               {"chat_template_kwargs", {{"enable_thinking", false}}}})
             .dump()
      << "\n";
  auto r = RunCli({"tokenize", "--model", kTokenizers + "/qwen3", "--input", qwen_input});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> lines;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0]["id"], "on");
  EXPECT_EQ(lines[0]["ids"], (*on)["tokenize_true_ids"]);
  EXPECT_EQ(lines[0]["text"], (*on)["tokenize_false_text"]);
  EXPECT_EQ(lines[1]["id"], "off");
  EXPECT_EQ(lines[1]["ids"], (*off)["tokenize_true_ids"]);
  EXPECT_EQ(lines[1]["text"], (*off)["tokenize_false_text"]);

  const std::string llama3 = kTokenizers + "/llama3";
  const std::string input = test::UniqueTempPath("tokenize-llama3.jsonl");
  std::ofstream(input) << "{\"id\": \"hw\", \"text\": \"Hello world\"}\n"
                       << "{\"id\": \"bare\", \"text\": \"Hello world\", \"add_special_tokens\": false}\n"
                       << "not JSON\n"
                       << "{\"id\": \"ids\", \"ids\": [1, 2]}\n"
                       << "{\"text\": \"Hello\"}\n";
  r = RunCli({"tokenize", "--model", llama3, "--input", input});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // some lines failed; the rest have their ids
  lines.clear();
  out = std::istringstream(r.out);
  for (std::string line; std::getline(out, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_EQ(lines[0], json::parse(R"({"id": "hw", "ids": [128000, 9906, 1917],
      "tokens": ["<|begin_of_text|>", "Hello", "\u0120world"], "offsets": [[0, 0], [0, 5], [5, 11]]})"));
  EXPECT_EQ(lines[1]["ids"], json({9906, 1917}));
  EXPECT_EQ(lines[2]["id"], 3);
  EXPECT_EQ(lines[2]["line"], 3);
  EXPECT_THAT(lines[2]["error"].get<std::string>(), HasSubstr("not a JSON object"));
  EXPECT_THAT(lines[3]["error"].get<std::string>(), HasSubstr("nothing to tokenize"));
  EXPECT_EQ(lines[4]["id"], 5);  // no id: its line number
  EXPECT_EQ(lines[4]["ids"], json({128000, 9906}));

  // Plain text, one prompt a line; --no-special-tokens applies to each.
  const std::string text = test::UniqueTempPath("tokenize-llama3.txt");
  std::ofstream(text) << "Hello world\nHello\n";
  r = RunCli({"tokenize", "--model", llama3, "--input", text, "--no-special-tokens"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"id\":1,\"ids\":[9906,1917],\"tokens\":[\"Hello\",\"\u0120world\"],\"offsets\":"
            "[[0,5],[5,11]]}\n{\"id\":2,\"ids\":[9906],\"tokens\":[\"Hello\"],\"offsets\":[[0,5]]}\n");

  // Usage errors change nothing.
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--input", input, "--text", "hi"}, "--text describes one prompt"},
           {{"--input", input, "--chat", input}, "--chat describes one prompt"},
           {{"--text", "hi", "--format", "jsonl"}, "--format needs --input FILE"},
           {{"--input", input, "--format", "csv"}, "--format 'csv' is not one of"}}) {
    std::vector<std::string> args = {"tokenize", "--model", llama3};
    args.insert(args.end(), flags.begin(), flags.end());
    r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(r.out, "");
  }
  r = RunCli({"tokenize", "--model", llama3, "--input", input + ".missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot open the file"));
  for (const std::string& f : {qwen_input, input, text}) std::filesystem::remove(f);
}

TEST(AnalyzeCli, ChatOnALlama3TokenizedModelMarksTheTemplateStructural) {
  const std::string model = TinyLlama3TokenizedModel();
  const std::string file = WriteChatFile(Llama3Chat()["messages"]);
  auto r = RunCli({"analyze", "--model", model, "--chat", file, "--add-generation-prompt", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["template"], "chat");
  EXPECT_EQ(out["input_ids"], Llama3Chat()["renders"][1]["tokenize_true_ids"]);
  // BOS, 3 x (header start, role, header end, "\n\n", eot) but the last
  // turn's eot, plus the generation prompt's 4 tokens.
  std::vector<int64_t> expected;
  const auto& ids = out["input_ids"];
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id >= 128000 || id == 271 || id == 9125 || id == 882 || id == 78191) expected.push_back(static_cast<int64_t>(i));
  }
  EXPECT_EQ(out["structural"].get<std::vector<int64_t>>(), expected);
  auto report = RunCli({"analyze", "--model", model, "--chat", file, "--color", "never"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  const size_t plain = Llama3Chat()["renders"][0]["tokenize_true_ids"].size();  // no generation prompt
  EXPECT_THAT(report.out, HasSubstr("attnscope report  " + std::to_string(plain) + " tokens"));
  EXPECT_THAT(report.out, HasSubstr("Context health"));
  std::filesystem::remove_all(model);
  std::filesystem::remove(file);
}

TEST(ChatCliErrors, NameTheFileAndTheProblem) {
  auto missing = RunCli({"tokenize", "--model", kTokenizers + "/llama3", "--chat", "/nonexistent/chat.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/chat.json"));
  const std::string bad = test::UniqueTempPath("bad-chat.json");
  std::ofstream(bad) << R"([{"role": "user"}])";
  auto malformed = RunCli({"tokenize", "--model", kTokenizers + "/llama3", "--chat", bad});
  EXPECT_THAT(malformed.err, HasSubstr(bad + ": [0].content"));
  const std::string good = WriteChatFile(Llama3Chat()["messages"]);
  auto no_template = RunCli({"tokenize", "--model", kTokenizers + "/llama2", "--chat", good});
  EXPECT_EQ(no_template.exit_code, 1);
  EXPECT_THAT(no_template.err, HasSubstr("llama2 has no chat template"));
  auto both = RunCli({"tokenize", "--text", "x", "--chat", bad});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("give exactly one of --text"));
  // A tokenizer.json attnscope cannot read: the model still runs on ids, text
  // prompts say why they cannot.
  const std::string model = TinyLlama3TokenizedModel();
  const std::string broken = test::UniqueTempPath("broken-tokenizer-model");
  std::filesystem::create_directories(broken);
  for (const char* f : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(model + "/" + f, broken + "/" + f, std::filesystem::copy_options::overwrite_existing);
  }
  json tok = json::parse(ReadAll(kTokenizers + "/llama3/tokenizer.json"));
  tok["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", ""}};
  std::ofstream(broken + "/tokenizer.json") << tok.dump();
  auto text = RunCli({"analyze", "--model", broken, "--text", "hi"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_THAT(text.err, HasSubstr("tokenizer.json: normalizer.type \"Precompiled\" is not supported"));
  auto ids = RunCli({"analyze", "--model", broken, "--ids", "128000,9906,1917", "--json"});
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
  const json by_ids = json::parse(ids.out, nullptr, false);
  ASSERT_FALSE(by_ids.is_discarded()) << ids.out;
  EXPECT_EQ(by_ids["input_ids"], json({128000, 9906, 1917}));
  for (const std::string& path : {model, broken, bad, good}) std::filesystem::remove_all(path);
}

}  // namespace
}  // namespace attnscope
