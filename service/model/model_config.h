// The shape and hyper-parameters of a decoder checkpoint, read from its
// Hugging Face config.json. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace attnscope::model {

enum class Architecture { kGpt2 };

// "gpt2", ...
std::string_view ArchitectureName(Architecture architecture);

enum class Activation { kGeluTanh, kGeluErf, kRelu };

struct ModelConfig {
  Architecture architecture = Architecture::kGpt2;
  std::string model_type;         // config.json's model_type, verbatim
  int64_t num_layers = 0;         // L (n_layer)
  int64_t num_heads = 0;          // H query heads (n_head)
  int64_t num_kv_heads = 0;       // key/value heads (= H for GPT-2)
  int64_t hidden_size = 0;        // D (n_embd)
  int64_t head_dim = 0;           // D / H for GPT-2
  int64_t intermediate_size = 0;  // MLP width (n_inner, default 4 D)
  int64_t vocab_size = 0;         // V (rows of the embedding)
  int64_t max_positions = 0;      // n_positions
  double norm_eps = 1e-5;         // layer_norm_epsilon
  Activation activation = Activation::kGeluTanh;
  bool scale_attn_weights = true;               // divide scores by sqrt(head_dim)
  bool scale_attn_by_inverse_layer_idx = false;  // and by (layer + 1)
  bool tie_word_embeddings = true;
  int64_t bos_token_id = -1;  // -1 when the config names none
  int64_t eos_token_id = -1;
  std::string torch_dtype;  // as stored ("float16", ...); compute is float32
};

// Parses config.json text. `source` (the file path) prefixes every message.
// InvalidArgument for invalid JSON, an unsupported model_type (the message
// lists the supported ones), a missing or non-positive size, n_embd not
// divisible by n_head, or an unknown activation_function.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source);

// Reads `dir`/config.json; NotFound if it does not exist.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace attnscope::model
