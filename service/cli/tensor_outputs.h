// The files `analyze` writes beside its report: --export (a safetensors file
// of the selected attentions, every hidden state, the ids and the logits) and
// --viewer (the HTML page of the selected heads). Both take the tensors piece
// by piece, from the local forward pass or from a server's stream, and keep
// no L x H x T x T tensor in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/cli/flags.h"
#include "service/engine/analysis_run.h"
#include "service/engine/prompt.h"
#include "service/engine/tensor_export.h"
#include "service/engine/tensor_pieces.h"
#include "service/engine/viewer_html.h"

namespace attnscope::cli {

// The flags of the outputs, for Flags::Parse.
std::vector<FlagSpec> TensorOutputFlagSpecs();

// What the flags ask for, checked for syntax and for flags given without
// their file (InvalidArgument: a usage error), before any model is known.
struct TensorOutputFlags {
  std::string export_path, viewer_path;  // empty: not written
  std::vector<int64_t> export_layers, export_heads;  // empty: all
  bool export_float16 = false;
  std::vector<int64_t> viewer_layers, viewer_heads;  // empty: all
  int64_t viewer_max_bytes = 0;

  bool any() const { return !export_path.empty() || !viewer_path.empty(); }
};
// `export_flag` names the flag of the export's path (batch: "export-dir",
// whose value is a directory, `export_arg` in the messages).
absl::StatusOr<TensorOutputFlags> ParseTensorOutputFlags(const Flags& flags,
                                                         const std::string& export_flag = "export",
                                                         const std::string& export_arg = "FILE");

// The outputs of one run on a model of L layers and H heads.
class TensorOutputs : public engine::TensorPieceSink {
 public:
  // InvalidArgument naming the flag for a layer or head the model lacks.
  static absl::StatusOr<std::unique_ptr<TensorOutputs>> Plan(const TensorOutputFlags& flags,
                                                             int64_t num_layers,
                                                             int64_t num_heads);

  // What the forward pass (or the server) must publish: the union of the
  // two files' heads, hidden states and logits only for the export.
  engine::TensorRequest Request() const;

  // FailedPrecondition when the page of the selected heads at T tokens
  // cannot keep the 16 largest weights of every row within --viewer-max-mb
  // (or T is over engine::kViewerMaxTokens), saying how to select fewer
  // heads; checked before a local pass, and at the first attention piece of
  // a remote one. Below the cap, the page keeps as many keys a row as fit.
  absl::Status CheckViewerSize(int64_t num_tokens) const;

  // Creates the export file. Internal naming the path if it cannot.
  absl::Status Open();

  // Hands each piece to the files that hold it.
  absl::Status Add(const engine::TensorPiece& piece) override;

  // Completes both files ("wrote FILE (...)" on stderr for each, unless
  // set_quiet); `title` names the model on the page.
  absl::Status Finish(const std::string& title, const engine::Prompt& prompt,
                      const engine::AnalysisRun& run);

  // No "wrote FILE" lines (batch writes one file per prompt).
  void set_quiet(bool quiet) { quiet_ = quiet; }

 private:
  TensorOutputs() = default;
  absl::StatusOr<int64_t> ViewerRowKeys(int64_t num_tokens) const;
  TensorOutputFlags flags_;
  int64_t num_layers_ = 0, num_heads_ = 0;
  bool quiet_ = false;
  engine::HeadSelection export_heads_, viewer_heads_;
  std::unique_ptr<engine::ExportWriter> export_;
  std::unique_ptr<engine::ViewerPageBuilder> viewer_;
};

}  // namespace attnscope::cli
