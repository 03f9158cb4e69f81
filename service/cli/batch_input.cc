#include "service/cli/batch_input.h"

#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/chat_template/chat_template.h"
#include "service/core/utf8.h"

namespace attnscope::cli {
namespace {

using nlohmann::json;

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// The prompt of one JSONL object, or why there is none.
absl::Status PromptOfObject(const json& line, rpc::PromptSpec* spec) {
  int given = 0;
  for (const char* key : {"text", "messages", "ids"}) given += line.contains(key) ? 1 : 0;
  if (given != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of \"text\" (a string), \"messages\" ([{\"role\", \"content\"}, ...]) "
        "or \"ids\" (token ids)");
  }
  for (const char* key : {"add_generation_prompt", "chat_template_kwargs", "tools"}) {
    if (line.contains(key) && !line.contains("messages")) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" goes with \"messages\" only"));
    }
  }
  if (line.contains("add_special_tokens") && !line.contains("text")) {
    return absl::InvalidArgumentError("\"add_special_tokens\" goes with \"text\" only");
  }
  for (const char* key : {"add_generation_prompt", "add_special_tokens"}) {
    if (line.contains(key) && !line[key].is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be true or false"));
    }
  }
  if (line.contains("text")) {
    const json& text = line["text"];
    if (!text.is_string() || text.get_ref<const std::string&>().empty()) {
      return absl::InvalidArgumentError("\"text\" must be a non-empty string");
    }
    spec->text = text.get<std::string>();
    if (line.contains("add_special_tokens")) spec->add_special_tokens = line["add_special_tokens"].get<bool>();
    return absl::OkStatus();
  }
  if (line.contains("messages")) {
    absl::StatusOr<json> messages = chat_template::ParseMessages(line["messages"].dump(), "\"messages\"");
    if (!messages.ok()) return messages.status();
    spec->chat = *std::move(messages);
    spec->add_generation_prompt = line.value("add_generation_prompt", false);
    absl::StatusOr<json> kwargs = chat_template::ConversationKwargs(line, "the line");
    if (!kwargs.ok()) return kwargs.status();
    spec->chat_kwargs = *std::move(kwargs);
    return absl::OkStatus();
  }
  const json& ids = line["ids"];
  if (!ids.is_array() || ids.empty()) {
    return absl::InvalidArgumentError("\"ids\" must be a non-empty array of token ids");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("\"ids\"[", i, "] is ", ids[i].dump(),
                                                     ", not a token id (an integer >= 0)"));
    }
    spec->ids.push_back(ids[i].get<int64_t>());
  }
  return absl::OkStatus();
}

BatchItem JsonlItem(const std::string& text, int64_t line_number) {
  BatchItem item;
  item.line = line_number;
  item.id = line_number;
  json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (line.is_discarded()) {
    item.error = "not a JSON object (malformed JSON or invalid UTF-8)";
    return item;
  }
  if (!line.is_object()) {
    item.error = "not a JSON object: give {\"id\": ..., \"text\": ...} (or \"messages\", \"ids\")";
    return item;
  }
  if (line.contains("id")) {
    const json& id = line["id"];
    if (id.is_string() || id.is_number_integer()) {
      item.id = id;
    } else {
      item.error = absl::StrCat("\"id\" is ", id.dump().substr(0, 40),
                                "; give a string or an integer (or leave it out: the line number)");
      return item;
    }
  }
  if (absl::Status prompt = PromptOfObject(line, &item.prompt); !prompt.ok()) {
    item.error = std::string(prompt.message());
  }
  return item;
}

BatchItem TextItem(std::string text, int64_t line_number) {
  BatchItem item;
  item.line = line_number;
  item.id = line_number;
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (absl::Status utf8 = ValidateUtf8(text, "the line"); !utf8.ok()) {
    item.error = std::string(utf8.message());
    return item;
  }
  item.prompt.text = std::move(text);
  return item;
}

}  // namespace

absl::StatusOr<InputFormat> ParseInputFormat(const std::string& name) {
  if (name == "auto") return InputFormat::kAuto;
  if (name == "jsonl") return InputFormat::kJsonl;
  if (name == "text") return InputFormat::kText;
  return absl::InvalidArgumentError(
      absl::StrCat("--format '", name, "' is not one of auto (the default), jsonl or text"));
}

absl::StatusOr<Shard> ParseShard(const std::string& text) {
  const auto invalid = [&text] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard '", text, "' is not INDEX/COUNT with 0 <= INDEX < COUNT <= 1000000 (e.g. 0/4)"));
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return invalid();
  Shard shard;
  if (!absl::SimpleAtoi(text.substr(0, slash), &shard.index) ||
      !absl::SimpleAtoi(text.substr(slash + 1), &shard.count)) {
    return invalid();
  }
  if (shard.count < 1 || shard.count > 1000000 || shard.index < 0 || shard.index >= shard.count) {
    return invalid();
  }
  return shard;
}

std::vector<BatchItem> TakeShard(std::vector<BatchItem> items, const Shard& shard) {
  if (shard.count == 1) return items;
  std::vector<BatchItem> taken;
  for (size_t i = static_cast<size_t>(shard.index); i < items.size();
       i += static_cast<size_t>(shard.count)) {
    taken.push_back(std::move(items[i]));
  }
  return taken;
}

absl::StatusOr<std::vector<BatchItem>> ReadBatchInput(const std::string& path,
                                                      InputFormat format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--input ", path, ": cannot open the file"));
  std::vector<BatchItem> items;
  std::map<std::string, int64_t> first_line_of;
  std::string text;
  for (int64_t line_number = 1; std::getline(in, text); ++line_number) {
    if (IsBlank(text)) continue;
    if (format == InputFormat::kAuto) {
      format = text[text.find_first_not_of(" \t")] == '{' ? InputFormat::kJsonl : InputFormat::kText;
    }
    BatchItem item = format == InputFormat::kJsonl ? JsonlItem(text, line_number)
                                                   : TextItem(std::move(text), line_number);
    item.key = item.id.dump();
    const auto [it, inserted] = first_line_of.emplace(item.key, line_number);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", path, ": line ", line_number, " has the id ", item.key,
                       " of line ", it->second, "; every prompt needs its own id"));
    }
    items.push_back(std::move(item));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("--input ", path, ": read error"));
  return items;
}

}  // namespace attnscope::cli
