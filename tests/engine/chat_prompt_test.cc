// Chat prompts and their structural positions for every template family:
// the fixtures' Llama 3 and Qwen3 conversations, and hand-written templates
// of the Llama 2, Mistral, Gemma and Phi-3 styles. Structural tokens are the
// role markers, role names, separators and special tokens, never content;
// with them left out of the baseline, a chat prompt's health no longer
// counts them as sinks.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/structural.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"
#include "tests/common/temp_path.h"

namespace attnscope::engine {
namespace {

const std::string kDir = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/tokenizers";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A directory with `tokenizer`'s tokenizer.json and a tokenizer_config.json
// holding `chat_template` and the special tokens.
std::string TemplateDir(const std::string& name, const std::string& tokenizer,
                        const std::string& chat_template, const std::string& bos,
                        const std::string& eos) {
  const std::string dir = test::UniqueTempPath("chat-" + name);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kDir + "/" + tokenizer + "/tokenizer.json", dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  nlohmann::json config = {{"chat_template", chat_template}, {"bos_token", bos}, {"eos_token", eos}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  return dir;
}

std::vector<int64_t> Structural(const Prompt& p) {
  return analysis::StructuralPositions(p.token_bytes, p.special, analysis::Structure::kAuto,
                                       p.from_template);
}

// Every token inside a message's content is not structural; every token
// inside one of `markers` (or special) is.
void ExpectMarkersNotContent(const Prompt& p, const nlohmann::json& messages,
                             const std::vector<std::string>& markers) {
  const std::vector<int64_t> s = Structural(p);
  auto is_structural = [&](size_t i) { return std::binary_search(s.begin(), s.end(), static_cast<int64_t>(i)); };
  auto inside = [&](size_t i, size_t begin, size_t end) {
    return p.offsets[i].first >= static_cast<int64_t>(begin) && p.offsets[i].second <= static_cast<int64_t>(end) &&
           p.offsets[i].second > p.offsets[i].first;
  };
  size_t marker_tokens = 0;
  for (const std::string& marker : markers) {
    for (size_t at = p.text.find(marker); at != std::string::npos; at = p.text.find(marker, at + 1)) {
      for (size_t i = 0; i < p.ids.size(); ++i) {
        if (!inside(i, at, at + marker.size())) continue;
        EXPECT_TRUE(is_structural(i)) << "token " << i << " '" << p.Display(i) << "' of marker " << marker;
        ++marker_tokens;
      }
    }
  }
  EXPECT_GT(marker_tokens, 3u);
  for (const auto& m : messages) {
    const std::string content = m["content"];
    const size_t at = p.text.find(content);
    ASSERT_NE(at, std::string::npos) << content;
    for (size_t i = 0; i < p.ids.size(); ++i) {
      if (inside(i, at, at + content.size())) {
        EXPECT_FALSE(is_structural(i)) << "content token " << i << " '" << p.Display(i) << "'";
      }
    }
  }
  for (size_t i = 0; i < p.ids.size(); ++i) {
    if (p.special[i]) {
      EXPECT_TRUE(is_structural(i)) << i;
    }
  }
}

class FixtureChatStructureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureChatStructureTest, StructuralTokensAreExactlyTheTemplates) {
  const std::string name = GetParam();
  auto bundle = LoadTokenizerBundle(kDir + "/" + name);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const auto chat = nlohmann::json::parse(ReadAll(kDir + "/" + name + "/" + name + "_chat.json"))["chat"];
  ASSERT_GE(chat["messages"].size(), 3u);
  for (bool gen : {false, true}) {
    auto p = PromptFromChat(**bundle, chat["messages"], gen);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->from_chat);
    // The content tokens, and only they, are not structural: their bytes
    // put together are the messages' contents.
    const std::vector<int64_t> s = Structural(*p);
    std::string content_bytes;
    size_t next = 0;
    for (size_t i = 0; i < p->ids.size(); ++i) {
      if (next < s.size() && s[next] == static_cast<int64_t>(i)) {
        ++next;
        continue;
      }
      content_bytes += p->token_bytes[i];
    }
    std::string expected;
    for (const auto& m : chat["messages"]) expected += m["content"].get<std::string>();
    EXPECT_EQ(content_bytes, expected) << name << " gen " << gen;
    ExpectMarkersNotContent(*p, chat["messages"],
                            name == "llama3" ? std::vector<std::string>{"<|start_header_id|>", "system", "user", "assistant", "<|end_header_id|>\n\n"}
                                             : std::vector<std::string>{"<|im_start|>", "system\n", "user\n", "assistant\n", "<think>\n\n</think>\n\n"});
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureChatStructureTest, ::testing::Values("llama3", "qwen3"));

struct Family {
  std::string name;
  std::string tokenizer;
  std::string chat_template;
  std::string bos;
  std::string eos;
  std::vector<std::string> markers;
  bool system = true;
};

class FamilyTemplateTest : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyTemplateTest, RoleMarkersAreStructuralContentIsNot) {
  const Family& f = GetParam();
  auto bundle = LoadTokenizerBundle(TemplateDir(f.name, f.tokenizer, f.chat_template, f.bos, f.eos));
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  nlohmann::json messages = nlohmann::json::array();
  if (f.system) messages.push_back({{"role", "system"}, {"content", "Answer in one word."}});
  messages.push_back({{"role", "user"}, {"content", "Capital of France?"}});
  messages.push_back({{"role", "assistant"}, {"content", "Paris"}});
  messages.push_back({{"role", "user"}, {"content", "And of Italy?"}});
  auto p = PromptFromChat(**bundle, messages, true);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectMarkersNotContent(*p, messages, f.markers);
}

const char kLlama2Template[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const char kMistralTemplate[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
const char kGemmaTemplate[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
const char kPhi3Template[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
    "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

INSTANTIATE_TEST_SUITE_P(
    Families, FamilyTemplateTest,
    ::testing::Values(
        Family{"llama2", "llama2", kLlama2Template, "<s>", "</s>", {"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"}},
        Family{"mistral", "llama2", kMistralTemplate, "<s>", "</s>", {"[INST]", "[/INST]"}, false},
        Family{"gemma", "llama3", kGemmaTemplate, "<|begin_of_text|>", "<|end_of_text|>",
               {"<start_of_turn>user\n", "<start_of_turn>model\n", "<end_of_turn>\n"}, false},
        Family{"phi3", "llama3", kPhi3Template, "<|begin_of_text|>", "<|end_of_text|>",
               {"<|system|>\n", "<|user|>\n", "<|assistant|>\n", "<|end|>\n"}}),
    [](const auto& info) { return info.param.name; });

TEST(ChatPromptHealth, StructuralTokensOfAChatAreNotSinks) {
  auto bundle = LoadTokenizerBundle(kDir + "/llama3");
  ASSERT_TRUE(bundle.ok());
  const auto chat = nlohmann::json::parse(ReadAll(kDir + "/llama3/llama3_chat.json"))["chat"];
  auto p = PromptFromChat(**bundle, chat["messages"], true);
  ASSERT_TRUE(p.ok());
  const auto t = static_cast<int64_t>(p->ids.size());
  const std::vector<int64_t> structural = Structural(*p);
  ASSERT_GT(structural.size(), 10u);
  // Attention as chat models show it: every query puts most of its weight
  // on the end-of-turn markers before it (and BOS), the rest spread evenly.
  std::vector<float> attention(static_cast<size_t>(t * t), 0.0f);
  const int64_t eot = (*bundle)->tokenizer->TokenString(128009).ok() ? 128009 : -1;
  for (int64_t q = 0; q < t; ++q) {
    std::vector<int64_t> markers;
    for (int64_t k = 0; k <= q; ++k) {
      if (k == 0 || p->ids[k] == eot) markers.push_back(k);
    }
    for (int64_t k = 0; k <= q; ++k) attention[q * t + k] = 0.1f / static_cast<float>(q + 1);
    for (int64_t k : markers) attention[q * t + k] += 0.9f / static_cast<float>(markers.size());
  }
  const std::vector<float> hidden(static_cast<size_t>(2 * t * 4), 1.0f);
  const std::vector<float> logits(static_cast<size_t>(t * 8), 0.0f);
  analysis::ForwardTensors tensors;
  tensors.num_layers = 1;
  tensors.num_heads = 1;
  tensors.num_tokens = t;
  tensors.width = 4;
  tensors.vocab = 8;
  tensors.attentions = attention;
  tensors.hidden_states = hidden;
  tensors.logits = logits;
  analysis::AnalysisOptions only_bos;
  only_bos.structural = {0};
  auto naive = analysis::AnalyzeTensors(tensors, only_bos);
  ASSERT_TRUE(naive.ok()) << naive.status();
  analysis::AnalysisOptions chat_aware;
  chat_aware.structural = structural;
  auto aware = analysis::AnalyzeTensors(tensors, chat_aware);
  ASSERT_TRUE(aware.ok()) << aware.status();
  // Counting the markers as content makes them sinks and lowers the health;
  // left out, no sink remains and the health is perfect.
  EXPECT_FALSE(naive->sinks.empty());
  EXPECT_LT(naive->health, 10.0);
  for (int64_t s : aware->sinks) {
    EXPECT_FALSE(std::binary_search(structural.begin(), structural.end(), s)) << s;
  }
  EXPECT_TRUE(aware->sinks.empty());
  EXPECT_GT(aware->health, naive->health);
}

TEST(ChatPrompt, ErrorsNameTheModelAndTheTemplate) {
  auto no_template = LoadTokenizerBundle(kDir + "/llama2");
  ASSERT_TRUE(no_template.ok());
  auto p = PromptFromChat(**no_template, nlohmann::json::parse(R"([{"role":"user","content":"x"}])"), false);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), ::testing::HasSubstr("has no chat template"));
  auto gemma = LoadTokenizerBundle(TemplateDir("gemma-err", "llama3", kGemmaTemplate, "<s>", "</s>"));
  ASSERT_TRUE(gemma.ok());
  p = PromptFromChat(**gemma, nlohmann::json::parse(R"([{"role":"system","content":"x"}])"), false);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), ::testing::HasSubstr("System role not supported"));
}

}  // namespace
}  // namespace attnscope::engine
