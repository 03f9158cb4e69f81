// Chat templates as Hugging Face's apply_chat_template renders them: the
// model's own Jinja template (tokenizer_config.json "chat_template", or
// chat_template.jinja) interpreted with trim_blocks and lstrip_blocks, with
// messages, add_generation_prompt, the special tokens and
// raise_exception/strftime_now. The rendered text records which bytes came
// from what the conversation said (message content) and which the template
// produced (role markers, special tokens, role names, separators).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::chat_template {

struct RenderedChat {
  std::string text;
  // content[i]: byte i of text came from a message's content (any string
  // field of a message except "role").
  std::vector<bool> content;
};

class ChatTemplate {
 public:
  // Parses `source`; `origin` names it in errors ("DIR/tokenizer_config.json").
  // InvalidArgument "ORIGIN: chat template line N: ..." naming an
  // unsupported construct or a syntax error.
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source, std::string origin);

  // Renders `messages` (a JSON array of objects with a string "role" and a
  // string "content"; other fields are passed through) with `variables`
  // (bos_token, eos_token, ...; e.g. enable_thinking) and
  // add_generation_prompt. InvalidArgument naming the message field at fault
  // or the template's runtime error (raise_exception's message included),
  // among them the limits that keep a hostile template from holding a
  // request: 16 MiB of output, 64 nested macro calls, 100,000 loop items
  // (and range() items).
  absl::StatusOr<RenderedChat> Render(const nlohmann::json& messages, bool add_generation_prompt,
                                      const nlohmann::json& variables) const;

  const std::string& origin() const { return origin_; }

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
  std::string origin_;
};

// A model directory's chat template and the variables Hugging Face passes
// with it (the special tokens of tokenizer_config.json that are set).
struct ModelChatTemplate {
  ChatTemplate chat_template;
  nlohmann::json variables;
};

// Reads DIR/chat_template.jinja if present, else tokenizer_config.json's
// "chat_template" (a string, or a list of {"name","template"} from which
// "default" is used). NotFound naming the directory when it has no chat
// template; InvalidArgument naming the file for malformed JSON or template.
absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& directory);

// Parses a --chat file's JSON text: an array of {"role","content"} objects
// (or {"messages": [...]}). InvalidArgument naming `origin` and the entry.
absl::StatusOr<nlohmann::json> ParseMessages(std::string_view json_text, const std::string& origin);

// Extra template variables, as Hugging Face's apply_chat_template(**kwargs)
// and vLLM's chat_template_kwargs pass them (e.g. {"enable_thinking":
// false}, {"tools": [...]}): a JSON object whose "tools", if present, is an
// array; messages and add_generation_prompt are the request's own and cannot
// be set this way. InvalidArgument naming `origin` and the key otherwise.
absl::Status CheckTemplateKwargs(const nlohmann::json& kwargs, const std::string& origin);
// CheckTemplateKwargs of JSON text (--chat-template-kwargs, the proto field).
absl::StatusOr<nlohmann::json> ParseTemplateKwargs(std::string_view json_text,
                                                   const std::string& origin);
// The variables a conversation object carries beside its "messages" (a
// --chat file or a JSONL line, laid out as vLLM's request body): its
// "chat_template_kwargs" plus its "tools"; {} when it has neither or is an
// array of messages.
absl::StatusOr<nlohmann::json> ConversationKwargs(const nlohmann::json& conversation,
                                                  const std::string& origin);

}  // namespace attnscope::chat_template
