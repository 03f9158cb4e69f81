// Small helpers for reading tokenizer.json components with errors that name
// the file and the JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace attnscope::tokenizer {

// "FILE: PATH.type "TYPE" is not supported".
inline absl::Status UnsupportedType(const std::string& file, const std::string& path,
                                    const std::string& type) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": ", path, ".type \"", type, "\" is not supported"));
}

// The largest token id a tokenizer.json may use (vocab and added tokens):
// the id -> token tables are as long as the largest id, so a stray huge id
// would cost gigabytes. Real vocabularies stay far below (Gemma's 256,000).
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

// "FILE: PATH: WHAT".
inline absl::Status Malformed(const std::string& file, const std::string& path,
                              std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": ", path, ": ", absl::string_view(what.data(), what.size())));
}

// The "type" string of a component, or InvalidArgument.
inline absl::StatusOr<std::string> ComponentType(const nlohmann::json& json,
                                                 const std::string& path,
                                                 const std::string& file) {
  if (!json.is_object()) return Malformed(file, path, "expected an object");
  auto it = json.find("type");
  if (it == json.end() || !it->is_string()) {
    return Malformed(file, path, "has no \"type\" string");
  }
  return it->get<std::string>();
}

// json[key] as a string; `fallback` if absent or null.
inline absl::StatusOr<std::string> StringField(const nlohmann::json& json, const char* key,
                                               const std::string& path, const std::string& file,
                                               std::string fallback = "") {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_string()) return Malformed(file, absl::StrCat(path, ".", key), "expected a string");
  return it->get<std::string>();
}

// json[key] as a bool; `fallback` if absent or null.
inline absl::StatusOr<bool> BoolField(const nlohmann::json& json, const char* key,
                                      const std::string& path, const std::string& file,
                                      bool fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Malformed(file, absl::StrCat(path, ".", key), "expected a bool");
  return it->get<bool>();
}

// json[key] as an array (InvalidArgument if absent or not an array).
inline absl::StatusOr<const nlohmann::json*> ArrayField(const nlohmann::json& json,
                                                        const char* key, const std::string& path,
                                                        const std::string& file) {
  auto it = json.find(key);
  if (it == json.end() || !it->is_array()) {
    return Malformed(file, absl::StrCat(path, ".", key), "expected an array");
  }
  return &*it;
}

}  // namespace attnscope::tokenizer
