// Memory an attnscope-server pod needs for the checkpoints it serves: the
// formula of deploy/README.md (Memory per model), which the Kubernetes
// overlays' requests and limits are checked against.
//
//   memory  = weights held + baseline + max_concurrent x workspace(T)
//   request >= memory, limit >= kHeadroom x memory
//
// weights held: the checkpoint file's size for BF16 weights (held once, as
// stored, in every precision); F32: the file plus a bfloat16 copy of the
// matrices made by the first bf16 request (x 1.5); F16: converted to float32
// plus that copy (x 3). Every --model is loaded at start, so they add up.
// baseline: the process without weights (libtorch and the libraries it
// loads, tokenizer, gRPC) and the tensor cache's free list, at most 256 MiB.
// workspace(T), for the longest sequence T a request may bring
// (min(positions, --max-prompt-tokens + --max-new-tokens)), float32:
//   T x 4 B x (2 L kv d      the KV cache
//              + (L+1) D     the hidden states kept for the response
//              + 2 I         the MLP's up|gate product of one layer
//              + 8 D)        one layer's q|k|v, attention output, residuals
//   + 128 x V x 4 B          logits, published 128 rows at a time
//   + 32 MiB                 the largest automatic attention block
//   + --max-attention-bytes  raw attention a request may ask for
// The largest workspace of the served models counts (requests to any model
// share the --max-concurrent slots).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope::deploy::testing {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;
// Measured: a fresh `attnscope analyze` process holds ~200 MiB besides the
// weights (docs/performance.md, Real sizes: 1,135 MiB with the 942 MiB Qwen2.5-0.5B
// weights; Tensor memory: 152 MiB of libtorch and its libraries); the
// tensor cache keeps up to 256 MiB of freed buffers; the server adds gRPC.
inline constexpr double kBaselineBytes = 512 * kMiB;
inline constexpr double kHeadroom = 1.25;
inline constexpr double kLogitBlockRows = 128;
inline constexpr double kAttentionBlockBytes = 32 * kMiB;  // 4 x kAutoAttentionBlockBytes

// A released checkpoint's shape, from its config.json, and its files' size.
struct ModelShape {
  std::string name;  // the Hugging Face repository's name = the directory's
  std::string dtype;  // "BF16", "F16" or "F32"
  double file_bytes;  // *.safetensors, all shards
  int64_t layers, width, kv_heads, head_dim, intermediate, vocab, positions;
};

// The checkpoints deploy/ names; nullptr for another name.
const ModelShape* FindModelShape(const std::string& name);
const std::vector<ModelShape>& KnownModelShapes();

// What attnscope-server's flags allow one request to hold.
struct RequestLimits {
  int64_t max_concurrent = 1;
  int64_t max_prompt_tokens = 0;  // 0: the model's positions
  int64_t max_new_tokens = 1024;  // 0: the model's positions
  double raw_attention_bytes = 0;  // the most raw attention one request holds
};

// The longest sequence one request may bring to `model`.
int64_t LongestSequence(const ModelShape& model, const RequestLimits& limits);
double HeldWeightBytes(const ModelShape& model);
double WorkspacePerToken(const ModelShape& model);
// One request's workspace over `tokens` positions (at most the model's).
double WorkspaceBytes(const ModelShape& model, int64_t tokens, double raw_attention_bytes);

struct MemoryEstimate {
  double weights = 0, baseline = 0, workspace = 0;
  double total() const { return weights + baseline + workspace; }
};
MemoryEstimate EstimateMemory(const std::vector<const ModelShape*>& models,
                              const RequestLimits& limits);

}  // namespace attnscope::deploy::testing
