// The --export file: a safetensors file laid out like the fixtures'
// reference.safetensors, written piece by piece as the tensors arrive (from
// a local forward pass or a server's stream), so that memory stays one block
// whatever the file's size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::engine {

// Tensors, in this order in the data section: attentions F32 or F16
// (L', H', T, T) of the selected layers and heads (every one by default),
// hidden_states F32 (L+1, T, D), hidden_states_final F32 (T, E) only when
// the last hidden state is narrower than D (OPT's project_out; it is then
// zero-padded in hidden_states), input_ids I64 (T), logits F32 (T, V).
// __metadata__: format "pt", producer "attnscope", attention_layers and
// attention_heads as index lists ("0-23"). The header is written last, into
// space reserved at the start (padded with spaces, as the format allows).
class ExportWriter : public TensorPieceSink {
 public:
  // Creates (truncates) `path`. Internal naming the path if it cannot.
  static absl::StatusOr<std::unique_ptr<ExportWriter>> Create(const std::string& path,
                                                              HeadSelection attention,
                                                              int64_t num_layers, bool float16);
  ~ExportWriter() override;  // removes the file unless Finish succeeded

  // InvalidArgument for a piece out of order, of another shape than the
  // tensor's earlier pieces or of an unselected head; Internal if the file
  // cannot be written.
  absl::Status Add(const TensorPiece& piece) override;

  // Writes the ids and the header. FailedPrecondition naming the first
  // tensor that is incomplete; InvalidArgument if ids.size() != T.
  absl::Status Finish(const std::vector<int64_t>& ids);

  ExportWriter(const ExportWriter&) = delete;
  ExportWriter& operator=(const ExportWriter&) = delete;

 private:
  ExportWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::engine
