// Checkpoints with the real config.json of released models and random
// weights, written at bench or test time (nothing can be downloaded): the
// shapes, dtype, tensor names and config keys a user's checkpoint has, at
// full size or with fewer layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope::testing {

// The released models whose config.json is known here, e.g.
// "Qwen2.5-0.5B", "Llama-3.2-1B", "Llama-3.1-8B".
std::vector<std::string> RealModelNames();

// The config.json of `model` as released (its text), or "" if unknown.
std::string RealConfigJson(const std::string& model);

struct RealCheckpointOptions {
  int64_t layers = 0;      // 0: the config's num_hidden_layers; else fewer
  int64_t shard_bytes = 0;  // 0: one model.safetensors; else shards of about this size
  uint64_t seed = 1;
  // Only the headers are written; each file is then extended to its full
  // size as a hole (no disk blocks), so its weights read as zeros: for tests
  // of what must not read the weights (a 16 GB checkpoint costs nothing).
  bool sparse = false;
};

// Writes config.json (num_hidden_layers replaced when options.layers > 0)
// and the checkpoint's tensors in BF16 with the names Hugging Face saves,
// streamed tensor by tensor (an 8B model is never held in memory): matrices
// uniform with std 0.02, norm gains 1, biases small. Returns the bytes of
// safetensors written, or -1 (printing why) on failure.
int64_t WriteRealCheckpoint(const std::string& model, const std::string& dir,
                            const RealCheckpointOptions& options = {});

}  // namespace attnscope::testing
