// The tensors an analysis writes to files (the --export safetensors file,
// the --viewer page), taken piece by piece as the forward pass publishes
// them, or as a server streams them, and written as they come: memory stays
// one block of rows, not L x H x T x T.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/model/forward_observer.h"

namespace attnscope::engine {

// Which layers and heads a file holds: model indices, ascending, distinct.
struct HeadSelection {
  std::vector<int64_t> layers;
  std::vector<int64_t> heads;

  static HeadSelection All(int64_t num_layers, int64_t num_heads);
  int64_t size() const { return static_cast<int64_t>(layers.size() * heads.size()); }
  // The position of a model layer (head) in the selection, or -1.
  int64_t LayerSlot(int64_t layer) const;
  int64_t HeadSlot(int64_t head) const;
  bool Has(int64_t layer, int64_t head) const { return LayerSlot(layer) >= 0 && HeadSlot(head) >= 0; }
};

// "all", or indices and inclusive ranges separated by commas: "0,5,10-13".
// Empty `out` means all. InvalidArgument naming `flag` for anything else (a
// negative number, a reversed range, an empty item).
absl::StatusOr<std::vector<int64_t>> ParseIndexList(const std::string& text, const std::string& flag);

// The selection of `layers` and `heads` (empty: all) on a model of L layers
// and H heads; InvalidArgument naming `layer_flag` / `head_flag` for an index
// outside [0, L) or [0, H).
absl::StatusOr<HeadSelection> SelectHeads(const std::vector<int64_t>& layers,
                                          const std::vector<int64_t>& heads, int64_t num_layers,
                                          int64_t num_heads, const std::string& layer_flag,
                                          const std::string& head_flag);

// "0-3,7" for {0,1,2,3,7}.
std::string FormatIndexList(const std::vector<int64_t>& indices);

// One piece of a tensor: bytes [offset, offset + size) of its row-major data.
struct TensorPiece {
  enum class Kind { kAttention, kHiddenState, kLogits };
  Kind kind = Kind::kAttention;
  int64_t layer = 0;  // attention: the model layer; hidden state: the state 0..L
  int64_t head = 0;   // attention: the model head
  // The whole tensor's shape: attention (T, T) with rows = queries; hidden
  // state (T, width); logits (T, V).
  int64_t rows = 0, cols = 0;
  bool float16 = false;  // attention only: IEEE half elements, else float32
  int64_t offset = 0;    // bytes into the whole tensor
  const char* data = nullptr;
  int64_t size = 0;  // bytes
};

// Takes the pieces of every tensor in order (a tensor's pieces arrive in
// ascending offsets without gaps; tensors may interleave). An error stops
// the writing; the caller reports it.
class TensorPieceSink {
 public:
  virtual ~TensorPieceSink() = default;
  virtual absl::Status Add(const TensorPiece& piece) = 0;
};

// What a forward pass (local, or a server's) should publish to a sink.
struct TensorRequest {
  HeadSelection attention;  // no layers or no heads: no attention
  // Attention as IEEE half: what a server is asked to send (a local pass
  // publishes float32 either way; the export converts).
  bool attention_float16 = false;
  bool hidden_states = false;
  bool logits = false;
};

// A forward observer that hands the requested tensors to `sink` as float32
// pieces: each selected head's rows of each attention block, each hidden
// state, the logits in blocks of rows. The first error of the sink stops the
// publishing and stays in status().
class PiecePublisher : public model::ForwardObserver {
 public:
  PiecePublisher(TensorRequest request, TensorPieceSink* sink);

  model::ObserverNeeds Needs() const override;
  void OnBegin(int sequence, int64_t num_tokens) override;
  void OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                     int64_t width) override;
  void OnAttention(const model::AttentionBlock& block) override;
  void OnLogitsBlock(int sequence, int64_t row_begin, const float* logits, int64_t rows,
                     int64_t num_tokens, int64_t vocab) override;

  const absl::Status& status() const { return status_; }

 private:
  void Send(const TensorPiece& piece);
  TensorRequest request_;
  TensorPieceSink* sink_;
  int64_t tokens_ = 0;
  absl::Status status_;
};

}  // namespace attnscope::engine
