// DType names and sizes, and exact F16 / BF16 conversions on known bit
// patterns.
#include "service/core/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using testing_util::IsOkAndHolds;
using testing_util::StatusIs;

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TEST(DTypeTest, NamesAndSizesMatchSafetensorsSpelling) {
  const struct {
    DType dtype;
    const char* name;
    size_t size;
  } kCases[] = {{DType::kF64, "F64", 8}, {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
                {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
                {DType::kI16, "I16", 2}, {DType::kI8, "I8", 1},   {DType::kU8, "U8", 1},
                {DType::kBool, "BOOL", 1}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeSize(c.dtype), c.size);
    EXPECT_THAT(ParseDType(c.name), IsOkAndHolds(c.dtype));
  }
}

TEST(DTypeTest, ParseRejectsUnknownAndLowercaseNames) {
  EXPECT_THAT(ParseDType("f32"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown dtype \"f32\"")));
  EXPECT_THAT(ParseDType("F8_E4M3"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"F8_E4M3\"")));
}

TEST(HalfTest, KnownBitPatternsConvertExactly) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC100), -2.5f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));  // Largest subnormal.
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // Smallest normal.
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFC01)));
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x8000), 0.0f);
}

TEST(BFloat16Test, KnownBitPatternsConvertExactly) {
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xC020), -2.5f);
  EXPECT_EQ(BFloat16ToFloat(0x477F), 65280.0f);  // 65504 is not representable in bf16.
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));  // Smallest subnormal.
  EXPECT_EQ(BFloat16ToFloat(0x7F7F), FromBits(0x7F7F0000u));   // Largest finite.
  EXPECT_EQ(BFloat16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(BFloat16ToFloat(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7FC0)));
}

TEST(FloatToHalfTest, KnownValuesGiveKnownBits) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.5f), 0xC100);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(FloatToHalfTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // Tie, down to even.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // Tie, up to even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // Overflow rounds to Inf.
  EXPECT_EQ(FloatToHalf(1.0e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);         // Tie with zero, to even.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);         // Above the tie.
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);         // Tie 1.5 ulp, to even.
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);      // Carries into a normal.
  EXPECT_EQ(FloatToHalf(1.0e-10f), 0x0000);
  EXPECT_EQ(FloatToHalf(FromBits(0x00000001u)), 0x0000);  // Float subnormal.
}

TEST(FloatToHalfTest, EveryHalfValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = HalfToFloat(half);
    if (std::isnan(value)) continue;
    ASSERT_EQ(FloatToHalf(value), half) << "bits 0x" << std::hex << bits;
  }
}

}  // namespace
}  // namespace attnscope
