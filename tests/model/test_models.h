// Small verbs shared by the model tests: fixture paths, reference tensors,
// scratch checkpoint directories.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "service/core/safetensors.h"

namespace attnscope::model::testing {

std::string FixtureDir(const std::string& name);  // tests/data/models/<name>
std::string BundledModelDir();                     // models/tiny-gpt2

// The tensors of <fixture>/reference.safetensors.
struct Reference {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_shape;  // (L, H, T, T)
  std::vector<float> attentions, hidden_states, logits;
};
Reference LoadReference(const std::string& fixture);

// Largest |a - b| over two equal-length vectors (infinity if lengths differ,
// NaN if any element is NaN): tests/common/float_compare.h's MaxAbsDiff.
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);

// A fresh temporary directory, removed with the object.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  void Write(const std::string& name, const std::string& contents) const;
  void CopyFrom(const std::string& dir) const;  // every file of `dir`
 private:
  std::filesystem::path path_;
};

// All tensors of a checkpoint as TensorToWrite, for writing altered copies.
std::map<std::string, TensorToWrite> ReadAllTensors(const std::string& file);

}  // namespace attnscope::model::testing
