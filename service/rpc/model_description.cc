#include "service/rpc/model_description.h"

#include "service/model/model_config.h"

namespace attnscope::rpc {

ModelDescription DescribeModel(const std::string& name, const engine::ModelBundle& bundle) {
  const model::ModelConfig& c = bundle.config();
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
  d.has_tokenizer = bundle.tokenizer != nullptr;
  return d;
}

}  // namespace attnscope::rpc
