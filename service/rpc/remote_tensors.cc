#include "service/rpc/remote_tensors.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/core/status_macros.h"

namespace attnscope::rpc {
namespace {

namespace v1 = ::attnscope::v1;

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError("the server's stream is malformed: " + what);
}

std::string Describe(const std::tuple<std::string, int, int>& key) {
  const auto& [name, layer, head] = key;
  if (name == "attention") return absl::StrCat("attention of head ", layer, ".", head);
  if (name == "hidden_state") return absl::StrCat("hidden state ", layer);
  return name;
}

}  // namespace

absl::Status StreamedTensors::Add(const v1::TensorChunk& chunk) {
  const std::string& name = chunk.name();
  if (name != "attention" && name != "hidden_state" && name != "logits") {
    return Malformed(absl::StrCat("a TensorChunk named '", name, "'"));
  }
  const Key key{name, chunk.layer(), chunk.head()};
  if (chunk.dtype() != v1::TENSOR_DTYPE_FLOAT32) {
    return Malformed(Describe(key) + " is not float32, which was asked for");
  }
  Tensor& t = tensors_[key];
  const std::vector<int64_t> shape(chunk.shape().begin(), chunk.shape().end());
  if (t.data.empty() && t.shape.empty()) {
    t.shape = shape;
    t.total_bytes = chunk.total_bytes();
  }
  if (t.shape != shape || t.total_bytes != chunk.total_bytes()) {
    return Malformed(Describe(key) + " changes its shape or size between chunks");
  }
  if (chunk.offset() != static_cast<int64_t>(t.data.size()) ||
      t.data.size() + chunk.data().size() > static_cast<size_t>(t.total_bytes)) {
    return Malformed(absl::StrCat(Describe(key), ": a chunk at byte ", chunk.offset(),
                                  " after ", t.data.size(), " of ", t.total_bytes, " bytes"));
  }
  t.data += chunk.data();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> StreamedTensors::Floats(const Key& key,
                                                           const std::vector<int64_t>& shape) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) return Malformed(Describe(key) + " was not sent");
  const Tensor& t = it->second;
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (t.shape != shape || static_cast<int64_t>(t.data.size()) != elements * 4) {
    return Malformed(absl::StrCat(Describe(key), " has shape (", absl::StrJoin(t.shape, ", "),
                                  ") and ", t.data.size(), " bytes; expected (",
                                  absl::StrJoin(shape, ", "), ")"));
  }
  std::vector<float> values(static_cast<size_t>(elements));
  std::memcpy(values.data(), t.data.data(), t.data.size());
  return values;
}

absl::StatusOr<std::unique_ptr<model::FullRecorder>> StreamedTensors::Replay(
    int64_t num_layers, int64_t num_heads, int64_t num_tokens) const {
  const int64_t t = num_tokens;
  auto recorder = std::make_unique<model::FullRecorder>(
      num_layers, num_heads, model::ObserverNeeds{true, false, true, true});
  recorder->OnBegin(0, t);
  for (int state = 0; state <= num_layers; ++state) {
    auto it = tensors_.find({"hidden_state", state, 0});
    const int64_t width = it != tensors_.end() && it->second.shape.size() == 2
                              ? it->second.shape[1] : 0;
    ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<float> x,
                               Floats({"hidden_state", state, 0}, {t, width}));
    if (width < 1) return Malformed(absl::StrCat("hidden state ", state, " has no width"));
    recorder->OnHiddenState(0, state, x.data(), t, width);
  }
  std::vector<float> layer(static_cast<size_t>(num_heads * t * t));  // (H, T, T)
  for (int l = 0; l < num_layers; ++l) {
    for (int h = 0; h < num_heads; ++h) {
      ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<float> head, Floats({"attention", l, h}, {t, t}));
      std::copy(head.begin(), head.end(), layer.begin() + h * t * t);
    }
    model::AttentionBlock block;
    block.layer = l;
    block.num_heads = num_heads;
    block.num_keys = t;
    block.query_end = t;
    block.probs = layer.data();
    recorder->OnAttention(block);
  }
  auto logits = tensors_.find({"logits", 0, 0});
  const int64_t vocab = logits != tensors_.end() && logits->second.shape.size() == 2
                            ? logits->second.shape[1] : 0;
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<float> z, Floats({"logits", 0, 0}, {t, vocab}));
  recorder->OnLogits(0, z.data(), t, vocab);
  return recorder;
}

}  // namespace attnscope::rpc
