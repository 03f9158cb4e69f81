// The tensors of an Analyze stream (TensorChunks "attention", "hidden_state"
// and "logits", float32) put back together on the client and replayed into a
// model::FullRecorder in the order a local forward pass publishes them, so
// that `analyze --server ... --export/--viewer` writes what a local run
// writes. Internal to attnscope_rpc_client.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/model/recorder.h"

namespace attnscope::rpc {

class StreamedTensors {
 public:
  // Adds one chunk. InvalidArgument (a malformed stream) for an unknown name,
  // a dtype other than float32, a shape or total that changes between
  // chunks of a tensor, or chunks out of order.
  absl::Status Add(const attnscope::v1::TensorChunk& chunk);

  // The recorder a local RunAnalysis with record_tensors fills: attentions of
  // every layer and head (T, T), hidden states 0..L and the logits.
  // InvalidArgument naming the first tensor that is missing, incomplete or
  // of the wrong shape.
  absl::StatusOr<std::unique_ptr<model::FullRecorder>> Replay(int64_t num_layers,
                                                              int64_t num_heads,
                                                              int64_t num_tokens) const;

 private:
  struct Tensor {
    std::vector<int64_t> shape;
    int64_t total_bytes = 0;
    std::string data;
  };
  using Key = std::tuple<std::string, int, int>;  // name, layer, head
  // The float32 values of a complete tensor with `shape`, or why not.
  absl::StatusOr<std::vector<float>> Floats(const Key& key,
                                            const std::vector<int64_t>& shape) const;
  std::map<Key, Tensor> tensors_;
};

}  // namespace attnscope::rpc
