// A decoder-only language model that publishes its internals while it runs.
// Torch-free: callers (CLI, analysis, rpc) never include libtorch headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/model/compute_options.h"
#include "service/model/forward_observer.h"
#include "service/model/model_config.h"

namespace attnscope::model {

struct HeadRef {
  int layer = 0;
  int head = 0;
};

enum class AblationMode {
  kZero,  // the head's output (before the output projection) set to 0
  kMean,  // replaced by its mean over all positions and sequences of the batch
};

// Keys and values of earlier tokens, for incremental decoding. Opaque; made by
// LanguageModel::NewCache and only valid with the model that made it.
class KvCache {
 public:
  virtual ~KvCache() = default;
  // Tokens already in the cache (the position of the next token).
  virtual int64_t length() const = 0;
};

struct ForwardOptions {
  // Query rows per attention block: B > 0 bounds the extra memory per layer
  // to H x B x T (B >= T: whole layers); 0 chooses automatically: whole
  // layers while a layer's probabilities fit kAutoAttentionBlockBytes
  // (attention_blocks.h), else blocks that fit, so memory stays linear in T.
  int64_t query_block_size = 0;
  // Heads to ablate, and how.
  std::vector<HeadRef> ablate;
  AblationMode ablation_mode = AblationMode::kZero;
  // kBfloat16: the operands of every projection (q/k/v, output, MLP, head)
  // and q, k, v themselves rounded to bfloat16; the probabilities, softmax,
  // norms, the residual stream, the published tensors and so every
  // statistic stay float32. The bfloat16 matrices are made on the first such
  // pass and kept (see device.h).
  Precision precision = Precision::kFloat32;
  // Checked before every layer; returning true aborts with CancelledError.
  std::function<bool()> should_stop;
  // Incremental decoding (batch of one sequence): keys/values of the new
  // tokens are appended; positions continue at cache->length(). Observers then
  // see attention rows for the new tokens over all keys, and hidden states and
  // logits of the new tokens only.
  KvCache* cache = nullptr;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual const ModelConfig& config() const = 0;

  // Runs the forward pass in float32 over `batch` (sequences of equal length
  // T >= 1) and publishes to every observer what it asked for (see
  // forward_observer.h). InvalidArgument for an empty batch, ragged lengths, a
  // token id outside [0, vocab), more tokens than max_positions (the message
  // names both numbers), an ablated head out of range; CancelledError when
  // should_stop fires; Internal for a failure inside libtorch.
  virtual absl::Status Forward(const std::vector<std::vector<int64_t>>& batch,
                               const ForwardOptions& options,
                               const std::vector<ForwardObserver*>& observers) const = 0;

  virtual std::unique_ptr<KvCache> NewCache() const = 0;
};

// How far loading has come: tensors converted so far, and their bytes out
// of the bytes of every tensor in the checkpoint.
struct LoadProgress {
  int64_t tensors_done = 0;
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
};
using LoadProgressCallback = std::function<void(const LoadProgress&)>;

// Loads a Hugging Face checkpoint directory (config.json + model.safetensors
// or sharded safetensors with model.safetensors.index.json) of any family
// SupportedModelTypes() lists. The files are memory-mapped and each tensor is
// converted to float32 once (F32, F16, BF16 or F64 stored). Errors name the
// file and the problem: missing or malformed files, an unsupported
// model_type or config key value, a missing tensor, a shape that disagrees
// with config.json. On error nothing is returned half-loaded. `progress`
// (optional) is called after each tensor. The weights go to
// `options.device`: FailedPrecondition (saying why and what to do) for
// kCuda on a build or machine without CUDA; kAuto falls back to the CPU.
absl::StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(
    const std::string& dir, const LoadProgressCallback& progress = nullptr,
    const ModelLoadOptions& options = {});

// Sets the number of intra-op threads libtorch uses (n <= 0: all cores).
// Returns the number in effect.
int SetComputeThreads(int n);

}  // namespace attnscope::model
