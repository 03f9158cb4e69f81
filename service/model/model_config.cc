#include "service/model/model_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "service/model/config_reader.h"
#include "service/model/families/families.h"

namespace attnscope::model {
namespace {

using nlohmann::json;

struct Family {
  const char* model_type;
  absl::StatusOr<ModelConfig> (*parse)(const ConfigReader&);
};

// Sorted by model_type. Adding a family: a file in families/ and a row here.
constexpr Family kFamilies[] = {
    {"gemma", families::ParseGemma},     {"gemma2", families::ParseGemma2},
    {"gpt2", families::ParseGpt2},       {"gpt_neox", families::ParseGptNeox},
    {"llama", families::ParseLlama},     {"mistral", families::ParseMistral},
    {"opt", families::ParseOpt},         {"phi3", families::ParsePhi3},
    {"qwen2", families::ParseQwen2},     {"qwen3", families::ParseQwen3},
};

}  // namespace

std::string_view RopeKindName(RopeKind kind) {
  switch (kind) {
    case RopeKind::kNone:
      return "none";
    case RopeKind::kDefault:
      return "default";
    case RopeKind::kLinear:
      return "linear";
    case RopeKind::kDynamic:
      return "dynamic";
    case RopeKind::kLlama3:
      return "llama3";
    case RopeKind::kYarn:
      return "yarn";
    case RopeKind::kLongRope:
      return "longrope";
  }
  return "unknown";
}

std::vector<std::string> SupportedModelTypes() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  const ConfigReader reader(j, source);
  if (j.is_discarded()) return reader.Invalid("not valid JSON");
  if (!j.is_object()) return reader.Invalid("expected a JSON object");
  try {
    if (!j.contains("model_type") || j["model_type"].is_null()) {
      return reader.Invalid(absl::StrCat(
          "model_type is missing: config.json must name the family (one of: ",
          absl::StrJoin(SupportedModelTypes(), ", "), ")"));
    }
    if (!j["model_type"].is_string()) {
      return reader.Invalid(absl::StrCat("model_type must be a string, got ", j["model_type"].dump()));
    }
    const std::string type = j["model_type"].get<std::string>();
    for (const Family& f : kFamilies) {
      if (type == f.model_type) return f.parse(reader);
    }
    return reader.Invalid(absl::StrCat("model_type '", type, "' is not supported (supported: ",
                                       absl::StrJoin(SupportedModelTypes(), ", "), ")"));
  } catch (const json::exception& e) {
    return reader.Invalid(absl::StrCat("a key has the wrong JSON type: ", e.what()));
  }
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (is '", dir,
                                            "' a Hugging Face model directory?)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseModelConfig(text.str(), path);
}

}  // namespace attnscope::model
