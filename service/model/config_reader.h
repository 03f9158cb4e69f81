// Typed access to the keys of a config.json, with errors that name the file
// and the key. Torch-free; used by the family files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::model {

class ConfigReader {
 public:
  // `json` must outlive the reader; `source` (the file path) starts every
  // message.
  ConfigReader(const nlohmann::json& json, std::string_view source)
      : json_(json), source_(source) {}

  const nlohmann::json& json() const { return json_; }
  const std::string& source() const { return source_; }

  // True if `key` is present and not null.
  bool Has(const char* key) const;

  // A positive integer; `fallback` when absent or null (a fallback <= 0 makes
  // the key required). InvalidArgument naming the key otherwise.
  absl::StatusOr<int64_t> PositiveInt(const char* key, int64_t fallback = 0) const;
  // A positive integer, or nullopt when absent or null.
  absl::StatusOr<std::optional<int64_t>> OptionalPositiveInt(const char* key) const;
  // A number (integer or not); `fallback` when absent or null.
  absl::StatusOr<double> Number(const char* key, double fallback) const;
  absl::StatusOr<bool> Bool(const char* key, bool fallback) const;
  absl::StatusOr<std::string> String(const char* key, const std::string& fallback) const;
  // A token id: an integer, or the first of a list (Llama-3's eos list); -1
  // when absent or null.
  int64_t TokenId(const char* key, int64_t fallback) const;

  // InvalidArgument "<source>: <what>".
  absl::Status Invalid(const std::string& what) const;
  // InvalidArgument for a key whose value the runtime does not implement.
  absl::Status Unsupported(const std::string& key, const nlohmann::json& value,
                           const std::string& supported) const;

 private:
  const nlohmann::json& json_;
  std::string source_;
};

// The same accessors on a nested object (rope_scaling, rope_parameters):
// messages name the key as "outer.inner".
ConfigReader Nested(const ConfigReader& outer, const nlohmann::json& inner,
                    const std::string& name);

}  // namespace attnscope::model
