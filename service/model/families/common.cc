// Helpers shared by the family parsers.
#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {

absl::StatusOr<Activation> ParseActivation(const ConfigReader& c, const char* key,
                                           const std::string& fallback) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string name, c.String(key, fallback));
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast" ||
      name == "gelu_python_tanh") {
    return Activation::kGeluTanh;
  }
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "relu") return Activation::kRelu;
  if (name == "silu" || name == "swish") return Activation::kSilu;
  return c.Unsupported(key, name, "gelu_new, gelu_pytorch_tanh, gelu_fast, gelu, relu, silu");
}

void ReadTokenIdsAndDtype(const ConfigReader& c, int64_t bos, int64_t eos, ModelConfig& config) {
  config.bos_token_id = c.TokenId("bos_token_id", bos);
  config.eos_token_id = c.TokenId("eos_token_id", eos);
  const auto dtype = c.String("torch_dtype", "");
  config.torch_dtype = dtype.ok() && !dtype->empty() ? *dtype : "float32";
  if (dtype.ok() && dtype->empty()) {
    const auto v5 = c.String("dtype", "float32");  // transformers v5 renamed the key
    config.torch_dtype = v5.ok() ? *v5 : "float32";
  }
}

absl::StatusOr<int64_t> LayerCount(const ConfigReader& c, const char* key, int64_t fallback) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t layers, c.PositiveInt(key, fallback));
  if (layers > kMaxLayers) {
    return c.Invalid(absl::StrCat("'", key, "' = ", layers, " is more than the ", kMaxLayers,
                                  " layers attnscope accepts"));
  }
  return layers;
}

absl::Status SetMultiHeadDims(const ConfigReader& c, const char* heads_key, const char* hidden_key,
                              ModelConfig& config) {
  if (config.hidden_size % config.num_heads != 0) {
    return c.Invalid(absl::StrCat(heads_key, "=", config.num_heads, " does not divide ", hidden_key,
                                  "=", config.hidden_size));
  }
  config.num_kv_heads = config.num_heads;
  config.head_dim = config.hidden_size / config.num_heads;
  AttentionSpec& a = config.decoder.attention;
  a.num_heads = a.num_kv_heads = config.num_heads;
  a.head_dim = config.head_dim;
  return absl::OkStatus();
}

absl::Status ReadMultiHeadShape(const ConfigReader& c, const MultiHeadDefaults& d, ModelConfig& m) {
  ATTNSCOPE_ASSIGN_OR_RETURN(m.hidden_size, c.PositiveInt("hidden_size", d.hidden_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_layers, LayerCount(c, "num_hidden_layers", d.num_layers));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.num_heads, c.PositiveInt("num_attention_heads", d.num_heads));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.intermediate_size,
                             c.PositiveInt(d.intermediate_key, d.intermediate_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.vocab_size, c.PositiveInt("vocab_size", d.vocab_size));
  ATTNSCOPE_ASSIGN_OR_RETURN(m.max_positions,
                             c.PositiveInt("max_position_embeddings", d.max_positions));
  return SetMultiHeadDims(c, "num_attention_heads", "hidden_size", m);
}

absl::Status CheckHeads(const ConfigReader& c, const ModelConfig& config) {
  if (config.num_heads % config.num_kv_heads != 0) {
    return c.Invalid(absl::StrCat("num_key_value_heads=", config.num_kv_heads,
                                  " does not divide num_attention_heads=", config.num_heads));
  }
  return absl::OkStatus();
}

}  // namespace attnscope::model::families

namespace attnscope::model::families {

absl::StatusOr<std::vector<int64_t>> LayerWindows(const ConfigReader& c, int64_t layers,
                                                  int64_t window,
                                                  const std::function<bool(int64_t)>& sliding) {
  std::vector<int64_t> out(layers, 0);
  if (window <= 0) return out;
  if (!c.Has("layer_types")) {
    for (int64_t i = 0; i < layers; ++i) out[i] = sliding(i) ? window : 0;
    return out;
  }
  const nlohmann::json& types = c.json().at("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
    return c.Invalid(absl::StrCat("'layer_types' must list one type per layer (", layers, ")"));
  }
  for (int64_t i = 0; i < layers; ++i) {
    const std::string type = types[i].is_string() ? types[i].get<std::string>() : "";
    if (type != "sliding_attention" && type != "full_attention") {
      return c.Unsupported(absl::StrCat("layer_types[", i, "]"), types[i],
                           "sliding_attention, full_attention");
    }
    out[i] = type == "sliding_attention" ? window : 0;
  }
  return out;
}

}  // namespace attnscope::model::families

namespace attnscope::model::families {

absl::StatusOr<int64_t> WindowSize(const ConfigReader& c, const char* key, int64_t if_absent) {
  if (!c.json().contains(key)) return if_absent;
  if (c.json().at(key).is_null()) return 0;
  return c.PositiveInt(key);
}

}  // namespace attnscope::model::families
