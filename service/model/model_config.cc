#include "service/model/model_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"

namespace attnscope::model {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string_view source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", what));
}

// Reads a positive integer `key`; `fallback` (if > 0) when absent or null.
absl::StatusOr<int64_t> PositiveInt(const json& j, std::string_view source, const char* key,
                                    int64_t fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback > 0) return fallback;
    return Invalid(source, absl::StrCat("missing required key '", key, "'"));
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
    return Invalid(source, absl::StrCat("'", key, "' must be a positive integer, got ", it->dump()));
  }
  return it->get<int64_t>();
}

template <typename T>
T ValueOr(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

absl::StatusOr<Activation> ParseActivation(const json& j, std::string_view source) {
  const std::string name = ValueOr<std::string>(j, "activation_function", "gelu_new");
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return Activation::kGeluTanh;
  }
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "relu") return Activation::kRelu;
  return Invalid(source, absl::StrCat("activation_function '", name,
                                      "' is not supported (gelu_new, gelu, relu)"));
}

absl::StatusOr<ModelConfig> ParseGpt2(const json& j, std::string_view source) {
  ModelConfig c;
  c.architecture = Architecture::kGpt2;
  c.model_type = "gpt2";
  ATTNSCOPE_ASSIGN_OR_RETURN(c.num_layers, PositiveInt(j, source, "n_layer", 12));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.num_heads, PositiveInt(j, source, "n_head", 12));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.hidden_size, PositiveInt(j, source, "n_embd", 768));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.vocab_size, PositiveInt(j, source, "vocab_size", 50257));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.max_positions, PositiveInt(j, source, "n_positions", 1024));
  ATTNSCOPE_ASSIGN_OR_RETURN(c.intermediate_size,
                             PositiveInt(j, source, "n_inner", 4 * c.hidden_size));
  if (c.hidden_size % c.num_heads != 0) {
    return Invalid(source, absl::StrCat("n_head=", c.num_heads, " does not divide n_embd=",
                                        c.hidden_size));
  }
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.norm_eps = ValueOr<double>(j, "layer_norm_epsilon", 1e-5);
  ATTNSCOPE_ASSIGN_OR_RETURN(c.activation, ParseActivation(j, source));
  c.scale_attn_weights = ValueOr<bool>(j, "scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx = ValueOr<bool>(j, "scale_attn_by_inverse_layer_idx", false);
  c.tie_word_embeddings = ValueOr<bool>(j, "tie_word_embeddings", true);
  c.bos_token_id = ValueOr<int64_t>(j, "bos_token_id", 50256);
  c.eos_token_id = ValueOr<int64_t>(j, "eos_token_id", 50256);
  c.torch_dtype = ValueOr<std::string>(j, "torch_dtype", "float32");
  return c;
}

}  // namespace

std::string_view ArchitectureName(Architecture architecture) {
  switch (architecture) {
    case Architecture::kGpt2:
      return "gpt2";
  }
  return "unknown";
}

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid(source, "not valid JSON");
  if (!j.is_object()) return Invalid(source, "expected a JSON object");
  try {
    const std::string type = ValueOr<std::string>(j, "model_type", "");
    if (type == "gpt2") return ParseGpt2(j, source);
    return Invalid(source, absl::StrCat("model_type '", type, "' is not supported (supported: gpt2)"));
  } catch (const json::exception& e) {
    return Invalid(source, absl::StrCat("a key has the wrong JSON type: ", e.what()));
  }
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (is '", dir,
                                            "' a Hugging Face model directory?)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseModelConfig(text.str(), path);
}

}  // namespace attnscope::model
