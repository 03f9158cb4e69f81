// Internal to the model library (includes ATen): fetches checkpoint tensors
// by name as float32 at::Tensors, checking their shapes against the config.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/safetensors.h"

namespace attnscope::model {

class WeightLoader {
 public:
  // `prefixes` are tried in order in front of every name ("transformer.", "").
  WeightLoader(const SafetensorsCheckpoint& checkpoint, std::vector<std::string> prefixes);

  // The tensor `name` (without prefix) converted to a float32 tensor that owns
  // its memory. InvalidArgument if it is missing (the message lists the names
  // tried) or if its shape is not `shape`; `origin` explains where the
  // expected shape comes from, e.g. "n_embd=48".
  absl::StatusOr<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape,
                                 const std::string& origin) const;

  // True if the checkpoint holds `name` under one of the prefixes.
  bool Has(const std::string& name) const;

 private:
  const TensorRef* Lookup(const std::string& name, std::string* full_name) const;
  const SafetensorsCheckpoint& checkpoint_;
  std::vector<std::string> prefixes_;
};

// Picks the prefix a checkpoint uses: the first of `candidates` under which
// `probe` exists (e.g. "transformer." for "wte.weight"), or "" if none does.
std::string DetectPrefix(const SafetensorsCheckpoint& checkpoint, const std::string& probe,
                         const std::vector<std::string>& candidates);

}  // namespace attnscope::model
