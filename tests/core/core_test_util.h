// Helpers shared by the core tests: a temporary directory, raw file I/O,
// hand-made safetensors bytes and a status matcher.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace attnscope {
namespace testing_util {

inline std::string TestDataDir() { return ATTNSCOPE_TEST_DATA_DIR; }

inline std::string ModelFixture(std::string_view name) {
  return TestDataDir() + "/models/" + std::string(name);
}

// A fresh directory under the test temp dir, removed with its contents.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = ::testing::TempDir() + "attnscope_core_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed: " << pattern;
    path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// The 8-byte little-endian length prefix for `length`.
inline std::string LengthPrefix(uint64_t length) {
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return prefix;
}

// A safetensors file: length prefix, `header` verbatim, then `data`.
inline std::string SafetensorsBytes(std::string_view header, std::string_view data = "") {
  return LengthPrefix(header.size()) + std::string(header) + std::string(data);
}

inline absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches a Status or StatusOr whose code is `code` and whose message
// matches `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status status = StatusOf(arg);
  *result_listener << "status is " << status.ToString();
  return status.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

// Matches an OK StatusOr whose value matches `value_matcher`.
MATCHER_P(IsOkAndHolds, value_matcher, "") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace testing_util
}  // namespace attnscope
