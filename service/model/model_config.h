// The shape and hyper-parameters of a decoder checkpoint, read from its
// Hugging Face config.json by the file of its family (families/*.cc).
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/model/decoder_spec.h"

namespace attnscope::model {

struct ModelConfig {
  std::string model_type;         // config.json's model_type: the family ("llama", ...)
  int64_t num_layers = 0;         // L
  int64_t num_heads = 0;          // H query heads
  int64_t num_kv_heads = 0;       // key/value heads (H without grouped-query attention)
  int64_t hidden_size = 0;        // D
  int64_t head_dim = 0;           // width of one head (may differ from D / H)
  int64_t intermediate_size = 0;  // MLP width
  int64_t vocab_size = 0;         // V (rows of the embedding)
  int64_t max_positions = 0;      // longest sequence the model accepts
  int64_t bos_token_id = -1;      // -1 when the config names none
  int64_t eos_token_id = -1;      // the first one if config.json lists several
  std::string torch_dtype;        // as stored ("bfloat16", ...); compute is float32
  DecoderSpec decoder;            // how the forward pass computes
};

// config.json's spelling of a rotary kind: "none", "default", "linear",
// "dynamic", "llama3", "yarn", "longrope".
std::string_view RopeKindName(RopeKind kind);

// The model_type values ParseModelConfig accepts, sorted.
std::vector<std::string> SupportedModelTypes();

// Parses config.json text. `source` (the file path) prefixes every message.
// InvalidArgument for invalid JSON, an unsupported model_type (the message
// lists the supported ones), a missing or non-positive size, inconsistent
// sizes, or a key whose value the runtime does not implement (the message
// names the key and the supported values).
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source);

// Reads `dir`/config.json; NotFound if it does not exist.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace attnscope::model
