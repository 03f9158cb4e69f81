// A decoder-only language model that publishes its internals while it runs.
// Torch-free: callers (CLI, analysis, rpc) never include libtorch headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// Which position a cached token has when later tokens attend to it.
enum class CachePositions {
  // Every token keeps its position in the text; the next token sits at
  // next_position(), whatever was evicted. The only choice for learned
  // absolute positions.
  kOriginal,
  // StreamingLLM's position shift: keys are cached before the rotary
  // embedding and rotated at every step by their index in the cache
  // (0 .. length()-1); the next token sits at length(). Rotary models only.
  kCache,
};

// Keys and values of earlier tokens, for incremental decoding. Opaque; made by
// LanguageModel::NewCache and only valid with the model that made it.
class KvCache {
 public:
  virtual ~KvCache() = default;
  // Tokens in the cache (without eviction, the position of the next token).
  virtual int64_t length() const = 0;
  // Position in the text of the next token fed: tokens fed so far, evicted
  // ones included.
  virtual int64_t next_position() const { return length(); }
  // The text position of each cached token, in cache order (ascending).
  virtual std::vector<int64_t> positions() const { return {}; }
  // Bytes the cached keys and values take (all layers).
  virtual int64_t bytes() const { return 0; }
  // Keeps only the cached tokens at `indices` (cache indices, strictly
  // ascending, each < length()) and drops the rest. InvalidArgument for
  // indices that are not so; Unimplemented for a cache that cannot evict.
  virtual absl::Status Keep(const std::vector<int64_t>& indices) {
    return absl::UnimplementedError("this model's KV cache does not support eviction");
  }
};

// Activation patching: a value put in place of the pass's own (a pass of one
// sequence without a cache).
struct ActivationPatch {
  enum class Kind {
    kHeadOutput,  // head `head`'s weighted values at every position: (T, d)
    kResidual,    // the residual stream entering `layer` at `position`: (D)
  };
  Kind kind = Kind::kHeadOutput;
  int layer = 0;
  int64_t head = 0;
  int64_t position = 0;
  std::vector<float> values;
};

struct ForwardOptions {
  // Query rows per attention block: B > 0 bounds the extra memory per layer
  // to H x B x T (B >= T: whole layers); 0 chooses automatically: blocks
  // of at most kAutoMaxBlockRows rows whose probabilities fit
  // kAutoAttentionBlockBytes (attention_blocks.h), so memory stays linear
  // in T.
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
  // Optional extra mask, (T, past + T) row-major over the new tokens' rows
  // and all keys: nonzero hides key j from query row r on top of the causal
  // (and sliding-window) mask. Empty: none. For references that reproduce an
  // evicting cache with one full pass; InvalidArgument when the size differs.
  std::vector<uint8_t> hidden_keys;
  // Values put in place of the pass's own (after any ablation); InvalidArgument
  // for a layer, head or position outside the model or the prompt, values of
  // the wrong size, a batch of more than one sequence or a cache.
  std::vector<ActivationPatch> patches;
  // Starts the pass at layer `resume.layer` from `resume.state`: the
  // residual stream entering that layer, (T, D) float32 row-major, as a pass
  // of the same ids and options published it (hidden state `layer`). The
  // layers before it are not run and their hidden states not published: for
  // passes that share an unchanged prefix (activation patching). layer 0:
  // from the embeddings. InvalidArgument for a layer outside 0..L-1, a state
  // of the wrong size, a batch of more than one sequence or a cache.
  struct Resume {
    int layer = 0;
    const float* state = nullptr;  // not owned; read during Forward only
    int64_t size = 0;              // floats at state
  } resume;
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

  // The logit lens: the logits hidden state `state` would give if the
  // model read out there. x is (rows, width) float32 row-major: rows of
  // state `state` as Forward publishes it (0..L, Hugging Face's
  // output_hidden_states convention; width = D, or the last state's width
  // for state L). For state < L the rows go through what follows the last
  // layer: the final norm (where the family has one), OPT's project_out,
  // the head and Gemma-2's final soft-capping; state L is already after the
  // final norm, so only the head and the soft-capping apply and it gives the
  // model's own logits. logits receives (rows, V) float32. `precision` as in
  // ForwardOptions. InvalidArgument for a state outside [0, L] or rows < 0;
  // Internal for a failure inside libtorch; Unimplemented for a model that
  // cannot.
  virtual absl::Status HiddenStateLogits(int state, const float* x, int64_t rows,
                                         Precision precision, float* logits) const {
    return absl::UnimplementedError("this model cannot read logits out of a hidden state");
  }

  // Direct logit attribution (service/analysis/definitions.md): what each
  // head of `layer` writes into the residual stream at `rows` positions.
  // head_mix (rows, H * d) and attention_raw (rows, D) are those rows as
  // OnSublayerWrites publishes them; out receives (rows, H, D): head h's
  // slice of the output projection applied to its values, without the
  // projection's bias, and through Gemma-2's post-attention norm with its
  // scale frozen at the row of attention_raw (so the heads and the bias's
  // share sum to the attention's write). InvalidArgument for a layer
  // outside [0, L) or rows < 0; Unimplemented for a model that cannot.
  virtual absl::Status HeadWrites(int layer, const float* head_mix, const float* attention_raw,
                                  int64_t rows, Precision precision, float* out) const {
    return absl::UnimplementedError("this model cannot split its attention into heads");
  }
  // The final read-out as a direction: for `rows` rows of the residual
  // stream after the last block (before the final norm; (rows, D)) and one
  // target id per row, `direction` receives (rows, D) such that c . direction
  // is a write c's direct contribution to the target's logit before Gemma-2's
  // soft-capping: the target's unembedding row through the final norm with
  // the norm's scale frozen at that row (its centring included for
  // LayerNorm). `offset` receives (rows) the logit less residual .
  // direction: the norm's bias read out by the head. InvalidArgument for a
  // target outside [0, V) or rows < 0; Unimplemented for a model without a
  // decomposable read-out (OPT's project_out).
  virtual absl::Status ReadoutDirections(const float* residual, const int64_t* targets,
                                         int64_t rows, float* direction, double* offset) const {
    return absl::UnimplementedError("this model cannot read out a direction");
  }

  virtual std::unique_ptr<KvCache> NewCache() const = 0;
  // A cache whose tokens take `positions`; nullptr when the model cannot
  // (kCache on a model without rotary embedding, or a model that does not
  // implement it).
  virtual std::unique_ptr<KvCache> NewCache(CachePositions positions) const {
    return positions == CachePositions::kOriginal ? NewCache() : nullptr;
  }

  // Bytes the weights take in memory now, in every precision used so far
  // (a bfloat16 pass over a float32 checkpoint adds its bfloat16 copies; a
  // BF16 checkpoint's weights serve both precisions as stored). 0 when the
  // model does not say.
  virtual int64_t weight_bytes() const { return 0; }

  // What Precision::kAuto means for this model: kBfloat16 where the
  // checkpoint stores its matrices in BF16, else kFloat32.
  virtual Precision stored_precision() const { return Precision::kFloat32; }
  // `precision` with kAuto replaced by stored_precision().
  Precision Resolve(Precision precision) const {
    return precision == Precision::kAuto ? stored_precision() : precision;
  }
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
// The number of intra-op threads libtorch uses now.
int ComputeThreads();

}  // namespace attnscope::model
