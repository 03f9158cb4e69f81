// Internal to the model library: one parser per Hugging Face model_type. Each
// reads its config.json keys into a ModelConfig (shape + DecoderSpec) and
// names its tensors. Families close to Llama are written as Llama plus their
// differences.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "service/model/config_reader.h"
#include "service/model/model_config.h"

namespace attnscope::model::families {

absl::StatusOr<ModelConfig> ParseGpt2(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseLlama(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseMistral(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseQwen2(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseQwen3(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseGemma(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseGemma2(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParsePhi3(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseGptNeox(const ConfigReader& c);
absl::StatusOr<ModelConfig> ParseOpt(const ConfigReader& c);

// Shared pieces.

// The most layers a config may declare. Parsing sizes per-layer vectors
// from it, so a hostile config.json ("num_hidden_layers": 1e12) must be
// refused before anything is allocated; released decoders have at most a few
// hundred layers.
inline constexpr int64_t kMaxLayers = 4096;

// `key` (the number of layers; `fallback` when absent) as PositiveInt reads
// it, and at most kMaxLayers: InvalidArgument naming the key and the limit.
absl::StatusOr<int64_t> LayerCount(const ConfigReader& c, const char* key, int64_t fallback);

// Llama's config keys and tensor names with `default_theta` etc.; the base
// of Mistral, Qwen2/3, Gemma and Phi-3.
struct LlamaDefaults {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_layers = 32;
  int64_t num_heads = 32;
  int64_t max_positions = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  const char* activation_key = "hidden_act";
  const char* activation = "silu";
};
absl::StatusOr<ModelConfig> ParseLlamaLike(const ConfigReader& c, const LlamaDefaults& defaults);

// The activation named by config value `name` (key `key`).
absl::StatusOr<Activation> ParseActivation(const ConfigReader& c, const char* key,
                                           const std::string& fallback);

// Rotary settings: rope_theta + rope_scaling{type|rope_type} or v5
// rope_parameters, for heads of `head_dim` with `rotary_dim` rotating dims.
// `max_positions` is max_position_embeddings. Names the offending key.
absl::StatusOr<RopeSpec> ParseRope(const ConfigReader& c, double default_theta, int64_t head_dim,
                                   double partial_rotary_factor, int64_t max_positions);

// The partial rotary factor: `keys` in order, then
// rope_parameters.partial_rotary_factor, else `fallback`.
absl::StatusOr<double> PartialRotaryFactor(const ConfigReader& c,
                                           const std::vector<const char*>& keys, double fallback);

// Per-layer sliding windows: from `layer_types` when config.json has it
// ("sliding_attention" layers get `window`), else `window` where
// `sliding(layer)` holds. window <= 0: every layer plain causal.
absl::StatusOr<std::vector<int64_t>> LayerWindows(const ConfigReader& c, int64_t layers,
                                                  int64_t window,
                                                  const std::function<bool(int64_t)>& sliding);

// A window size: `if_absent` when the key is missing, 0 (none) when it is
// null, else a positive integer.
absl::StatusOr<int64_t> WindowSize(const ConfigReader& c, const char* key, int64_t if_absent);

// Multi-head attention (as many key/value heads as heads), as GPT-2,
// GPT-NeoX and OPT have it: head_dim = hidden_size / num_heads, in `config`
// and its attention spec. InvalidArgument "<heads_key>=H does not divide
// <hidden_key>=D" when it does not divide.
absl::Status SetMultiHeadDims(const ConfigReader& c, const char* heads_key, const char* hidden_key,
                              ModelConfig& config);

// The shape of a multi-head model whose config.json uses the Hugging Face
// key names (GPT-NeoX, OPT): the defaults, and the key of the MLP's width.
struct MultiHeadDefaults {
  const char* intermediate_key = "intermediate_size";
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
};

// Reads hidden_size, num_hidden_layers, num_attention_heads, the MLP's
// width, vocab_size and max_position_embeddings in that order (the first bad
// one is the error), then SetMultiHeadDims.
absl::Status ReadMultiHeadShape(const ConfigReader& c, const MultiHeadDefaults& d, ModelConfig& config);

// Qwen2's and Qwen3's defaults: Llama's with Qwen's vocabulary, MLP width
// and context.
LlamaDefaults QwenDefaults();

// The Qwen window rule: with use_sliding_window, `sliding_window` in the
// layers from max_window_layers on (or as layer_types says).
absl::StatusOr<std::vector<int64_t>> QwenWindows(const ConfigReader& c, int64_t layers);

// bos/eos ids, torch_dtype (default "float32").
void ReadTokenIdsAndDtype(const ConfigReader& c, int64_t bos, int64_t eos, ModelConfig& config);

// Checks head counts: num_kv_heads divides num_heads.
absl::Status CheckHeads(const ConfigReader& c, const ModelConfig& config);

}  // namespace attnscope::model::families
