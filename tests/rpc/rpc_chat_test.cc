// Conversations over gRPC: a chat rendered with the model's template and its
// structural positions; bad conversations, missing templates and a model
// whose tokenizer.json cannot be read are INVALID_ARGUMENT while the server
// keeps serving every model. (A token mixing content and template bytes,
// such as GPT-2's ".<", counts as content; the contents here avoid that.)
#include <filesystem>
#include <fstream>

#include "nlohmann/json.hpp"
#include "tests/common/temp_path.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;

// The bundled model's files (linked) with `extra` files written next to them.
std::string BundledWith(const std::string& name, const std::map<std::string, std::string>& extra) {
  // A unique parent: the directory's own name stays the model's.
  const std::string dir = test::UniqueTempPath("rpc-chat") + "/rpc-" + name;
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(BundledModelDir())) {
    if (extra.count(entry.path().filename().string()) == 0) {
      std::filesystem::create_symlink(entry.path(), dir + "/" + entry.path().filename().string());
    }
  }
  for (const auto& [file, text] : extra) std::ofstream(dir + "/" + file) << text;
  return dir;
}

v1::AnalyzeRequest ChatRequest(const std::string& model, bool generation_prompt) {
  v1::AnalyzeRequest request;
  request.set_model(model);
  v1::Conversation* chat = request.mutable_chat();
  for (const auto& [role, content] : std::vector<std::pair<std::string, std::string>>{
           {"system", "Be brief"}, {"user", "Name a color"}}) {
    v1::ChatMessage* m = chat->add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  chat->set_add_generation_prompt(generation_prompt);
  return request;
}

class RpcChatTest : public RpcTest {};

TEST_F(RpcChatTest, ConversationsAreRenderedAndTheirMarkersAreStructural) {
  const nlohmann::json config = {
      {"eos_token", "<|endoftext|>"},
      {"chat_template",
       "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"}};
  const std::string chatml = BundledWith("chatml", {{"tokenizer_config.json", config.dump()}});
  nlohmann::json broken_tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}}},
      {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", ""}}}};
  const std::string broken = BundledWith("broken", {{"tokenizer.json", broken_tokenizer.dump()}});
  StartServer({"--model", "tiny-gpt2=" + BundledModelDir(), "--model", "chatml=" + chatml,
               "--model", "broken=" + broken});

  const AnalyzeResult ok = RunAnalyze(*stub_, ChatRequest("chatml", true));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  ASSERT_FALSE(ok.events.empty());
  const v1::Summary& summary = ok.events.back().summary();
  EXPECT_EQ(summary.template_(), "chat");
  const v1::Tokens& tokens = ok.events.front().tokens();
  std::string structural_text, content_text;
  for (int i = 0; i < tokens.ids_size(); ++i) {
    const bool s = std::find(summary.structural().begin(), summary.structural().end(), i) !=
                   summary.structural().end();
    (s ? structural_text : content_text) += tokens.texts(i);
  }
  EXPECT_EQ(content_text, "Be briefName a color");
  EXPECT_EQ(structural_text, "<|im_start|>system\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");

  // No chat template: INVALID_ARGUMENT naming the model.
  grpc::Status no_template = RunAnalyze(*stub_, ChatRequest("tiny-gpt2", false)).status;
  EXPECT_EQ(no_template.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_template.error_message(), HasSubstr("'tiny-gpt2' has no usable chat template"));
  // An empty role.
  v1::AnalyzeRequest bad = ChatRequest("chatml", false);
  bad.mutable_chat()->mutable_messages(1)->set_role("");
  grpc::Status empty_role = RunAnalyze(*stub_, bad).status;
  EXPECT_EQ(empty_role.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty_role.error_message(), HasSubstr("chat.messages[1].role is empty"));
  // The model whose tokenizer.json failed: text says why, ids still work.
  v1::AnalyzeRequest text = TextRequest("hello");
  text.set_model("broken");
  grpc::Status broken_text = RunAnalyze(*stub_, text).status;
  EXPECT_EQ(broken_text.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(broken_text.error_message(), HasSubstr("normalizer.type \"Precompiled\" is not supported"));
  v1::AnalyzeRequest ids;
  ids.set_model("broken");
  for (int64_t id : {464, 3797, 3332}) ids.mutable_ids()->add_ids(id);
  const AnalyzeResult by_ids = RunAnalyze(*stub_, ids);
  ASSERT_TRUE(by_ids.status.ok()) << by_ids.status.error_message();
  ASSERT_FALSE(by_ids.events.empty());
  ASSERT_TRUE(by_ids.events.front().has_tokens());
  EXPECT_THAT(by_ids.events.front().tokens().ids(), ::testing::ElementsAre(464, 3797, 3332));
  EXPECT_TRUE(by_ids.events.back().has_summary());
  EXPECT_TRUE(StillServes());
}

// chat.template_kwargs_json reaches the template as variables (Qwen3's
// enable_thinking, as vLLM's chat_template_kwargs); a malformed one is
// INVALID_ARGUMENT naming the field, and the server goes on serving.
TEST_F(RpcChatTest, TemplateKwargsAreTheTemplatesVariables) {
  const nlohmann::json config = {
      {"eos_token", "<|endoftext|>"},
      {"chat_template",
       "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
       "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think></think>' }}"
       "{% endif %}{% endif %}"}};
  const std::string chatml = BundledWith("thinking", {{"tokenizer_config.json", config.dump()}});
  StartServer({"--model", "thinking=" + chatml});
  auto text_of = [](const AnalyzeResult& result) {
    std::string text;
    for (const std::string& piece : result.events.front().tokens().texts()) text += piece;
    return text;
  };
  const AnalyzeResult plain = RunAnalyze(*stub_, ChatRequest("thinking", true));
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  v1::AnalyzeRequest request = ChatRequest("thinking", true);
  request.mutable_chat()->set_template_kwargs_json(R"({"enable_thinking": false})");
  const AnalyzeResult no_thinking = RunAnalyze(*stub_, request);
  ASSERT_TRUE(no_thinking.status.ok()) << no_thinking.status.error_message();
  EXPECT_EQ(text_of(no_thinking), text_of(plain) + "<think></think>");

  for (const auto& [kwargs, message] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "expected a JSON object of template variables"},
           {"{\"enable_thinking\": ", "invalid JSON"},
           {R"({"messages": []})", "\"messages\" is the request's own"},
           {R"({"tools": {}})", "\"tools\": expected a JSON array"}}) {
    v1::AnalyzeRequest bad = ChatRequest("thinking", true);
    bad.mutable_chat()->set_template_kwargs_json(kwargs);
    const grpc::Status status = RunAnalyze(*stub_, bad).status;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << kwargs;
    EXPECT_THAT(status.error_message(), HasSubstr("chat.template_kwargs_json: " + message)) << kwargs;
  }
  EXPECT_TRUE(StillServes());
}

}  // namespace
}  // namespace attnscope::testing
