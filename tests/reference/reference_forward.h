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
#include "tests/reference/checkpoint_copies.h"

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

}  // namespace attnscope::reference
