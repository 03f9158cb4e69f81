// WriteSafetensors and the helpers that build tensors to write.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"

namespace attnscope {
namespace {

using Json = nlohmann::json;

constexpr size_t kHeaderAlignment = 8;

absl::Status CheckTensor(const std::string& path, const TensorToWrite& tensor) {
  const std::string what = absl::StrCat(path, ": tensor name");
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(tensor.name, what));
  if (tensor.name == "__metadata__") {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"__metadata__\" is reserved"));
  }
  uint64_t expected = DTypeSize(tensor.dtype);
  for (int64_t dim : tensor.shape) {
    if (dim < 0 || __builtin_mul_overflow(expected, static_cast<uint64_t>(dim), &expected)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", tensor.name,
                                                     "': invalid dimension ", dim));
    }
  }
  if (expected != tensor.data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tensor '", tensor.name, "': ", tensor.data.size(), " bytes of data, but its ",
        std::string(DTypeName(tensor.dtype)), " shape needs ", expected));
  }
  return absl::OkStatus();
}

// The JSON header for `sorted` (data laid out in that order), padded with
// spaces to a multiple of 8 bytes.
absl::StatusOr<std::string> BuildHeader(const std::string& path,
                                        const std::vector<const TensorToWrite*>& sorted,
                                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const TensorToWrite* tensor : sorted) {
    header[tensor->name] = {{"dtype", std::string(DTypeName(tensor->dtype))},
                            {"shape", tensor->shape},
                            {"data_offsets", {offset, offset + tensor->data.size()}}};
    offset += tensor->data.size();
  }
  if (!metadata.empty()) {
    for (const auto& [key, value] : metadata) {
      ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(key, absl::StrCat(path, ": metadata key")));
      ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(value, absl::StrCat(path, ": metadata value")));
    }
    header["__metadata__"] = metadata;
  }
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  return text;
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorToWrite*> sorted;
  std::set<std::string> names;
  for (const TensorToWrite& tensor : tensors) {
    ATTNSCOPE_RETURN_IF_ERROR(CheckTensor(path, tensor));
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", tensor.name, "' is given twice"));
    }
    sorted.push_back(&tensor);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string header, BuildHeader(path, sorted, metadata));
  std::string prefix(8, '\0');
  for (size_t i = 0; i < 8; ++i) {
    prefix[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xFFu);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const TensorToWrite* tensor : sorted) {
    out.write(tensor->data.data(), static_cast<std::streamsize>(tensor->data.size()));
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write file"));
  return absl::OkStatus();
}

TensorToWrite MakeF32Tensor(std::string name, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  std::string data(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  return TensorToWrite{std::move(name), DType::kF32, std::move(shape), std::move(data)};
}

TensorToWrite MakeI64Tensor(std::string name, std::vector<int64_t> shape,
                            const std::vector<int64_t>& values) {
  std::string data(values.size() * sizeof(int64_t), '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  return TensorToWrite{std::move(name), DType::kI64, std::move(shape), std::move(data)};
}

}  // namespace attnscope
