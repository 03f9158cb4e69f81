// One analysis of one prompt: the forward pass with the statistics observer
// (and, when asked, a recorder of the full tensors) attached.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/prompt_stats.h"
#include "service/analysis/structural.h"
#include "service/engine/model_bundle.h"
#include "service/engine/prompt.h"
#include "service/engine/tensor_pieces.h"
#include "service/model/recorder.h"

namespace attnscope::engine {

// The analyzer's settings (threshold, sink_epsilon, top_k, layer_listener)
// and how the pass runs.
struct AnalysisSettings : analysis::AnalyzerSettings {
  analysis::Structure structure = analysis::Structure::kAuto;
  // Query rows per attention block (0: automatic, whole layers while a
  // layer's probabilities fit 8 MiB, else blocks that do; see
  // model::ForwardOptions). Results agree either way; blocks bound the
  // memory of long prompts.
  int64_t query_block_size = 0;
  // The matrix products' precision (statistics are float32 either way);
  // unset: float32 (a remote call then leaves it to the server's default).
  std::optional<model::Precision> precision;
  // Keep attentions (L,H,T,T), hidden states and logits in memory.
  bool record_tensors = false;
  // Tensors handed piece by piece to `tensor_sink` as the pass publishes
  // them (the --export file, the --viewer page), in bounded memory; with
  // --server the same pieces come from the server's stream.
  TensorRequest tensor_request;
  TensorPieceSink* tensor_sink = nullptr;
  // Checked before each layer; true aborts with CancelledError.
  std::function<bool()> should_stop;
  // More observers of the same forward pass (e.g. a per-layer streamer),
  // called after the analyzer for every event.
  std::vector<model::ForwardObserver*> extra_observers;
};

struct AnalysisRun {
  analysis::PromptStats stats;
  analysis::Structure structure = analysis::Structure::kNone;  // after resolving kAuto
  std::unique_ptr<model::FullRecorder> tensors;               // when record_tensors
  double forward_seconds = 0;
};

// Runs the analysis. Errors: those of LanguageModel::Forward (prompt too long,
// cancelled, ...) and of the analyzer.
absl::StatusOr<AnalysisRun> RunAnalysis(const ModelBundle& bundle, const Prompt& prompt,
                                        const AnalysisSettings& settings);

}  // namespace attnscope::engine
