#include "service/model/config_reader.h"

#include "absl/strings/str_cat.h"

namespace attnscope::model {



bool ConfigReader::Has(const char* key) const {
  auto it = json_.find(key);
  return it != json_.end() && !it->is_null();
}

absl::Status ConfigReader::Invalid(const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ": ", what));
}

absl::Status ConfigReader::Unsupported(const std::string& key, const nlohmann::json& value,
                                       const std::string& supported) const {
  return Invalid(absl::StrCat("'", key, "' = ", value.dump(), " is not supported (", supported,
                              ")"));
}

absl::StatusOr<int64_t> ConfigReader::PositiveInt(const char* key, int64_t fallback) const {
  if (!Has(key)) {
    if (fallback > 0) return fallback;
    return Invalid(absl::StrCat("missing required key '", key, "'"));
  }
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return Invalid(absl::StrCat("'", key, "' must be a positive integer, got ", v.dump()));
  }
  return v.get<int64_t>();
}

absl::StatusOr<std::optional<int64_t>> ConfigReader::OptionalPositiveInt(const char* key) const {
  if (!Has(key)) return std::optional<int64_t>();
  absl::StatusOr<int64_t> v = PositiveInt(key);
  if (!v.ok()) return v.status();
  return std::optional<int64_t>(*v);
}

absl::StatusOr<double> ConfigReader::Number(const char* key, double fallback) const {
  if (!Has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number()) return Invalid(absl::StrCat("'", key, "' must be a number, got ", v.dump()));
  return v.get<double>();
}

absl::StatusOr<bool> ConfigReader::Bool(const char* key, bool fallback) const {
  if (!Has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_boolean()) return Invalid(absl::StrCat("'", key, "' must be true or false, got ", v.dump()));
  return v.get<bool>();
}

absl::StatusOr<std::string> ConfigReader::String(const char* key,
                                                 const std::string& fallback) const {
  if (!Has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_string()) return Invalid(absl::StrCat("'", key, "' must be a string, got ", v.dump()));
  return v.get<std::string>();
}

int64_t ConfigReader::TokenId(const char* key, int64_t fallback) const {
  if (!json_.contains(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
  return -1;
}

ConfigReader Nested(const ConfigReader& outer, const nlohmann::json& inner, const std::string& name) {
  return ConfigReader(inner, absl::StrCat(outer.source(), " ('", name, "')"));
}

}  // namespace attnscope::model
