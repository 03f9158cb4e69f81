#include "service/model/weight_loader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace attnscope::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::StatusOr<at::ScalarType> TorchType(const TensorRef& t) {
  switch (t.dtype) {
    case DType::kF32:
      return at::kFloat;
    case DType::kF16:
      return at::kHalf;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kF64:
      return at::kDouble;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.name, "' has dtype ", std::string(DTypeName(t.dtype)),
          "; model weights must be F32, F16, BF16 or F64"));
  }
}

}  // namespace

WeightLoader::WeightLoader(const SafetensorsCheckpoint& checkpoint,
                           std::vector<std::string> prefixes)
    : checkpoint_(checkpoint), prefixes_(std::move(prefixes)) {}

const TensorRef* WeightLoader::Lookup(const std::string& name, std::string* full_name) const {
  for (const std::string& prefix : prefixes_) {
    if (const TensorRef* t = checkpoint_.Find(prefix + name)) {
      if (full_name) *full_name = prefix + name;
      return t;
    }
  }
  return nullptr;
}

bool WeightLoader::Has(const std::string& name) const { return Lookup(name, nullptr) != nullptr; }

absl::StatusOr<at::Tensor> WeightLoader::Get(const std::string& name,
                                             const std::vector<int64_t>& shape,
                                             const std::string& origin) const {
  std::string full_name;
  const TensorRef* ref = Lookup(name, &full_name);
  if (ref == nullptr) {
    std::vector<std::string> tried;
    for (const std::string& prefix : prefixes_) tried.push_back("'" + prefix + name + "'");
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", checkpoint_.directory(),
                                                   " has no tensor ", absl::StrJoin(tried, " or ")));
  }
  if (ref->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", full_name, "' in ", checkpoint_.FileOf(full_name), " has shape ",
        ShapeString(ref->shape), " but config.json implies ", ShapeString(shape), " (", origin,
        ")"));
  }
  auto type = TorchType(*ref);
  if (!type.ok()) return type.status();
  // Copy out of the mapping into memory torch owns (the mapping may be
  // unaligned and is released after loading), then widen to float32.
  at::Tensor raw = at::empty(shape, at::TensorOptions().dtype(*type));
  std::memcpy(raw.data_ptr(), ref->data, ref->nbytes);
  return raw.to(at::kFloat).contiguous();
}

std::string DetectPrefix(const SafetensorsCheckpoint& checkpoint, const std::string& probe,
                         const std::vector<std::string>& candidates) {
  for (const std::string& prefix : candidates) {
    if (checkpoint.Find(prefix + probe) != nullptr) return prefix;
  }
  return "";
}

}  // namespace attnscope::model
