// Fuzz target: a safetensors file (8-byte header length, JSON header, data)
// parsed from memory, as SafetensorsFile::Open parses a mapped file. Valid
// results must keep the header's promises: every tensor's bytes lie inside
// the buffer and match its shape and dtype, and the conversions succeed or
// fail cleanly.
#include <cstddef>
#include <cstdint>
#include <string>

#include "service/core/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto file = attnscope::SafetensorsFile::FromBuffer("fuzz.safetensors", std::move(bytes));
  if (!file.ok()) {
    FUZZ_CHECK(!file.status().message().empty(), "an error without a message");
    return 0;
  }
  for (const attnscope::TensorRef& t : (*file)->tensors()) {
    FUZZ_CHECK(t.numel() >= 0, t.name);
    FUZZ_CHECK(t.nbytes == static_cast<size_t>(t.numel()) * attnscope::DTypeSize(t.dtype), t.name);
    FUZZ_CHECK(t.nbytes <= size, t.name);
    FUZZ_CHECK((*file)->Find(t.name) == &t, t.name);
    // Converting touches every byte the tensor claims (ASan checks the range).
    auto as_float = attnscope::ToFloat32(t);
    if (as_float.ok()) FUZZ_CHECK(as_float->size() == static_cast<size_t>(t.numel()), t.name);
    auto as_int = attnscope::ToInt64(t);
    if (as_int.ok()) FUZZ_CHECK(as_int->size() == static_cast<size_t>(t.numel()), t.name);
  }
  return 0;
}
