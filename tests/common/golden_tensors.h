// Golden files for tests: a path under tests/data and a tensor of a
// safetensors file copied out as T (its byte size checked against T).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "service/core/safetensors.h"

namespace attnscope::test {

inline std::string TestDataPath(const std::string& relative) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/" + relative;
}

// The safetensors file at `relative` under tests/data; nullptr and a test
// failure when it cannot be opened.
inline std::unique_ptr<SafetensorsFile> OpenGolden(const std::string& relative) {
  auto file = SafetensorsFile::Open(TestDataPath(relative));
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

// `args` followed by `more`.
inline std::vector<std::string> WithArgs(std::vector<std::string> args,
                                         const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Tensor `name` of `file` as T; empty (and a test failure) when it is
// missing or its bytes are not numel x sizeof(T). `shape`, when given,
// receives the tensor's shape.
template <typename T>
std::vector<T> ReadTensor(const SafetensorsFile& file, const std::string& name,
                          std::vector<int64_t>* shape = nullptr) {
  const TensorRef* t = file.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  EXPECT_EQ(t->nbytes, static_cast<size_t>(t->numel()) * sizeof(T)) << name;
  if (t->nbytes != static_cast<size_t>(t->numel()) * sizeof(T)) return {};
  std::vector<T> out(static_cast<size_t>(t->numel()));
  std::memcpy(out.data(), t->data, out.size() * sizeof(T));
  if (shape != nullptr) *shape = t->shape;
  return out;
}

}  // namespace attnscope::test
