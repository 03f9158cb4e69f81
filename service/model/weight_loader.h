// Internal to the model library (includes ATen): fetches checkpoint tensors
// by name as float32 at::Tensors (or BF16 ones as stored, GetStored),
// checking their shapes against the config. F32 tensors (and stored BF16
// ones) are used straight from the memory-mapped file (no copy): such
// tensors are read-only (writing to them faults) and keep the checkpoint's
// mapping alive.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/safetensors.h"
#include "service/model/language_model.h"

namespace attnscope::model {

class WeightLoader {
 public:
  // `prefixes` are tried in order in front of every name ("transformer.", "").
  // `progress` (may be empty) hears about every tensor converted.
  WeightLoader(std::shared_ptr<const SafetensorsCheckpoint> checkpoint,
               std::vector<std::string> prefixes, LoadProgressCallback progress = nullptr);

  // The tensor `name` (without prefix) as float32: an F32 tensor whose data
  // is 4-byte aligned is a read-only view of the mapped file; any other is
  // converted once, in one pass, into memory torch owns. InvalidArgument if it is
  // missing (the message lists the names tried) or if its shape is not
  // `shape`; `origin` explains where the expected shape comes from, e.g.
  // "hidden_size=48".
  absl::StatusOr<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape,
                                 const std::string& origin) const;

  // As Get, except that a BF16 tensor comes as a bfloat16 tensor, as stored:
  // a read-only view of the mapped file where its data is 2-byte aligned,
  // else a copy. For the matrices of the products, which are packed or
  // widened to float32 just before each product: a BF16 checkpoint's
  // weights are then held once, at two bytes each.
  absl::StatusOr<at::Tensor> GetStored(const std::string& name, const std::vector<int64_t>& shape,
                                       const std::string& origin) const;
  absl::StatusOr<at::Tensor> GetUnprefixedStored(const std::string& name,
                                                 const std::vector<int64_t>& shape,
                                                 const std::string& origin) const;

  // Lets the checkpoint's pages under `t` go if `t` is a view of the mapped
  // file (after copying it, e.g. into a fused matrix); nothing otherwise.
  void ReleaseIfMapped(const at::Tensor& t) const;

  // True if the checkpoint holds `name` under one of the prefixes.
  bool Has(const std::string& name) const;

  // Name tried without any prefix (lm_head.weight, embed_out.weight).
  absl::StatusOr<at::Tensor> GetUnprefixed(const std::string& name,
                                           const std::vector<int64_t>& shape,
                                           const std::string& origin) const;
  bool HasUnprefixed(const std::string& name) const;

 private:
  const TensorRef* Lookup(const std::vector<std::string>& prefixes, const std::string& name,
                          std::string* full_name) const;
  absl::StatusOr<at::Tensor> Fetch(const std::vector<std::string>& prefixes,
                                   const std::string& name, const std::vector<int64_t>& shape,
                                   const std::string& origin, bool keep_bf16) const;
  std::shared_ptr<const SafetensorsCheckpoint> owner_;
  const SafetensorsCheckpoint& checkpoint_;
  std::vector<std::string> prefixes_;
  LoadProgressCallback progress_;
  int64_t total_bytes_ = 0;
  mutable int64_t done_bytes_ = 0;
  mutable int64_t done_tensors_ = 0;
};

// Picks the prefix a checkpoint uses: the first of `candidates` under which
// `probe` exists (e.g. "transformer." for "wte.weight"), or "" if none does.
std::string DetectPrefix(const SafetensorsCheckpoint& checkpoint, const std::string& probe,
                         const std::vector<std::string>& candidates);

}  // namespace attnscope::model
