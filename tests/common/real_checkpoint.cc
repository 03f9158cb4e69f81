#include "tests/common/real_checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "nlohmann/json.hpp"

namespace attnscope::testing {
namespace {

using json = nlohmann::json;

// config.json as released on the Hugging Face Hub (the keys and values a
// user's download has; "transformers_version" as saved).
const std::map<std::string, const char*>& Configs() {
  static const std::map<std::string, const char*> configs = {
      {"Qwen2.5-0.5B", R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
  "use_cache": true, "use_mrope": false, "use_sliding_window": false, "vocab_size": 151936})"},
      {"Qwen2.5-7B", R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
  "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2",
  "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.43.1",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 152064})"},
      {"Qwen3-0.6B", R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})"},
      {"Llama-3.2-1B", R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})"},
      {"Llama-3.1-8B", R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})"},
      {"Mistral-7B-v0.3", R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0",
  "use_cache": true, "vocab_size": 32768})"},
      {"Qwen3-8B", R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
  "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
  "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})"},
      {"Gemma-2-2B", R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
  "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
  "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
  "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
  "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
  "sliding_window": 4096, "torch_dtype": "float32", "transformers_version": "4.42.4",
  "use_cache": true, "vocab_size": 256000})"},
      {"Phi-3-mini-4k", R"({
  "architectures": ["Phi3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
               "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
  "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
  "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
  "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true,
  "vocab_size": 32064})"},
      {"Pythia-1B", R"({
  "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
  "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
  "model_type": "gpt_neox", "num_attention_heads": 8, "num_hidden_layers": 16,
  "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false,
  "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": true,
  "use_parallel_residual": true, "vocab_size": 50304})"},
      {"OPT-1.3B", R"({
  "_name_or_path": "facebook/opt-1.3b", "activation_dropout": 0.0,
  "activation_function": "relu", "architectures": ["OPTForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 2, "do_layer_norm_before": true, "dropout": 0.1, "eos_token_id": 2,
  "ffn_dim": 8192, "hidden_size": 2048, "init_std": 0.02, "layerdrop": 0.0,
  "max_position_embeddings": 2048, "model_type": "opt", "num_attention_heads": 32,
  "num_hidden_layers": 24, "pad_token_id": 1, "prefix": "</s>", "torch_dtype": "float16",
  "transformers_version": "4.21.0.dev0", "use_cache": true, "vocab_size": 50272,
  "word_embed_proj_dim": 2048})"},
  };
  return configs;
}

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  enum Fill { kMatrix, kOnes, kBias } fill;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// The tensors Hugging Face saves for a Llama-like family (llama, mistral,
// qwen2 with its q/k/v biases, qwen3 with its q/k norms, gemma2 with its
// four norms per layer, phi3 with fused qkv and gate_up projections).
std::vector<Spec> LlamaLikeTensors(const json& c, const std::string& type, int64_t layers) {
  const int64_t h = c["hidden_size"], inner = c["intermediate_size"], v = c["vocab_size"];
  const int64_t heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  const int64_t d = c.contains("head_dim") && c["head_dim"].is_number() ? c["head_dim"].get<int64_t>()
                                                                          : h / heads;
  const bool qkv_bias = type == "qwen2" || c.value("attention_bias", false);
  // Gemma ties its head unless told otherwise; the others say so.
  const bool tied = c.value("tie_word_embeddings", type == "gemma2");
  std::vector<Spec> t = {{"model.embed_tokens.weight", {v, h}, Spec::kMatrix}};
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {h}, Spec::kOnes});
    if (type == "phi3") {
      t.push_back({p + "self_attn.qkv_proj.weight", {(heads + 2 * kv) * d, h}, Spec::kMatrix});
    } else {
      t.push_back({p + "self_attn.q_proj.weight", {heads * d, h}, Spec::kMatrix});
      t.push_back({p + "self_attn.k_proj.weight", {kv * d, h}, Spec::kMatrix});
      t.push_back({p + "self_attn.v_proj.weight", {kv * d, h}, Spec::kMatrix});
    }
    if (qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {heads * d}, Spec::kBias});
      t.push_back({p + "self_attn.k_proj.bias", {kv * d}, Spec::kBias});
      t.push_back({p + "self_attn.v_proj.bias", {kv * d}, Spec::kBias});
    }
    if (type == "qwen3") {
      t.push_back({p + "self_attn.q_norm.weight", {d}, Spec::kOnes});
      t.push_back({p + "self_attn.k_norm.weight", {d}, Spec::kOnes});
    }
    t.push_back({p + "self_attn.o_proj.weight", {h, heads * d}, Spec::kMatrix});
    t.push_back({p + "post_attention_layernorm.weight", {h}, Spec::kOnes});
    if (type == "gemma2") {
      t.push_back({p + "pre_feedforward_layernorm.weight", {h}, Spec::kOnes});
      t.push_back({p + "post_feedforward_layernorm.weight", {h}, Spec::kOnes});
    }
    if (type == "phi3") {
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * inner, h}, Spec::kMatrix});
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {inner, h}, Spec::kMatrix});
      t.push_back({p + "mlp.up_proj.weight", {inner, h}, Spec::kMatrix});
    }
    t.push_back({p + "mlp.down_proj.weight", {h, inner}, Spec::kMatrix});
  }
  t.push_back({"model.norm.weight", {h}, Spec::kOnes});
  if (!tied) t.push_back({"lm_head.weight", {v, h}, Spec::kMatrix});
  return t;
}

// GPT-NeoX (Pythia): fused per-head query_key_value, biases everywhere,
// LayerNorm with bias, an untied embed_out.
std::vector<Spec> GptNeoxTensors(const json& c, int64_t layers) {
  const int64_t h = c["hidden_size"], inner = c["intermediate_size"], v = c["vocab_size"];
  std::vector<Spec> t = {{"gpt_neox.embed_in.weight", {v, h}, Spec::kMatrix}};
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
      t.push_back({p + norm + ".weight", {h}, Spec::kOnes});
      t.push_back({p + norm + ".bias", {h}, Spec::kBias});
    }
    t.push_back({p + "attention.query_key_value.weight", {3 * h, h}, Spec::kMatrix});
    t.push_back({p + "attention.query_key_value.bias", {3 * h}, Spec::kBias});
    t.push_back({p + "attention.dense.weight", {h, h}, Spec::kMatrix});
    t.push_back({p + "attention.dense.bias", {h}, Spec::kBias});
    t.push_back({p + "mlp.dense_h_to_4h.weight", {inner, h}, Spec::kMatrix});
    t.push_back({p + "mlp.dense_h_to_4h.bias", {inner}, Spec::kBias});
    t.push_back({p + "mlp.dense_4h_to_h.weight", {h, inner}, Spec::kMatrix});
    t.push_back({p + "mlp.dense_4h_to_h.bias", {h}, Spec::kBias});
  }
  t.push_back({"gpt_neox.final_layer_norm.weight", {h}, Spec::kOnes});
  t.push_back({"gpt_neox.final_layer_norm.bias", {h}, Spec::kBias});
  if (!c.value("tie_word_embeddings", false)) t.push_back({"embed_out.weight", {v, h}, Spec::kMatrix});
  return t;
}

// OPT: learned positions with an offset of 2, biases everywhere, the head
// tied to the token embedding (save_pretrained writes no lm_head).
std::vector<Spec> OptTensors(const json& c, int64_t layers) {
  const int64_t h = c["hidden_size"], ffn = c["ffn_dim"], v = c["vocab_size"];
  const int64_t positions = c["max_position_embeddings"].get<int64_t>() + 2;
  std::vector<Spec> t = {{"model.decoder.embed_tokens.weight", {v, h}, Spec::kMatrix},
                         {"model.decoder.embed_positions.weight", {positions, h}, Spec::kMatrix}};
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      t.push_back({p + "self_attn." + proj + ".weight", {h, h}, Spec::kMatrix});
      t.push_back({p + "self_attn." + proj + ".bias", {h}, Spec::kBias});
    }
    for (const char* norm : {"self_attn_layer_norm", "final_layer_norm"}) {
      t.push_back({p + norm + ".weight", {h}, Spec::kOnes});
      t.push_back({p + norm + ".bias", {h}, Spec::kBias});
    }
    t.push_back({p + "fc1.weight", {ffn, h}, Spec::kMatrix});
    t.push_back({p + "fc1.bias", {ffn}, Spec::kBias});
    t.push_back({p + "fc2.weight", {h, ffn}, Spec::kMatrix});
    t.push_back({p + "fc2.bias", {h}, Spec::kBias});
  }
  t.push_back({"model.decoder.final_layer_norm.weight", {h}, Spec::kOnes});
  t.push_back({"model.decoder.final_layer_norm.bias", {h}, Spec::kBias});
  return t;
}

// The tensors of `c`'s family with `layers` layers; empty (with `error`)
// for a family this file has no list for.
std::vector<Spec> ModelTensors(const json& c, int64_t layers, std::string* error) {
  const std::string type = c.value("model_type", "");
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
      type == "gemma2" || type == "phi3") {
    return LlamaLikeTensors(c, type, layers);
  }
  if (type == "gpt_neox") return GptNeoxTensors(c, layers);
  if (type == "opt") return OptTensors(c, layers);
  *error = "no tensor list for model_type " + type;
  return {};
}

uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

// Streams the tensors into one safetensors file.
bool WriteFile(const std::string& path, const std::vector<const Spec*>& tensors, uint64_t& state,
               bool sparse) {
  json header = {{"__metadata__", {{"format", "pt"}}}};
  int64_t offset = 0;
  for (const Spec* s : tensors) {
    const int64_t bytes = 2 * s->numel();
    header[s->name] = {{"dtype", "BF16"}, {"shape", s->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  const uint64_t length = text.size();
  std::fwrite(&length, 8, 1, f.get());  // little-endian on x86-64
  std::fwrite(text.data(), 1, text.size(), f.get());
  if (sparse) {
    return std::fflush(f.get()) == 0 &&
           ftruncate(fileno(f.get()), static_cast<off_t>(8 + text.size() + offset)) == 0;
  }
  // Uniform on [-a, a] with a = 0.02 sqrt(3): std 0.02.
  const float a = 0.02f * std::sqrt(3.0f);
  std::vector<uint16_t> buffer(1 << 20);
  for (const Spec* s : tensors) {
    for (int64_t done = 0; done < s->numel();) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(buffer.size()), s->numel() - done);
      for (int64_t i = 0; i < n; ++i) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        const float u = static_cast<float>(state >> 40) / static_cast<float>(1 << 24);  // [0, 1)
        const float value = s->fill == Spec::kOnes    ? 1.0f
                            : s->fill == Spec::kBias ? 0.1f * a * (2 * u - 1)
                                                     : a * (2 * u - 1);
        buffer[i] = Bf16Bits(value);
      }
      if (std::fwrite(buffer.data(), 2, static_cast<size_t>(n), f.get()) != static_cast<size_t>(n)) {
        std::fprintf(stderr, "writing %s failed (disk full?)\n", path.c_str());
        return false;
      }
      done += n;
    }
  }
  return std::fflush(f.get()) == 0;
}

}  // namespace

std::vector<std::string> RealModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, config] : Configs()) names.push_back(name);
  return names;
}

std::string RealConfigJson(const std::string& model) {
  auto it = Configs().find(model);
  return it == Configs().end() ? "" : it->second;
}

int64_t WriteRealCheckpoint(const std::string& model, const std::string& dir,
                            const RealCheckpointOptions& options) {
  const std::string text = RealConfigJson(model);
  if (text.empty()) {
    std::fprintf(stderr, "no config for %s\n", model.c_str());
    return -1;
  }
  json config = json::parse(text);
  if (options.layers > 0) config["num_hidden_layers"] = options.layers;
  std::string error;
  const std::vector<Spec> tensors =
      ModelTensors(config, config["num_hidden_layers"].get<int64_t>(), &error);
  if (tensors.empty()) {
    std::fprintf(stderr, "%s: %s\n", model.c_str(), error.c_str());
    return -1;
  }
  std::ofstream(dir + "/config.json") << config.dump(2) << "\n";
  // Shards of about shard_bytes each, in order, as save_pretrained splits.
  std::vector<std::vector<const Spec*>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const Spec& s : tensors) {
    const int64_t bytes = 2 * s.numel();
    if (options.shard_bytes > 0 && in_shard > 0 && in_shard + bytes > options.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&s);
    in_shard += bytes;
    total += bytes;
  }
  uint64_t state = 0x9E3779B97F4A7C15ull ^ options.seed;
  if (shards.size() == 1) {
    return WriteFile(dir + "/model.safetensors", shards[0], state, options.sparse) ? total : -1;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    if (!WriteFile(dir + "/" + name, shards[i], state, options.sparse)) return -1;
    for (const Spec* s : shards[i]) index["weight_map"][s->name] = name;
  }
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump(2) << "\n";
  return total;
}

}  // namespace attnscope::testing
