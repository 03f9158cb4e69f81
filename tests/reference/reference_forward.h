// Runs a checkpoint through the public LanguageModel interface and keeps
// everything it publishes, in the layout of the reference files under
// tests/data/reference/ (made by scripts/reference/gpt2_reference.py).
// Depends only on language_model.h / forward_observer.h so that it outlives
// rewrites of the model layer's internals.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/safetensors.h"

namespace attnscope::reference {

// What one forward pass of one sequence published.
struct ForwardOutput {
  std::vector<float> attentions;     // (L, H, T, T)
  std::vector<float> hidden_states;  // (L + 1, T, D)
  std::vector<float> logits;         // (T, V)
  int64_t vocab = 0;
  std::vector<float> LastLogits() const;  // the last row of logits
};

// Loads `dir` with LoadLanguageModel and runs `ids` (one sequence).
absl::StatusOr<ForwardOutput> RunForward(const std::string& dir, const std::vector<int64_t>& ids);

// The tensors "<prefix>input_ids", "<prefix>attentions", ... of a reference
// file, as float32 (ids as int64). Empty vectors for absent names.
struct ReferenceTensors {
  std::vector<int64_t> input_ids;
  std::vector<float> attentions, hidden_states, logits, logits_last;
};
absl::StatusOr<ReferenceTensors> LoadReferenceTensors(const std::string& file,
                                                      const std::string& prefix = "");

// tests/data/<relative>, models/tiny-gpt2.
std::string TestData(const std::string& relative);
std::string BundledModelDir();

// A fresh directory under the system temp folder, unique per process and
// object (two suite runs may overlap), removed with the object.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Copies checkpoint `from` into `to`, with config.json's top-level fields in
// `overrides` (JSON values as text, e.g. {"activation_function", "\"relu\""})
// replaced.
absl::Status CopyWithConfig(const std::string& from, const std::string& to,
                            const std::map<std::string, std::string>& overrides);

// float32 -> bfloat16 bits, round to nearest even (what PyTorch's .bfloat16() does).
uint16_t FloatToBFloat16(float value);

// Rewrites every floating tensor of checkpoint `from` (one model.safetensors)
// into `to`: as BF16 (bf16 = true), or as the float32 values those BF16 bits
// hold (bf16 = false), so the two copies hold the same weights. config.json
// is copied with torch_dtype set to match.
absl::Status WriteRoundedCopy(const std::string& from, const std::string& to, bool bf16);

}  // namespace attnscope::reference
