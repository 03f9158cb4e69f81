#include "service/model/weight_loader.h"

#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/core/dtype.h"

namespace attnscope::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Widens n 16-bit values at `src` (unaligned) with `widen`, in parallel.
template <typename Widen>
void Widen16(const uint8_t* src, int64_t n, float* dst, Widen widen) {
  at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      dst[i] = widen(bits);
    }
  });
}

// The tensor as float32: aligned F32 data is wrapped where it lies in the
// mapping (the tensor holds `owner`, so the mapping outlives it); anything
// else is converted into memory torch owns, in one pass over the source.
absl::StatusOr<at::Tensor> ToFloatTensor(const TensorRef& t,
                                         const std::shared_ptr<const SafetensorsCheckpoint>& owner,
                                         bool keep_bf16) {
  if (keep_bf16 && t.dtype == DType::kBF16 && t.numel() > 0) {
    void* data = const_cast<uint8_t*>(t.data);  // read-only mapping, as for F32 below
    if (reinterpret_cast<uintptr_t>(data) % 2 == 0) {
      return at::from_blob(data, t.shape, [owner](void*) {}, at::kBFloat16);
    }
    at::Tensor out = at::empty(t.shape, at::kBFloat16);
    std::memcpy(out.data_ptr(), t.data, t.nbytes);
    return out;
  }
  if (t.dtype == DType::kF32 && t.numel() > 0 &&
      reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
    // ATen's API takes a mutable pointer; nothing writes to weights, and the
    // mapping is PROT_READ, so a stray write faults rather than corrupting.
    void* data = const_cast<uint8_t*>(t.data);
    return at::from_blob(data, t.shape, [owner](void*) {}, at::kFloat);
  }
  at::Tensor out = at::empty(t.shape, at::kFloat);
  float* dst = out.data_ptr<float>();
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(dst, t.data, t.nbytes);
      return out;
    case DType::kF16:
      Widen16(t.data, n, dst, HalfToFloat);
      return out;
    case DType::kBF16:
      Widen16(t.data, n, dst, BFloat16ToFloat);
      return out;
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, t.data + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return out;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.name, "' has dtype ", std::string(DTypeName(t.dtype)),
          "; model weights must be F32, F16, BF16 or F64"));
  }
}

}  // namespace

WeightLoader::WeightLoader(std::shared_ptr<const SafetensorsCheckpoint> checkpoint,
                           std::vector<std::string> prefixes, LoadProgressCallback progress)
    : owner_(std::move(checkpoint)),
      checkpoint_(*owner_),
      prefixes_(std::move(prefixes)),
      progress_(std::move(progress)) {
  if (progress_) {
    for (const std::string& name : checkpoint_.Names()) {
      total_bytes_ += static_cast<int64_t>(checkpoint_.Find(name)->nbytes);
    }
  }
}

const TensorRef* WeightLoader::Lookup(const std::vector<std::string>& prefixes,
                                      const std::string& name, std::string* full_name) const {
  for (const std::string& prefix : prefixes) {
    if (const TensorRef* t = checkpoint_.Find(prefix + name)) {
      if (full_name) *full_name = prefix + name;
      return t;
    }
  }
  return nullptr;
}

bool WeightLoader::Has(const std::string& name) const {
  return Lookup(prefixes_, name, nullptr) != nullptr;
}

bool WeightLoader::HasUnprefixed(const std::string& name) const {
  return Lookup({""}, name, nullptr) != nullptr;
}

absl::StatusOr<at::Tensor> WeightLoader::Get(const std::string& name,
                                             const std::vector<int64_t>& shape,
                                             const std::string& origin) const {
  return Fetch(prefixes_, name, shape, origin, false);
}

absl::StatusOr<at::Tensor> WeightLoader::GetUnprefixed(const std::string& name,
                                                       const std::vector<int64_t>& shape,
                                                       const std::string& origin) const {
  return Fetch({""}, name, shape, origin, false);
}

absl::StatusOr<at::Tensor> WeightLoader::GetStored(const std::string& name,
                                                   const std::vector<int64_t>& shape,
                                                   const std::string& origin) const {
  return Fetch(prefixes_, name, shape, origin, true);
}

absl::StatusOr<at::Tensor> WeightLoader::GetUnprefixedStored(const std::string& name,
                                                             const std::vector<int64_t>& shape,
                                                             const std::string& origin) const {
  return Fetch({""}, name, shape, origin, true);
}

void WeightLoader::ReleaseIfMapped(const at::Tensor& t) const {
  if (!t.defined() || t.numel() == 0) return;
  owner_->DropPages(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
}

absl::StatusOr<at::Tensor> WeightLoader::Fetch(const std::vector<std::string>& prefixes,
                                               const std::string& name,
                                               const std::vector<int64_t>& shape,
                                               const std::string& origin,
                                               bool keep_bf16) const {
  std::string full_name;
  const TensorRef* ref = Lookup(prefixes, name, &full_name);
  if (ref == nullptr) {
    std::vector<std::string> tried;
    for (const std::string& prefix : prefixes) tried.push_back("'" + prefix + name + "'");
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", checkpoint_.directory(),
                                                   " has no tensor ", absl::StrJoin(tried, " or ")));
  }
  if (ref->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", full_name, "' in ", checkpoint_.FileOf(full_name), " has shape ",
        ShapeString(ref->shape), " but config.json implies ", ShapeString(shape), " (", origin,
        ")"));
  }
  absl::StatusOr<at::Tensor> out = ToFloatTensor(*ref, owner_, keep_bf16);
  // A converted tensor no longer reads its source: the source's pages of
  // the mapping are let go (a clean file page, faulted back in if read
  // again), so that an F16 or BF16 checkpoint is not held beside its float32
  // copy. A wrapped F32 tensor reads the mapping itself and keeps them.
  if (out.ok() && out->data_ptr() != static_cast<const void*>(ref->data)) {
    owner_->DropPages(ref->data, ref->nbytes);
  }
  if (out.ok() && progress_) {
    done_bytes_ += static_cast<int64_t>(ref->nbytes);
    progress_(LoadProgress{++done_tensors_, done_bytes_, total_bytes_});
  }
  return out;
}

std::string DetectPrefix(const SafetensorsCheckpoint& checkpoint, const std::string& probe,
                         const std::vector<std::string>& candidates) {
  for (const std::string& prefix : candidates) {
    if (checkpoint.Find(prefix + probe) != nullptr) return prefix;
  }
  return "";
}

}  // namespace attnscope::model
