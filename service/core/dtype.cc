#include "service/core/dtype.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace attnscope {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8}, {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2}, {DType::kI8, "I8", 1},   {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};

const DTypeInfo& InfoOf(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[0];  // Unreachable: every enumerator is in the table.
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t FloatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace

size_t DTypeSize(DType dtype) { return InfoOf(dtype).size; }

std::string_view DTypeName(DType dtype) { return InfoOf(dtype).name; }

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype \"", absl::string_view(name.data(), name.size()), "\" (expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, "
      "BOOL)"));
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) {  // Inf or NaN: keep the payload.
    return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent != 0) {
    return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa x 2^-24 is exact in float32.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

float BFloat16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatToBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) {  // Inf stays Inf; NaN stays a quiet NaN.
    return static_cast<uint16_t>(sign | 0x7C00u | (abs_bits > 0x7F800000u ? 0x200u : 0u));
  }
  // 65520 and above round to Inf under round-to-nearest-even.
  if (abs_bits >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  const int exponent = static_cast<int>(abs_bits >> 23) - 127;
  uint32_t mantissa = (abs_bits & 0x7FFFFFu) | 0x800000u;  // With the implicit bit.
  // Number of low bits of the 24-bit mantissa dropped: 13 for normals, more
  // for results that land in the half subnormal range (exponent < -14).
  int shift = 13;
  if (exponent < -14) shift = 13 + (-14 - exponent);
  if (shift > 24) return sign;  // Below half the smallest subnormal: rounds to zero.
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  uint32_t rounded = mantissa >> shift;
  if (remainder > halfway || (remainder == halfway && (rounded & 1u) != 0)) ++rounded;
  if (exponent < -14) {
    // Subnormal (a carry into bit 10 correctly yields the smallest normal).
    return static_cast<uint16_t>(sign | rounded);
  }
  // Normal: the mantissa carry may bump the exponent, which the addition handles.
  const uint32_t half = (static_cast<uint32_t>(exponent + 15) << 10) + (rounded - 0x400u);
  return static_cast<uint16_t>(sign | half);
}

}  // namespace attnscope
