#include "service/core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; tensors are copied with memcpy");

namespace attnscope {
namespace {

using Json = nlohmann::json;

constexpr size_t kLengthPrefixBytes = 8;
// The reference implementation refuses larger headers too; it bounds the
// memory a hostile header can make the JSON parser allocate.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

// A header entry after its JSON has been checked, before the byte ranges are
// compared with each other.
struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

template <typename... Args>
absl::Status FileError(const std::string& path, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", args...));
}

template <typename... Args>
absl::Status TensorError(const std::string& path, const std::string& name,
                         const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "': ", args...));
}

// DTypeName for absl::StrCat, whose absl::string_view is not std::string_view
// in this Abseil build.
absl::string_view TypeName(DType dtype) {
  const std::string_view name = DTypeName(dtype);
  return absl::string_view(name.data(), name.size());
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Non-negative integer of a JSON value, or an error naming `what`.
absl::StatusOr<uint64_t> NonNegativeInt(const Json& value, const std::string& what) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative ", what, " ", value.get<int64_t>()));
  }
  if (value.is_number_float()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", value.dump(), ", expected a non-negative integer"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is a JSON ", value.type_name(), ", expected an integer"));
}

absl::StatusOr<const Json*> Field(const std::string& path, const std::string& name,
                                  const Json& entry, const char* key, Json::value_t type) {
  const auto it = entry.find(key);
  if (it == entry.end()) return TensorError(path, name, "missing field \"", key, "\"");
  if (it->type() != type) {
    return TensorError(path, name, "field \"", key, "\" is a JSON ", it->type_name(),
                       ", expected a JSON ", Json(type).type_name());
  }
  return &*it;
}

absl::Status ParseShape(const std::string& path, Entry* entry, const Json& shape) {
  for (size_t i = 0; i < shape.size(); ++i) {
    const std::string what = absl::StrCat("dimension shape[", i, "]");
    absl::StatusOr<uint64_t> dim = NonNegativeInt(shape[i], what);
    if (!dim.ok()) return TensorError(path, entry->name, dim.status().message());
    if (*dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(path, entry->name, what, " = ", *dim, " overflows int64");
    }
    entry->shape.push_back(static_cast<int64_t>(*dim));
  }
  return absl::OkStatus();
}

absl::Status ParseOffsets(const std::string& path, Entry* entry, const Json& offsets) {
  if (offsets.size() != 2) {
    return TensorError(path, entry->name, "data_offsets has ", offsets.size(),
                       " elements, expected [begin, end]");
  }
  absl::StatusOr<uint64_t> begin = NonNegativeInt(offsets[0], "data_offsets begin");
  if (!begin.ok()) return TensorError(path, entry->name, begin.status().message());
  absl::StatusOr<uint64_t> end = NonNegativeInt(offsets[1], "data_offsets end");
  if (!end.ok()) return TensorError(path, entry->name, end.status().message());
  entry->begin = *begin;
  entry->end = *end;
  return absl::OkStatus();
}

absl::StatusOr<Entry> ParseEntry(const std::string& path, const std::string& name,
                                 const Json& value) {
  if (!value.is_object()) {
    return TensorError(path, name, "entry is a JSON ", value.type_name(), ", expected an object");
  }
  Entry entry;
  entry.name = name;
  ATTNSCOPE_ASSIGN_OR_RETURN(const Json* dtype,
                             Field(path, name, value, "dtype", Json::value_t::string));
  ATTNSCOPE_ASSIGN_OR_RETURN(const Json* shape,
                             Field(path, name, value, "shape", Json::value_t::array));
  ATTNSCOPE_ASSIGN_OR_RETURN(const Json* offsets,
                             Field(path, name, value, "data_offsets", Json::value_t::array));
  absl::StatusOr<DType> parsed = ParseDType(dtype->get_ref<const std::string&>());
  if (!parsed.ok()) return TensorError(path, name, parsed.status().message());
  entry.dtype = *parsed;
  ATTNSCOPE_RETURN_IF_ERROR(ParseShape(path, &entry, *shape));
  ATTNSCOPE_RETURN_IF_ERROR(ParseOffsets(path, &entry, *offsets));
  return entry;
}

// Checks one entry's byte range against the data section and its shape.
absl::Status CheckExtent(const std::string& path, const Entry& entry, uint64_t data_size) {
  if (entry.begin > entry.end) {
    return TensorError(path, entry.name, "data_offsets begin ", entry.begin, " > end ",
                       entry.end);
  }
  if (entry.end > data_size) {
    return TensorError(path, entry.name, "data_offsets end ", entry.end,
                       " is beyond the data section of ", data_size, " bytes");
  }
  uint64_t expected = DTypeSize(entry.dtype);
  for (int64_t dim : entry.shape) {
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(dim), &expected)) {
      return TensorError(path, entry.name, "shape ", ShapeString(entry.shape), " x ",
                         TypeName(entry.dtype), " overflows the byte count");
    }
  }
  const uint64_t actual = entry.end - entry.begin;
  if (actual != expected) {
    return TensorError(path, entry.name, "byte size mismatch: expected ", expected,
                       " bytes for shape ", ShapeString(entry.shape), " x ",
                       TypeName(entry.dtype), ", actual ", actual, " from data_offsets [",
                       entry.begin, ", ", entry.end, "]");
  }
  return absl::OkStatus();
}

// `entries` sorted by begin. Empty tensors occupy no bytes, so they can sit
// anywhere, including inside another tensor's range.
absl::Status CheckOverlaps(const std::string& path, const std::vector<Entry>& entries) {
  const Entry* last = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin == entry.end) continue;
    if (last != nullptr && entry.begin < last->end) {
      return FileError(path, "tensors '", last->name, "' [", last->begin, ", ", last->end,
                       ") and '", entry.name, "' [", entry.begin, ", ", entry.end,
                       ") overlap");
    }
    if (last == nullptr || entry.end > last->end) last = &entry;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const std::string& path,
                                                                 const Json& value) {
  if (!value.is_object()) {
    return FileError(path, "__metadata__ is a JSON ", value.type_name(),
                     ", expected an object of string to string");
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return FileError(path, "__metadata__ must map strings to strings, but \"", key,
                       "\" holds a JSON ", item.type_name());
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

struct Header {
  Json json;
  size_t data_offset = 0;  // Start of the data section in the file.
};

// Reads the length prefix and parses the JSON header it delimits.
absl::StatusOr<Header> ParseHeader(const std::string& path, const uint8_t* bytes, size_t size) {
  if (size < kLengthPrefixBytes) {
    return FileError(path, "file is ", size, " bytes, too short for the ", kLengthPrefixBytes,
                     "-byte header length prefix");
  }
  uint64_t header_length = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    header_length |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  }
  const uint64_t available = size - kLengthPrefixBytes;
  if (header_length > available) {
    return FileError(path, "header length ", header_length, " is beyond the end of the file (",
                     available, " bytes follow the length prefix)");
  }
  if (header_length > kMaxHeaderBytes) {
    return FileError(path, "header length ", header_length, " exceeds the limit of ",
                     kMaxHeaderBytes, " bytes");
  }
  const char* begin = reinterpret_cast<const char*>(bytes + kLengthPrefixBytes);
  Header header;
  header.data_offset = kLengthPrefixBytes + static_cast<size_t>(header_length);
  try {
    header.json = Json::parse(begin, begin + header_length);
  } catch (const Json::exception& e) {
    // The parser quotes the offending bytes; keep the message valid UTF-8.
    return FileError(path, "header is not valid JSON: ", SanitizeUtf8(e.what()));
  }
  if (!header.json.is_object()) {
    return FileError(path, "header is a JSON ", header.json.type_name(), ", expected an object");
  }
  return header;
}

}  // namespace

int64_t TensorRef::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count)) return -1;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const uint8_t* bytes = mapping->data();
  const size_t size = mapping->size();
  file->mapping_ = std::move(mapping);
  return Parse(std::move(file), bytes, size);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(std::string name,
                                                                             std::string bytes) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(name);
  file->buffer_ = std::move(bytes);
  const uint8_t* data = reinterpret_cast<const uint8_t*>(file->buffer_.data());
  const size_t size = file->buffer_.size();
  return Parse(std::move(file), data, size);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(
    std::unique_ptr<SafetensorsFile> file, const uint8_t* bytes, size_t size) {
  const std::string& path = file->path_;
  ATTNSCOPE_ASSIGN_OR_RETURN(Header header, ParseHeader(path, bytes, size));
  const uint64_t data_size = size - header.data_offset;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.json.items()) {
    if (name == kMetadataKey) {
      ATTNSCOPE_ASSIGN_OR_RETURN(file->metadata_, ParseMetadata(path, value));
      continue;
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(Entry entry, ParseEntry(path, name, value));
    ATTNSCOPE_RETURN_IF_ERROR(CheckExtent(path, entry, data_size));
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  ATTNSCOPE_RETURN_IF_ERROR(CheckOverlaps(path, entries));
  const uint8_t* data = bytes + header.data_offset;
  for (Entry& entry : entries) {
    file->index_[entry.name] = file->tensors_.size();
    file->tensors_.push_back(TensorRef{std::move(entry.name), entry.dtype, std::move(entry.shape),
                                       data + entry.begin,
                                       static_cast<size_t>(entry.end - entry.begin)});
  }
  return file;
}

const TensorRef* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool SafetensorsFile::DropPages(const void* p, size_t n) const {
  return mapping_ != nullptr && mapping_->DropPages(p, n);
}

namespace {

// Checks that `tensor` is self-consistent before its bytes are copied: a
// hand-built TensorRef may disagree with itself.
absl::StatusOr<size_t> CheckedElementCount(const TensorRef& tensor) {
  const int64_t numel = tensor.numel();
  const size_t element = DTypeSize(tensor.dtype);
  if (numel < 0 || tensor.nbytes % element != 0 ||
      tensor.nbytes / element != static_cast<uint64_t>(numel) ||
      (tensor.data == nullptr && tensor.nbytes != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor.name, "': ", tensor.nbytes, " bytes do not hold shape ",
        ShapeString(tensor.shape), " x ", TypeName(tensor.dtype)));
  }
  return static_cast<size_t>(numel);
}

template <typename Stored, typename Out, typename Convert>
std::vector<Out> ConvertEach(const TensorRef& tensor, size_t count, Convert convert) {
  std::vector<Out> out(count);
  for (size_t i = 0; i < count; ++i) {
    Stored value;
    std::memcpy(&value, tensor.data + i * sizeof(Stored), sizeof(Stored));
    out[i] = convert(value);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<float>> ToFloat32(const TensorRef& tensor) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const size_t count, CheckedElementCount(tensor));
  switch (tensor.dtype) {
    case DType::kF32:
      return ConvertEach<float, float>(tensor, count, [](float v) { return v; });
    case DType::kF16:
      return ConvertEach<uint16_t, float>(tensor, count, HalfToFloat);
    case DType::kBF16:
      return ConvertEach<uint16_t, float>(tensor, count, BFloat16ToFloat);
    case DType::kF64:
      return ConvertEach<double, float>(tensor, count,
                                        [](double v) { return static_cast<float>(v); });
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "' has dtype ",
                                                     TypeName(tensor.dtype),
                                                     ", expected F32, F16, BF16 or F64"));
  }
}

absl::StatusOr<std::vector<int64_t>> ToInt64(const TensorRef& tensor) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const size_t count, CheckedElementCount(tensor));
  switch (tensor.dtype) {
    case DType::kI64:
      return ConvertEach<int64_t, int64_t>(tensor, count, [](int64_t v) { return v; });
    case DType::kI32:
      return ConvertEach<int32_t, int64_t>(tensor, count,
                                           [](int32_t v) { return static_cast<int64_t>(v); });
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "' has dtype ",
                                                     TypeName(tensor.dtype),
                                                     ", expected I64 or I32"));
  }
}

}  // namespace attnscope
