#include "service/engine/analysis_run.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

// The text of every top prediction: the token's bytes with byte fragments
// as <0xNN>, or "#id" without a tokenizer.
void NamePredictions(const ModelBundle& bundle, analysis::PromptStats& stats) {
  for (auto& position : stats.top_predictions) {
    for (analysis::Prediction& p : position) {
      absl::StatusOr<std::string> bytes =
          bundle.tokenizer != nullptr ? bundle.tokenizer->TokenBytes(p.id)
                                      : absl::StatusOr<std::string>(absl::StrCat("#", p.id));
      p.token = bytes.ok() ? analysis::ReadableBytes(*bytes) : absl::StrCat("#", p.id);
    }
  }
}

}  // namespace

absl::StatusOr<AnalysisRun> RunAnalysis(const ModelBundle& bundle, const Prompt& prompt,
                                        const AnalysisSettings& settings) {
  AnalysisRun run;
  run.structure =
      analysis::ResolveStructure(prompt.token_bytes, settings.structure, prompt.from_chat);
  analysis::AnalysisOptions options;
  static_cast<analysis::AnalyzerSettings&>(options) = settings;
  options.structural =
      analysis::StructuralPositions(prompt.token_bytes, prompt.special, run.structure,
                                    prompt.from_template);
  options.want_value_norms = true;
  options.input_ids = prompt.ids;
  analysis::PromptAnalyzer analyzer(options);

  std::vector<model::ForwardObserver*> observers = {&analyzer};
  const model::ModelConfig& config = bundle.config();
  if (settings.record_tensors) {
    run.tensors = std::make_unique<model::FullRecorder>(
        config.num_layers, config.num_heads, model::ObserverNeeds{true, false, true, true});
    observers.push_back(run.tensors.get());
  }
  std::optional<PiecePublisher> pieces;
  if (settings.tensor_sink != nullptr) {
    pieces.emplace(settings.tensor_request, settings.tensor_sink);
    observers.push_back(&*pieces);
  }
  observers.insert(observers.end(), settings.extra_observers.begin(),
                   settings.extra_observers.end());
  model::ForwardOptions forward;
  forward.query_block_size = settings.query_block_size;
  // A sink that failed (a full disk) stops the pass at the next layer.
  forward.should_stop = [&] {
    return (settings.should_stop && settings.should_stop()) || (pieces && !pieces->status().ok());
  };
  forward.precision = settings.precision.value_or(model::Precision::kFloat32);

  const auto start = std::chrono::steady_clock::now();
  const absl::Status forward_status = bundle.model->Forward({prompt.ids}, forward, observers);
  if (pieces) ATTNSCOPE_RETURN_IF_ERROR(pieces->status());
  ATTNSCOPE_RETURN_IF_ERROR(forward_status);
  run.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ATTNSCOPE_ASSIGN_OR_RETURN(run.stats, analyzer.Finish());
  NamePredictions(bundle, run.stats);
  return run;
}

}  // namespace attnscope::engine
