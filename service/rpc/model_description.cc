#include "service/rpc/model_description.h"

#include <algorithm>

#include "service/model/model_config.h"

namespace attnscope::rpc {

ModelDescription DescribeModel(const std::string& name, const model::ModelConfig& c,
                               bool has_tokenizer) {
  ModelDescription d;
  d.name = name;
  d.architecture = c.model_type;
  d.num_layers = c.num_layers;
  d.num_heads = c.num_heads;
  d.num_kv_heads = c.num_kv_heads;
  d.hidden_size = c.hidden_size;
  d.vocab_size = c.vocab_size;
  d.max_positions = c.max_positions;
  d.dtype = c.torch_dtype.empty() ? "float32" : c.torch_dtype;
  d.has_tokenizer = has_tokenizer;
  const model::DecoderSpec& spec = c.decoder;
  d.head_dim = c.head_dim;
  d.intermediate_size = c.intermediate_size;
  d.rope_kind = std::string(model::RopeKindName(spec.rope.kind));
  if (spec.rope.kind != model::RopeKind::kNone) {
    d.rope_theta = spec.rope.theta;
    d.rotary_dim = spec.rope.rotary_dim;
  }
  for (int64_t window : spec.attention.window) {
    d.sliding_window = std::max(d.sliding_window, window);
    d.sliding_layers += window > 0;
  }
  d.norm = spec.norm == model::NormKind::kLayerNorm ? "layer_norm"
           : spec.norm == model::NormKind::kRmsNorm ? "rms_norm"
                                                     : "rms_norm_plus_one";
  d.tied_head = spec.tied_head;
  return d;
}

}  // namespace attnscope::rpc
