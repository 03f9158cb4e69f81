// Element types of tensors stored in safetensors files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace attnscope {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// Size of one element in bytes.
size_t DTypeSize(DType dtype);

// The safetensors spelling: "F32", "F16", "BF16", "I64", ...
std::string_view DTypeName(DType dtype);

// Parses a safetensors dtype string; InvalidArgument for an unknown name.
absl::StatusOr<DType> ParseDType(std::string_view name);

// IEEE half / bfloat16 bit patterns to float32 (exact; NaN and Inf kept).
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);
// float32 to IEEE half, round-to-nearest-even (overflow gives Inf).
uint16_t FloatToHalf(float value);

}  // namespace attnscope
