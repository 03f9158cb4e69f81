// What a client needs to know about a model, free of gRPC types and of
// libtorch, so that the CLI (its front binary too) prints local and remote
// models alike.
#pragma once

#include <cstdint>
#include <string>

#include "service/model/model_config.h"

namespace attnscope::rpc {

struct ModelDescription {
  std::string name;          // as given to --model NAME=DIR
  std::string architecture;  // the family: config.json's model_type ("llama", ...)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
  std::string dtype;  // as stored in the checkpoint ("float16", ...)
  bool has_tokenizer = false;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  std::string rope_kind;   // "none", "default", "llama3", ...
  double rope_theta = 0;   // 0 without rotary embedding
  int64_t rotary_dim = 0;  // 0 without rotary embedding
  int64_t sliding_window = 0;  // largest window of any layer; 0: none
  int64_t sliding_layers = 0;  // layers with a window
  std::string norm;            // "layer_norm", "rms_norm", "rms_norm_plus_one"
  bool tied_head = false;
};

// The description of a model under `name` from its config alone (the
// server describes what it loaded; `attnscope models --model DIR` reads
// only config.json, the checkpoint's headers and the tokenizer).
ModelDescription DescribeModel(const std::string& name, const model::ModelConfig& config,
                               bool has_tokenizer);

}  // namespace attnscope::rpc
