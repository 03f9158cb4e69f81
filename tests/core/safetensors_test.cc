// SafetensorsFile validation (one test per malformed input), reading,
// WriteSafetensors round trips and the ToFloat32 / ToInt64 conversions.
#include "service/core/safetensors.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/core/utf8.h"
#include "tests/core/core_test_util.h"

namespace attnscope {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::IsOkAndHolds;
using testing_util::SafetensorsBytes;
using testing_util::ScopedTempDir;
using testing_util::StatusIs;

constexpr char kName[] = "bad.safetensors";

// Loads hand-made bytes under the name kName; expectations read as
// "loading this header gives that error".
class SafetensorsValidationTest : public ::testing::Test {
 protected:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> LoadRaw(std::string bytes) {
    return SafetensorsFile::FromBuffer(kName, std::move(bytes));
  }
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Load(std::string_view header,
                                                               std::string_view data = "") {
    return LoadRaw(SafetensorsBytes(header, data));
  }
  // An InvalidArgument whose message starts with the file name and contains
  // `problem`.
  static auto Rejected(const std::string& problem) {
    return StatusIs(absl::StatusCode::kInvalidArgument,
                    AllOf(StartsWith(std::string(kName) + ": "), HasSubstr(problem)));
  }
};

TEST_F(SafetensorsValidationTest, RejectsFileShorterThanLengthPrefix) {
  EXPECT_THAT(LoadRaw("\x01\x02\x03"), Rejected("file is 3 bytes, too short"));
  EXPECT_THAT(LoadRaw(""), Rejected("file is 0 bytes, too short"));
}

TEST_F(SafetensorsValidationTest, RejectsHeaderLengthBeyondFile) {
  EXPECT_THAT(LoadRaw(testing_util::LengthPrefix(100) + "{}        "),
              Rejected("header length 100 is beyond the end of the file (10 bytes"));
}

TEST_F(SafetensorsValidationTest, RejectsHostileHeaderLengthsWithoutOverflow) {
  EXPECT_THAT(LoadRaw(testing_util::LengthPrefix(uint64_t{1} << 63) + "{}"),
              Rejected("header length 9223372036854775808 is beyond the end of the file (2"));
  EXPECT_THAT(LoadRaw(testing_util::LengthPrefix(std::numeric_limits<uint64_t>::max()) + "{}"),
              Rejected("header length 18446744073709551615 is beyond"));
}

TEST_F(SafetensorsValidationTest, RejectsHeaderThatIsNotJson) {
  EXPECT_THAT(Load(R"({"w": {"dtype": )"), Rejected("header is not valid JSON"));
}

TEST_F(SafetensorsValidationTest, InvalidJsonMessageStaysValidUtf8) {
  const absl::Status status = Load("\xff\xfe garbage").status();
  EXPECT_THAT(status, Rejected("header is not valid JSON"));
  EXPECT_TRUE(ValidateUtf8(std::string(status.message())).ok()) << status;
}

TEST_F(SafetensorsValidationTest, RejectsHeaderThatIsNotAnObject) {
  EXPECT_THAT(Load("[1, 2]"), Rejected("header is a JSON array, expected an object"));
}

TEST_F(SafetensorsValidationTest, RejectsEntryThatIsNotAnObject) {
  EXPECT_THAT(Load(R"({"w": 5})"), Rejected("tensor 'w': entry is a JSON number"));
}

TEST_F(SafetensorsValidationTest, RejectsEntryWithoutDtype) {
  EXPECT_THAT(Load(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", "abcd"),
              Rejected("tensor 'w': missing field \"dtype\""));
}

TEST_F(SafetensorsValidationTest, RejectsEntryWithoutShape) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", "abcd"),
              Rejected("tensor 'w': missing field \"shape\""));
}

TEST_F(SafetensorsValidationTest, RejectsEntryWithoutDataOffsets) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1]}})", "abcd"),
              Rejected("tensor 'w': missing field \"data_offsets\""));
}

TEST_F(SafetensorsValidationTest, RejectsFieldsOfTheWrongJsonType) {
  EXPECT_THAT(Load(R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", "abcd"),
              Rejected("tensor 'w': field \"dtype\" is a JSON number, expected a JSON string"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", "abcd"),
              Rejected("tensor 'w': field \"shape\" is a JSON string, expected a JSON array"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": {}}})", "abcd"),
              Rejected("field \"data_offsets\" is a JSON object, expected a JSON array"));
}

TEST_F(SafetensorsValidationTest, RejectsNonIntegerElements) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1, "2"], "data_offsets": [0, 8]}})"),
              Rejected("tensor 'w': dimension shape[1] is a JSON string, expected an integer"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4.5]}})"),
              Rejected("tensor 'w': data_offsets end is 4.5, expected a non-negative integer"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, null]}})"),
              Rejected("tensor 'w': data_offsets end is a JSON null, expected an integer"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})"),
              Rejected("tensor 'w': data_offsets has 1 elements, expected [begin, end]"));
}

TEST_F(SafetensorsValidationTest, RejectsUnknownDtype) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}})", "a"),
              Rejected("tensor 'w': unknown dtype \"F8\""));
}

TEST_F(SafetensorsValidationTest, RejectsNegativeDimension) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}})"),
              Rejected("tensor 'w': negative dimension shape[1] -3"));
}

TEST_F(SafetensorsValidationTest, RejectsShapeWhoseByteCountOverflows) {
  EXPECT_THAT(
      Load(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
      Rejected("tensor 'w': shape [4294967296, 4294967296] x F32 overflows the byte count"));
  EXPECT_THAT(
      Load(R"({"w": {"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 0]}})"),
      Rejected("tensor 'w': dimension shape[0] = 9223372036854775808 overflows int64"));
}

TEST_F(SafetensorsValidationTest, RejectsReversedDataOffsets) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [8, 4]}})",
                   std::string(8, 'x')),
              Rejected("tensor 'w': data_offsets begin 8 > end 4"));
}

TEST_F(SafetensorsValidationTest, RejectsDataOffsetsBeyondDataSection) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                   std::string(8, 'x')),
              Rejected("tensor 'w': data_offsets end 16 is beyond the data section of 8 bytes"));
}

TEST_F(SafetensorsValidationTest, RejectsHostileDataOffsetsWithoutOverflow) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "U8", "shape": [0],
                    "data_offsets": [18446744073709551615, 18446744073709551615]}})"),
              Rejected("data_offsets end 18446744073709551615 is beyond the data section of 0"));
  EXPECT_THAT(Load(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [-1, 0]}})"),
              Rejected("tensor 'w': negative data_offsets begin -1"));
}

TEST_F(SafetensorsValidationTest, RejectsOverlappingTensorsNamingBoth) {
  EXPECT_THAT(Load(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                       "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                   std::string(24, 'x')),
              Rejected("tensors 'a' [0, 16) and 'b' [8, 24) overlap"));
}

TEST_F(SafetensorsValidationTest, RejectsByteSizeThatDoesNotMatchShape) {
  EXPECT_THAT(Load(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})",
                   std::string(12, 'x')),
              Rejected("tensor 'w': byte size mismatch: expected 16 bytes for shape [2, 2] x "
                       "F32, actual 12"));
}

TEST_F(SafetensorsValidationTest, RejectsMetadataThatIsNotAnObject) {
  EXPECT_THAT(Load(R"({"__metadata__": ["pt"]})"),
              Rejected("__metadata__ is a JSON array, expected an object of string to string"));
}

TEST_F(SafetensorsValidationTest, RejectsMetadataWithNonStringValue) {
  EXPECT_THAT(Load(R"({"__metadata__": {"format": "pt", "step": 3}})"),
              Rejected("__metadata__ must map strings to strings, but \"step\" holds a JSON "
                       "number"));
}

TEST_F(SafetensorsValidationTest, AcceptsZeroSizeTensorsAnywhere) {
  auto file = Load(R"({"empty": {"dtype": "F32", "shape": [0, 4], "data_offsets": [4, 4]},
                       "full": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                   std::string(8, 'x'));
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorRef* empty = (*file)->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->numel(), 0);
  EXPECT_EQ(empty->nbytes, 0u);
  EXPECT_THAT(empty->shape, ElementsAre(0, 4));
}

TEST_F(SafetensorsValidationTest, AcceptsEmptyHeaderAndScalar) {
  auto empty = Load("{}");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE((*empty)->tensors().empty());
  float pi = 3.25f;
  std::string bytes(sizeof(pi), '\0');
  std::memcpy(bytes.data(), &pi, sizeof(pi));
  auto scalar = Load(R"({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})", bytes);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  const TensorRef* s = (*scalar)->Find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->numel(), 1);
  EXPECT_THAT(ToFloat32(*s), IsOkAndHolds(ElementsAre(3.25f)));
}

TEST_F(SafetensorsValidationTest, ListsTensorsInDataOrderAndReadsUnalignedData) {
  // A 3-byte header puts the data section at an odd address.
  std::string data(12, '\0');
  const float values[3] = {1.5f, -2.0f, 7.0f};
  std::memcpy(data.data(), values, sizeof(values));
  auto file = Load(R"({"z": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                   R"( "a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   data);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->tensors()[0].name, "z");
  EXPECT_EQ((*file)->tensors()[1].name, "a");
  EXPECT_EQ((*file)->Find("missing"), nullptr);
  EXPECT_THAT(ToFloat32(*(*file)->Find("a")), IsOkAndHolds(ElementsAre(-2.0f, 7.0f)));
}

TEST_F(SafetensorsValidationTest, EveryTruncationIsRejected) {
  const std::string full = SafetensorsBytes(
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F16", "shape": [2, 3],)"
      R"( "data_offsets": [0, 12]}, "b": {"dtype": "I64", "shape": [1], "data_offsets": [12, 20]}})",
      std::string(20, '\x07'));
  ASSERT_TRUE(LoadRaw(full).ok());
  for (size_t length = 0; length < full.size(); ++length) {
    ASSERT_THAT(LoadRaw(full.substr(0, length)), Rejected("")) << "length " << length;
  }
}

TEST_F(SafetensorsValidationTest, CorruptedBytesGiveOkOrInvalidArgument) {
  const std::string full = SafetensorsBytes(
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
      R"( "b": {"dtype": "U8", "shape": [0], "data_offsets": [8, 8]}})",
      std::string(8, '\x01'));
  const char kReplacements[] = {'\0', '\xff', '\x80', '9', '-', '"', '[', '{', ',', ' '};
  for (size_t at = 0; at < full.size(); ++at) {
    for (char replacement : kReplacements) {
      std::string corrupted = full;
      corrupted[at] = replacement;
      const absl::Status status = LoadRaw(corrupted).status();
      ASSERT_TRUE(status.ok() || status.code() == absl::StatusCode::kInvalidArgument)
          << "byte " << at << ": " << status;
    }
  }
}

TEST(SafetensorsOpenTest, MissingFileIsNotFoundNamingThePath) {
  ScopedTempDir dir;
  const std::string path = dir.File("absent.safetensors");
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kNotFound, StartsWith(path + ": ")));
}

TEST(SafetensorsOpenTest, DirectoryIsFailedPrecondition) {
  ScopedTempDir dir;
  EXPECT_THAT(SafetensorsFile::Open(dir.path()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
}

TEST(SafetensorsOpenTest, EmptyFileIsRejectedAsTooShort) {
  ScopedTempDir dir;
  const std::string path = dir.File("empty.safetensors");
  testing_util::WriteFile(path, "");
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith(path + ": "), HasSubstr("file is 0 bytes, too short"))));
}

TEST(SafetensorsOpenTest, HeaderOverTheSizeLimitIsRejectedBeforeParsing) {
  ScopedTempDir dir;
  const std::string path = dir.File("huge_header.safetensors");
  const uint64_t header_length = 100'000'001;
  testing_util::WriteFile(path, testing_util::LengthPrefix(header_length) + "{");
  // Sparse: the file claims a 100 MB header without using the disk space.
  std::filesystem::resize_file(path, 8 + header_length);
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith(path + ": "),
                             HasSubstr("header length 100000001 exceeds the limit of 100000000"))));
}

TEST(SafetensorsOpenTest, TruncatedFileOnDiskIsRejected) {
  ScopedTempDir dir;
  const std::string path = dir.File("truncated.safetensors");
  const std::string full = SafetensorsBytes(
      R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", std::string(16, 'x'));
  testing_util::WriteFile(path, full.substr(0, full.size() - 1));
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith(path + ": "),
                             HasSubstr("data_offsets end 16 is beyond the data section of 15"))));
}

TEST(SafetensorsRoundTripTest, WrittenTensorsReadBackIdentically) {
  ScopedTempDir dir;
  const std::string path = dir.File("round_trip.safetensors");
  const std::vector<float> weights = {0.0f, -1.5f, 3.0e-38f, 1.0e30f, -0.0f, 42.0f};
  const std::vector<int64_t> ids = {0, -7, std::numeric_limits<int64_t>::max()};
  ASSERT_TRUE(WriteSafetensors(path,
                               {MakeF32Tensor("w", {2, 3}, weights),
                                MakeI64Tensor("ids", {3}, ids), MakeF32Tensor("none", {0}, {})},
                               {{"format", "pt"}})
                  .ok());

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  const TensorRef* w = (*file)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_THAT(w->shape, ElementsAre(2, 3));
  auto read_weights = ToFloat32(*w);
  ASSERT_TRUE(read_weights.ok());
  ASSERT_EQ(read_weights->size(), weights.size());
  EXPECT_EQ(std::memcmp(read_weights->data(), weights.data(), weights.size() * sizeof(float)), 0);
  EXPECT_THAT(ToInt64(*(*file)->Find("ids")), IsOkAndHolds(ids));
  EXPECT_EQ((*file)->Find("none")->nbytes, 0u);
}

TEST(SafetensorsRoundTripTest, HeaderIsPaddedToEightBytesAndTensorsSortedByName) {
  ScopedTempDir dir;
  const std::string path = dir.File("layout.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {MakeF32Tensor("b", {1}, {2.0f}),
                                      MakeF32Tensor("a", {1}, {1.0f})})
                  .ok());
  const std::string bytes = testing_util::ReadFile(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), sizeof(header_length));
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_length + 8);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors()[0].name, "a");
  EXPECT_EQ((*file)->tensors()[1].name, "b");
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST(SafetensorsRoundTripTest, WriteRejectsBadTensorsAndUnwritablePaths) {
  ScopedTempDir dir;
  TensorToWrite short_data = MakeF32Tensor("w", {2, 2}, {1.0f, 2.0f, 3.0f});
  EXPECT_THAT(WriteSafetensors(dir.File("a.safetensors"), {short_data}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'w': 12 bytes of data, but its F32 shape needs 16")));
  EXPECT_THAT(WriteSafetensors(dir.File("b.safetensors"),
                               {MakeF32Tensor("x", {1}, {1.0f}), MakeF32Tensor("x", {1}, {2.0f})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'x' is given twice")));
  EXPECT_THAT(WriteSafetensors(dir.File("no/such/dir.safetensors"), {}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("cannot write file")));
}

// Bytes of `values` reinterpreted as a tensor of `dtype` and `shape`.
template <typename T>
TensorRef MakeRef(const std::vector<T>& values, DType dtype, std::vector<int64_t> shape) {
  return TensorRef{"t", dtype, std::move(shape), reinterpret_cast<const uint8_t*>(values.data()),
                   values.size() * sizeof(T)};
}

TEST(ConversionTest, ToFloat32ConvertsHalfBFloat16AndDouble) {
  const std::vector<uint16_t> half = {0x3C00, 0xC100, 0x7BFF, 0x0001};
  EXPECT_THAT(ToFloat32(MakeRef(half, DType::kF16, {4})),
              IsOkAndHolds(ElementsAre(1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24))));
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC020, 0x0001};
  EXPECT_THAT(ToFloat32(MakeRef(bf16, DType::kBF16, {3})),
              IsOkAndHolds(ElementsAre(1.0f, -2.5f, std::ldexp(1.0f, -133))));
  const std::vector<double> f64 = {0.1, -2.5};
  EXPECT_THAT(ToFloat32(MakeRef(f64, DType::kF64, {2})),
              IsOkAndHolds(ElementsAre(0.1f, -2.5f)));
}

TEST(ConversionTest, ToFloat32RejectsIntegerTensorsNamingThem) {
  const std::vector<int64_t> ids = {1, 2};
  EXPECT_THAT(ToFloat32(MakeRef(ids, DType::kI64, {2})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 't' has dtype I64")));
}

TEST(ConversionTest, ToInt64WidensI32AndRejectsFloats) {
  const std::vector<int32_t> ids = {-3, 2147483647};
  EXPECT_THAT(ToInt64(MakeRef(ids, DType::kI32, {2})),
              IsOkAndHolds(ElementsAre(-3, 2147483647)));
  const std::vector<float> values = {1.0f};
  EXPECT_THAT(ToInt64(MakeRef(values, DType::kF32, {1})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has dtype F32")));
}

TEST(ConversionTest, RejectsTensorRefWhoseBytesDisagreeWithShape) {
  const std::vector<float> values = {1.0f, 2.0f};
  EXPECT_THAT(ToFloat32(MakeRef(values, DType::kF32, {3})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("8 bytes do not hold shape [3] x F32")));
  EXPECT_EQ(MakeRef(values, DType::kF32, {-1, 2}).numel(), -1);
}

}  // namespace
}  // namespace attnscope
