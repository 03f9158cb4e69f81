#include "service/chat_template/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "service/chat_template/builtins.h"
#include "service/chat_template/parser.h"
#include "service/chat_template/renderer.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"

namespace attnscope::chat_template {
namespace {

absl::Status Prefixed(const std::string& origin, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(origin, ": ", status.message()));
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot read"));
  return text.str();
}

// A special token in tokenizer_config.json: a string, or an AddedToken
// object {"content": ...}; null when unset.
nlohmann::json TokenText(const nlohmann::json& v) {
  if (v.is_string()) return v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  return nullptr;
}

nlohmann::json SpecialTokenVariables(const nlohmann::json& config) {
  nlohmann::json vars = nlohmann::json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    nlohmann::json text = TokenText(config[key]);
    if (!text.is_null()) vars[key] = text;  // Hugging Face passes only the set ones
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : config["additional_special_tokens"]) {
      nlohmann::json text = TokenText(t);
      if (!text.is_null()) list.push_back(text);
    }
    if (!list.empty()) vars["additional_special_tokens"] = list;
  }
  return vars;
}

// Marks every string of a message as content, except its role.
Value MessageValue(const nlohmann::json& message) {
  Value v = Value::MakeDict();
  for (const auto& [key, item] : message.items()) v.Set(key, FromJson(item, key != "role"));
  return v;
}

}  // namespace

struct ChatTemplate::Parsed {
  Body body;
};

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source, std::string origin) {
  if (auto st = ValidateUtf8(source, "chat template"); !st.ok()) return Prefixed(origin, st);
  auto body = ParseTemplate(source);
  if (!body.ok()) return Prefixed(origin, body.status());
  ChatTemplate t;
  auto parsed = std::make_shared<Parsed>();
  parsed->body = std::move(body).value();
  t.parsed_ = std::move(parsed);
  t.origin_ = std::move(origin);
  return t;
}

absl::StatusOr<RenderedChat> ChatTemplate::Render(const nlohmann::json& messages,
                                                  bool add_generation_prompt,
                                                  const nlohmann::json& variables) const {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("messages: expected a non-empty array of {\"role\", \"content\"}");
  }
  List list;
  for (size_t k = 0; k < messages.size(); ++k) {
    const nlohmann::json& m = messages[k];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", k, "].role: expected a string"));
    }
    if (!m.contains("content") || !(m["content"].is_string() || m["content"].is_null() || m["content"].is_array())) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", k, "].content: expected a string"));
    }
    list.push_back(MessageValue(m));
  }
  Value globals = Value::MakeDict();
  AddGlobalFunctions(globals);
  if (variables.is_object()) {
    for (const auto& [key, item] : variables.items()) globals.Set(key, FromJson(item));
  }
  globals.Set("messages", Value::MakeList(std::move(list)));
  globals.Set("add_generation_prompt", Value::Bool(add_generation_prompt));
  if (globals.Find("tools") == nullptr) globals.Set("tools", Value::None());
  if (globals.Find("documents") == nullptr) globals.Set("documents", Value::None());
  auto out = chat_template::Render(parsed_->body, globals);
  if (!out.ok()) return Prefixed(origin_, out.status());
  RenderedChat rendered;
  rendered.text = std::move(out->s);
  rendered.content.assign(rendered.text.size(), false);
  for (size_t k = 0; k < out->mask.size() && k < rendered.text.size(); ++k) {
    rendered.content[k] = out->mask[k] != '\0';
  }
  return rendered;
}

absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& directory) {
  const std::filesystem::path dir(directory);
  std::error_code ec;
  nlohmann::json config = nlohmann::json::object();
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path, ec)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
    try {
      config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(config_path.string(), ": invalid JSON: ", e.what()));
    }
    if (!config.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(config_path.string(), ": expected a JSON object"));
    }
  }
  std::string source;
  std::string origin;
  const std::filesystem::path jinja = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja, ec)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(source, ReadFile(jinja));
    origin = jinja.string();
  } else if (config.contains("chat_template")) {
    const nlohmann::json& t = config["chat_template"];
    origin = config_path.string();
    if (t.is_string()) {
      source = t.get<std::string>();
    } else if (t.is_array()) {
      std::string names;
      for (const auto& entry : t) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
        names += (names.empty() ? "" : ", ") + entry["name"].dump();
        if (entry["name"] == "default" && entry["template"].is_string()) source = entry["template"];
      }
      if (source.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": chat_template lists templates ", names, " but none named \"default\""));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": chat_template: expected a string or a list"));
    }
  } else {
    return absl::NotFoundError(absl::StrCat(
        directory, " has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json)"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::Parse(source, origin));
  return ModelChatTemplate{std::move(parsed), SpecialTokenVariables(config)};
}

absl::StatusOr<nlohmann::json> ParseMessages(std::string_view json_text, const std::string& origin) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": invalid JSON: ", e.what()));
  }
  if (json.is_object() && json.contains("messages")) json = json["messages"];
  if (!json.is_array() || json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": expected a non-empty JSON array [{\"role\": ..., \"content\": ...}]"));
  }
  for (size_t k = 0; k < json.size(); ++k) {
    const nlohmann::json& m = json[k];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": [", k, "].role: expected a string"));
    }
    if (!m.contains("content") || !m["content"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": [", k, "].content: expected a string"));
    }
  }
  return json;
}

absl::Status CheckTemplateKwargs(const nlohmann::json& kwargs, const std::string& origin) {
  if (!kwargs.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": expected a JSON object of template variables, e.g. {\"enable_thinking\": false}"));
  }
  for (const char* own : {"messages", "add_generation_prompt"}) {
    if (kwargs.contains(own)) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": \"", own, "\" is the request's own, not a template variable to set here"));
    }
  }
  if (kwargs.contains("tools") && !kwargs["tools"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": \"tools\": expected a JSON array of tool definitions"));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ParseTemplateKwargs(std::string_view json_text,
                                                   const std::string& origin) {
  nlohmann::json kwargs;
  try {
    kwargs = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": invalid JSON: ", e.what()));
  }
  ATTNSCOPE_RETURN_IF_ERROR(CheckTemplateKwargs(kwargs, origin));
  return kwargs;
}

absl::StatusOr<nlohmann::json> ConversationKwargs(const nlohmann::json& conversation,
                                                  const std::string& origin) {
  nlohmann::json kwargs = nlohmann::json::object();
  if (!conversation.is_object()) return kwargs;
  if (conversation.contains("chat_template_kwargs")) {
    kwargs = conversation["chat_template_kwargs"];
    ATTNSCOPE_RETURN_IF_ERROR(CheckTemplateKwargs(kwargs, origin + ": chat_template_kwargs"));
  }
  if (conversation.contains("tools")) {
    if (kwargs.contains("tools")) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": \"tools\" given twice (beside the messages and in "
                               "chat_template_kwargs); keep one"));
    }
    kwargs["tools"] = conversation["tools"];
    ATTNSCOPE_RETURN_IF_ERROR(CheckTemplateKwargs(kwargs, origin));
  }
  return kwargs;
}

}  // namespace attnscope::chat_template
