// How a decoder-only transformer computes, as a torch-free description: the
// building blocks the shared runtime (decoder_model.cc) assembles, and the
// tensor names a checkpoint stores them under. A family file
// (families/<model_type>.cc) fills one in from config.json; nothing else in
// the runtime knows which family it runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope::model {

enum class NormKind {
  kLayerNorm,       // (x - mean) / sqrt(var + eps) * w + b
  kRmsNorm,         // x / sqrt(mean(x^2) + eps) * w
  kRmsNormPlusOne,  // Gemma: x / sqrt(mean(x^2) + eps) * (1 + w)
};

enum class Activation { kGeluTanh, kGeluErf, kRelu, kSilu };

// Rotary embedding frequency schedules (rope_scaling / rope_parameters type).
enum class RopeKind { kNone, kDefault, kLinear, kDynamic, kLlama3, kYarn, kLongRope };

struct RopeSpec {
  RopeKind kind = RopeKind::kNone;  // kNone: no rotary embedding
  double theta = 10000.0;           // rope_theta (base)
  int64_t rotary_dim = 0;           // leading dims of each head that rotate (even)
  double factor = 1.0;              // linear, dynamic, llama3, yarn, longrope
  // llama3 / yarn / longrope: the context the model was pre-trained with.
  int64_t original_max_positions = 0;
  int64_t max_positions = 0;        // dynamic: max_position_embeddings
  double low_freq_factor = 1.0;     // llama3
  double high_freq_factor = 4.0;    // llama3
  double beta_fast = 32.0;          // yarn
  double beta_slow = 1.0;           // yarn
  bool truncate = true;             // yarn: floor/ceil the correction range
  std::vector<double> short_factor, long_factor;  // longrope, rotary_dim / 2 each
  double attention_scaling = 1.0;   // multiplies cos and sin (yarn, longrope)
};

struct AttentionSpec {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // query head h reads key/value head h / (heads / kv_heads)
  int64_t head_dim = 0;
  bool qkv_bias = false;     // q, k and v projections have biases
  bool o_bias = false;       // the output projection has a bias
  bool qk_norm = false;      // RMSNorm over head_dim on q and k before rotary (Qwen3)
  // Scores are (q . k) * score_scale, then soft-capped, then masked.
  double score_scale = 1.0;
  bool scale_query_first = false;       // OPT: q * score_scale before the product
  bool divide_by_layer_number = false;  // GPT-2 scale_attn_by_inverse_layer_idx
  double softcap = 0.0;                 // > 0: tanh(s / c) * c (Gemma-2)
  // Per layer: 0 = plain causal; W > 0: query i sees keys i-W+1 .. i.
  std::vector<int64_t> window;
};

struct MlpSpec {
  bool gated = false;  // down(act(gate(x)) * up(x)); else down(act(up(x)))
  Activation activation = Activation::kGeluTanh;
  int64_t intermediate_size = 0;
  bool bias = false;   // up/gate and down have biases
};

enum class ResidualLayout {
  kPreNorm,   // h += attn(norm1(h)); h += mlp(norm2(h))
  kParallel,  // h += attn(norm1(h)) + mlp(norm2(h))   (GPT-NeoX)
  kPostNorm,  // h = norm1(h + attn(h)); h = norm2(h + mlp(h))   (OPT-350m)
};

// How attention projections are stored.
enum class QkvLayout {
  kSeparate,      // q, k, v tensors
  kFused,         // one tensor, rows q | k | v (Phi-3, GPT-2's c_attn)
  kFusedPerHead,  // one tensor, rows [heads, 3, head_dim] (GPT-NeoX)
};

// Names of a checkpoint's tensors, without ".weight"/".bias". Per-layer
// names are relative to `layer_prefix` + i + "."; an empty name means the
// model has no such tensor.
struct TensorNames {
  std::vector<std::string> prefixes;  // tried in order before model names ("model.", "")
  bool conv1d = false;                // GPT-2: matrices stored (in, out)
  std::string embed, positions, project_in, project_out, final_norm;
  std::string head;  // never prefixed; used when the embedding is not tied
  std::string layer_prefix;
  std::string attn_norm, mlp_norm;            // the two norms every layer has
  std::string post_attn_norm, post_mlp_norm;  // Gemma-2's extra two
  QkvLayout qkv_layout = QkvLayout::kSeparate;
  std::string q, k, v, qkv, o;
  std::string q_norm, k_norm;
  std::string gate, up, gate_up, down;  // gate_up: fused, gate rows first
  // Tensors the checkpoint may hold that are not parameters (mask and
  // inv_freq buffers), as suffixes of full names.
  std::vector<std::string> ignored_suffixes;
};

struct DecoderSpec {
  int64_t hidden_size = 0;  // H
  int64_t embed_dim = 0;    // E: width of the token embedding (OPT's word_embed_proj_dim)
  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-5;
  bool norm_affine = true;  // norms have weights (OPT's layer_norm_elementwise_affine)
  double embedding_scale = 1.0;   // Gemma: sqrt(H)
  bool learned_positions = false;
  int64_t position_offset = 0;    // OPT: row = position + 2
  RopeSpec rope;
  AttentionSpec attention;
  MlpSpec mlp;
  ResidualLayout residual = ResidualLayout::kPreNorm;
  bool post_sublayer_norms = false;  // Gemma-2: norm each sublayer's output too
  bool final_norm = true;
  bool tied_head = true;             // logits from the embedding matrix
  double final_softcap = 0.0;        // > 0: logits = tanh(l / c) * c
  TensorNames names;
};

}  // namespace attnscope::model
