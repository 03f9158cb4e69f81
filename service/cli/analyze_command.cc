// attnscope analyze: one prompt through the model, with every statistic.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "nlohmann/json.hpp"
#include "service/analysis/stats_json.h"
#include "service/analysis/text_report.h"
#include "service/cli/command_support.h"
#include "service/cli/batch_output.h"
#include "service/cli/commands.h"
#include "service/cli/prompt_lines.h"
#include "service/cli/remote_support.h"
#include "service/cli/tensor_outputs.h"
#include "service/core/status_macros.h"
#include "service/engine/analysis_run.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] analyze [--model DIR|NAME] (--text TEXT | --text-file FILE | --ids 1,2,3 | --ids-file FILE | --chat FILE | --input FILE) [options]

Runs the prompt through the model and reports attention sinks (anomalous and
expected), hidden-state norms, context health and, per position, the
next-token entropy, the surprisal of the actual next token and the model's
top predictions (see service/analysis/definitions.md).

  --model DIR|NAME   model directory (default: the bundled tiny-gpt2); with
                     --server, a model name from 'attnscope models' (default:
                     the server's default model); the output is the same
  --text TEXT        the prompt as text (needs the model's tokenizer); special
                     tokens are added as Hugging Face does by default
                     (Llama's BOS; nothing for GPT-2); --text - reads stdin
  --text-file FILE   the prompt from a file (any UTF-8, NUL included)
  --no-special-tokens  with a text prompt: add no special tokens
  --ids 1,2,3        the prompt as token ids
  --ids-file FILE    token ids from a file (commas or whitespace; - = stdin)
  --chat FILE        a conversation, JSON [{"role": ..., "content": ...}],
                     rendered with the model's chat template
  --add-generation-prompt  with --chat: end with the assistant's header
  --input FILE       many prompts, one per line, in the format of 'attnscope
                     batch' (JSONL {"id", "text"|"messages"|"ids"} or plain
                     text), through one loaded model: prints one JSON line
                     per prompt, {"id"} and the keys of --json, or {"id",
                     "line", "error"} for a prompt that failed (exit 1; the
                     rest go on); for files per prompt see 'batch --export-dir'
  --format F         with --input: auto (default), jsonl or text
  --json             machine-readable output (the keys of the fixtures'
                     stats.json plus tokens, input_ids, template)
  --export FILE      write input_ids, attentions (L,H,T,T), hidden_states
                     (L+1,T,D) and logits (T,V) to a safetensors file,
                     streamed to disk as the pass goes (memory: one block)
  --attention-layers LIST, --attention-heads LIST
                     with --export: only these layers / heads' attentions
                     ("0,5,10-13" or "all", model indices; the file's
                     metadata names them)
  --attention-dtype float32|float16
                     with --export: the attentions' dtype (default float32)
  --viewer FILE      write a self-contained HTML page to explore the
                     attention weights: every head at a glance, one head's
                     matrix, what a hovered token reads and its z, norm and
                     entropy; open it in any browser (a different FILE
                     than --export); with --server both files are written
                     here from the tensors the server streams (the same
                     bytes; the page's title is the served model's name)
  --viewer-layers LIST, --viewer-heads LIST
                     with --viewer: only these layers / heads on the page
  --viewer-max-mb N  with --viewer: refuse before the pass when the page
                     could exceed N MB (default 128; a page holds one byte
                     per weight of the causal triangle, compressed)
  --top N            next-token section: only the N positions whose next
                     token was most surprising (default: all)
  --threshold X      z-score above which a token is a sink (default 6.0)
  --sink-epsilon E   Sink-epsilon's cut: the share of heads whose
                     first-token importance exceeds E (default 0.3)
  --template T       structural positions: none, chatml, chat or auto
                     (default: chat for --chat, else chatml if the text has
                     <|im_start|>, else none)
  --block-size N     attention query rows per block; 0 (default) = whole
                     layers while a layer's attention fits 8 MiB, else
                     blocks that fit (memory linear in T); same results
  --precision P      float32 (default), bf16 (matrix products on bfloat16
                     operands, statistics in float32) or auto (the
                     checkpoint's dtype: bf16 for BF16 weights, else
                     float32); with --server: sent with the request
                     (default: the server's --precision)
  --device D         cpu (default), cuda or auto (cuda when this build's
                     libtorch has CUDA and sees a GPU, else cpu); local only
  --threads N        intra-op threads (default: all cores)
  --color WHEN       auto (default), always or never
  --deadline S       give up after S seconds (with --server the server stops
                     too); with --server, a line on stderr says when the
                     server has not answered within a second (queued)
)";

struct AnalyzeArgs {
  Flags flags;
  engine::AnalysisSettings settings;
  bool color = false;
  int top = 0;
  double deadline = 0;
  TensorOutputFlags outputs;
};

// --export and --viewer naming the same file would overwrite one with the
// other.
absl::Status CheckOutputPaths(const Flags& flags) {
  if (!flags.Has("export") || !flags.Has("viewer")) return absl::OkStatus();
  std::error_code ec1, ec2;
  const auto a = std::filesystem::weakly_canonical(flags.Get("export"), ec1);
  const auto b = std::filesystem::weakly_canonical(flags.Get("viewer"), ec2);
  if (flags.Get("export") == flags.Get("viewer") || (!ec1 && !ec2 && a == b)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--export and --viewer both name '", flags.Get("viewer"),
        "': one would overwrite the other; give two files (e.g. run.safetensors and run.html)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AnalyzeArgs> ParseArgs(const std::vector<std::string>& args) {
  AnalyzeArgs a;
  std::vector<FlagSpec> specs =
      WithPromptFlags({{"model"}, {"json", false}, {"color"}, {"top"}, {"deadline"}});
  for (FlagSpec& spec : AnalysisSettingsFlagSpecs()) specs.push_back(std::move(spec));
  for (FlagSpec& spec : TensorOutputFlagSpecs()) specs.push_back(std::move(spec));
  for (FlagSpec& spec : InputFileFlagSpecs()) specs.push_back(std::move(spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  const std::string per_prompt_files =
      "for a file of prompts, 'attnscope batch --export-dir DIR' writes one export per prompt";
  ATTNSCOPE_RETURN_IF_ERROR(CheckInputFileFlags(
      a.flags, {{"export", per_prompt_files},
                {"viewer", per_prompt_files},
                {"top", "it shortens the text report, and --input prints JSON lines"}}));
  if (!HasInputFile(a.flags)) ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  ATTNSCOPE_RETURN_IF_ERROR(CheckOutputPaths(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.outputs, ParseTensorOutputFlags(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t top, a.flags.GetInt("top", 0, 0, 1 << 24));
  a.top = static_cast<int>(top);
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.settings, ParseAnalysisSettings(a.flags));
  a.settings.should_stop = LocalDeadline(a.deadline);
  ATTNSCOPE_ASSIGN_OR_RETURN(a.color, ParseColorFlag(a.flags));
  return a;
}

nlohmann::json RunJson(const engine::Prompt& prompt, const engine::AnalysisRun& run) {
  nlohmann::json out = analysis::StatsToJson(run.stats);
  out["input_ids"] = prompt.ids;
  out["tokens"] = prompt.tokens;
  out["template"] = std::string(analysis::StructureName(run.structure));
  out["forward_seconds"] = run.forward_seconds;
  return out;
}

void PrintJson(const engine::Prompt& prompt, const engine::AnalysisRun& run) {
  std::cout << RunJson(prompt, run).dump() << "\n";
}

void PrintReport(const engine::Prompt& prompt, const engine::AnalysisRun& run, bool color,
                 int top) {
  analysis::TextReportOptions options;
  options.color = color;
  options.max_prediction_rows = top;
  std::cout << analysis::RenderTextReport(run.stats, prompt.token_bytes, options);
}

// On a terminal, one line on stderr rewritten as the pass goes ("analyze:
// layer 12/24  2048 tokens  4.1 s  ETA 4.1 s  6000 tokens/s"): a long
// prompt on a real model takes minutes. Shown after the first and the last
// layer and at most ten times a second in between; cleared at the end.
class LayerProgressLine : public analysis::LayerListener {
 public:
  LayerProgressLine(int64_t layers, int64_t tokens)
      : layers_(layers), tokens_(tokens), start_(std::chrono::steady_clock::now()) {}
  ~LayerProgressLine() override {
    if (shown_ >= 0) std::fprintf(stderr, "\r\033[K");
  }
  void OnLayerDone(int layer, const analysis::HeadStats&,
                   const std::vector<double>& norms) override {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int64_t done = layer + 1;
    if (done > 1 && done < layers_ && elapsed - shown_ < 0.1) return;
    shown_ = elapsed;
    const double eta = elapsed / static_cast<double>(done) * static_cast<double>(layers_ - done);
    // A remote pass learns T from the layer's norms.
    const int64_t tokens = tokens_ > 0 ? tokens_ : static_cast<int64_t>(norms.size());
    const double rate = elapsed > 0 ? static_cast<double>(tokens) * done / layers_ / elapsed : 0;
    std::fprintf(stderr,
                 "\r\033[Kanalyze: layer %lld/%lld  %lld tokens  %.1f s  ETA %.1f s  "
                 "%.0f tokens/s",
                 static_cast<long long>(done), static_cast<long long>(layers_),
                 static_cast<long long>(tokens), elapsed, eta, rate);
    std::fflush(stderr);
  }

 private:
  int64_t layers_, tokens_;
  std::chrono::steady_clock::time_point start_;
  double shown_ = -1;  // elapsed seconds at the last line shown; -1: none yet
};

// The server's refusal of too many attention bytes names its API fields; on
// the command line the fix is a flag.
absl::Status ExplainAttentionLimit(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      status.message().find("options.return_attention") == absl::string_view::npos) {
    return status;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      status.message(), " (on the command line: --attention-layers, --attention-heads and "
      "--attention-dtype float16 for --export; --viewer-layers and --viewer-heads for --viewer)"));
}

// The same analysis on a server: the results come back as the very values a
// local run gives, so they print identically; --export and --viewer are
// written here from the tensors the server streams.
int RunRemote(AnalyzeArgs& a, const std::string& server) {
  absl::Status local_only = RejectLocalOnlyFlags(a.flags, {"threads", "device"});
  if (!local_only.ok()) return UsageError("analyze", local_only);
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return RuntimeError("analyze", prompt.status());
  rpc::RemoteClient client(server, RemoteSecurity());
  std::unique_ptr<TensorOutputs> outputs;
  std::optional<LayerProgressLine> progress;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::optional<std::pair<int64_t, int64_t>> model_shape;
  if (a.outputs.any() || terminal) {
    auto shape = RemoteShape(client, RemoteModelName(a.flags));
    // Without files to write, the Analyze call itself reports the failure.
    if (!shape.ok() && a.outputs.any()) return RuntimeError("analyze", shape.status());
    if (shape.ok()) model_shape = *shape;
  }
  if (terminal && model_shape) {
    // The server's layer events drive the same line a local pass shows; its
    // token count is known once the server has tokenized (0 until then).
    progress.emplace(model_shape->first, 0);
    a.settings.layer_listener = &*progress;
  }
  if (a.outputs.any()) {
    const auto& shape = model_shape;
    auto planned = TensorOutputs::Plan(a.outputs, shape->first, shape->second);
    if (!planned.ok()) return UsageError("analyze", planned.status());
    outputs = std::move(*planned);
    if (absl::Status opened = outputs->Open(); !opened.ok()) {
      return RuntimeError("analyze", opened);
    }
    a.settings.tensor_request = outputs->Request();
    a.settings.tensor_sink = outputs.get();
  }
  client.SetCallOptions(RemoteCallOptions("analyze", server, a.deadline));
  std::string model;
  auto remote = client.Analyze(RemoteModelName(a.flags), *prompt, a.settings, &model);
  progress.reset();
  if (!remote.ok()) {
    return RuntimeError("analyze",
                        ExplainAttentionLimit(ExplainDeadline(remote.status(), a.deadline)));
  }
  if (outputs != nullptr) {
    absl::Status written = outputs->Finish(model, remote->first, remote->second);
    if (!written.ok()) return RuntimeError("analyze", written);
  }
  if (a.flags.Has("json")) {
    PrintJson(remote->first, remote->second);
  } else {
    PrintReport(remote->first, remote->second, a.color, a.top);
  }
  return kExitOk;
}

// analyze --input FILE: one JSON line per prompt, with one loaded model (or
// one channel to the server); --deadline applies to each prompt.
int RunInputFile(AnalyzeArgs& a, const std::string& server) {
  if (!server.empty()) {
    absl::Status local_only = RejectLocalOnlyFlags(a.flags, {"threads", "device"});
    if (!local_only.ok()) return UsageError("analyze", local_only);
  }
  auto items = ReadInputFile(a.flags);
  if (!items.ok()) return RuntimeError("analyze", items.status());
  const auto error_line = [&a](const BatchItem& item, const absl::Status& status) {
    return BatchErrorLine(item.id, item.line,
                          std::string(ExplainDeadline(status, a.deadline).message()));
  };
  if (!server.empty()) {
    rpc::RemoteClient client(server, RemoteSecurity());
    client.SetCallOptions(RemoteCallOptions("analyze", server, a.deadline));
    const std::string model = RemoteModelName(a.flags);
    return PrintInputLines(*items, [&](const BatchItem& item) {
      auto remote = client.Analyze(model, item.prompt, a.settings);
      if (!remote.ok()) return error_line(item, remote.status());
      return LineWithId(item.id, RunJson(remote->first, remote->second));
    });
  }
  auto bundle = LoadModelFromFlags(a.flags);
  if (!bundle.ok()) return RuntimeError("analyze", bundle.status());
  return PrintInputLines(*items, [&](const BatchItem& item) {
    auto prompt = PromptFromSpec(**bundle, item.prompt);
    if (!prompt.ok()) return error_line(item, prompt.status());
    engine::AnalysisSettings settings = a.settings;
    settings.should_stop = LocalDeadline(a.deadline);
    auto run = engine::RunAnalysis(**bundle, *prompt, settings);
    if (!run.ok()) return error_line(item, run.status());
    return LineWithId(item.id, RunJson(*prompt, *run));
  });
}

}  // namespace

int RunAnalyze(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("analyze", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (HasInputFile(parsed->flags)) return RunInputFile(*parsed, server);
  if (absl::Status read = LoadPromptSources(parsed->flags); !read.ok()) {
    return RuntimeError("analyze", read);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("analyze", bundle.status());
  auto prompt = PromptFromFlags(**bundle, parsed->flags);
  if (!prompt.ok()) return RuntimeError("analyze", prompt.status());
  std::unique_ptr<TensorOutputs> outputs;
  if (parsed->outputs.any()) {
    const model::ModelConfig& config = (*bundle)->config();
    auto planned = TensorOutputs::Plan(parsed->outputs, config.num_layers, config.num_heads);
    if (!planned.ok()) return UsageError("analyze", planned.status());
    outputs = std::move(*planned);
    absl::Status ready = outputs->CheckViewerSize(static_cast<int64_t>(prompt->ids.size()));
    if (ready.ok()) ready = outputs->Open();
    if (!ready.ok()) return RuntimeError("analyze", ready);
    parsed->settings.tensor_request = outputs->Request();
    parsed->settings.tensor_sink = outputs.get();
  }
  std::optional<LayerProgressLine> progress;
  if (isatty(STDERR_FILENO) != 0) {
    progress.emplace((*bundle)->config().num_layers, static_cast<int64_t>(prompt->ids.size()));
    parsed->settings.layer_listener = &*progress;
  }
  auto run = engine::RunAnalysis(**bundle, *prompt, parsed->settings);
  progress.reset();
  if (!run.ok()) return RuntimeError("analyze", ExplainDeadline(run.status(), parsed->deadline));
  if (outputs != nullptr) {
    absl::Status written = outputs->Finish((*bundle)->directory, *prompt, *run);
    if (!written.ok()) return RuntimeError("analyze", written);
  }
  if (parsed->flags.Has("json")) {
    PrintJson(*prompt, *run);
  } else {
    PrintReport(*prompt, *run, parsed->color, parsed->top);
  }
  return kExitOk;
}

}  // namespace attnscope::cli
