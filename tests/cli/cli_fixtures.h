// Small verbs shared by the CLI tests that check fixtures end to end.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"

namespace attnscope::testing {

// The fixture checkpoint directory tests/data/models/`name`.
inline std::string Fixture(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

// The JSON document at `path` (throws on malformed JSON: a test failure).
inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A JSON array of ids as the --ids argument "1,2,3".
inline std::string IdsArg(const nlohmann::json& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
  return s;
}

// Tensor `name` of `f` as float32 values; a test failure (and no values)
// when it is missing.
inline std::vector<float> Floats(const SafetensorsFile& f, const char* name) {
  const TensorRef* t = f.Find(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? *ToFloat32(*t) : std::vector<float>{};
}

}  // namespace attnscope::testing
