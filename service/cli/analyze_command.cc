// attnscope analyze: one prompt through the model, with every statistic.
#include <unistd.h>

#include <iostream>

#include "nlohmann/json.hpp"
#include "service/analysis/stats_json.h"
#include "service/analysis/text_report.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/analysis_run.h"
#include "service/engine/tensor_export.h"
#include "service/engine/viewer_html.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] analyze [--model DIR|NAME] (--text TEXT | --ids 1,2,3 | --chat FILE) [options]

Runs the prompt through the model and reports attention sinks, hidden-state
norms, context health and next-token entropy (see service/analysis/definitions.md).

  --model DIR|NAME   model directory (default: the bundled tiny-gpt2); with
                     --server, a model name from 'attnscope models' (default:
                     the server's default model); the output is the same
  --text TEXT        the prompt as text (needs the model's tokenizer); special
                     tokens are added as Hugging Face does by default
                     (Llama's BOS; nothing for GPT-2)
  --no-special-tokens  with --text: add no special tokens
  --ids 1,2,3        the prompt as token ids
  --chat FILE        a conversation, JSON [{"role": ..., "content": ...}],
                     rendered with the model's chat template
  --add-generation-prompt  with --chat: end with the assistant's header
  --json             machine-readable output (the keys of the fixtures'
                     stats.json plus tokens, input_ids, template)
  --export FILE      write input_ids, attentions (L,H,T,T), hidden_states
                     (L+1,T,D) and logits (T,V) to a safetensors file
  --viewer FILE      write a self-contained HTML page to explore the
                     attention weights (pick a layer and a head, hover a
                     token to see what it reads); open it in any browser
  --threshold X      z-score above which a token is a sink (default 6.0)
  --template T       structural positions: none, chatml, chat or auto
                     (default: chat for --chat, else chatml if the text has
                     <|im_start|>, else none)
  --block-size N     attention query rows per block (0 = whole layers);
                     bounds memory on long prompts, same results
  --threads N        intra-op threads (default: all cores)
  --color WHEN       auto (default), always or never
)";

struct AnalyzeArgs {
  Flags flags;
  engine::AnalysisSettings settings;
  bool color = false;
};

absl::StatusOr<AnalyzeArgs> ParseArgs(const std::vector<std::string>& args) {
  AnalyzeArgs a;
  ATTNSCOPE_ASSIGN_OR_RETURN(
      a.flags, Flags::Parse(args, WithPromptFlags({{"model"}, {"json", false}, {"export"},
                                                   {"viewer"}, {"threshold"}, {"template"},
                                                   {"block-size"}, {"threads"}, {"color"}})));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.settings.threshold, a.flags.GetDouble("threshold", 6.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.settings.structure,
                             analysis::ParseTemplate(a.flags.Get("template", "auto")));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.settings.query_block_size,
                             a.flags.GetInt("block-size", 0, 0, int64_t{1} << 30));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 0, 1024).status());
  const std::string color = a.flags.Get("color", "auto");
  if (color != "auto" && color != "always" && color != "never") {
    return absl::InvalidArgumentError("--color must be auto, always or never, got '" + color + "'");
  }
  a.color = color == "always" || (color == "auto" && isatty(STDOUT_FILENO));
  a.settings.record_tensors = a.flags.Has("export") || a.flags.Has("viewer");
  return a;
}

// The viewer page of --viewer, from the recorded attentions.
absl::Status WriteViewer(const std::string& path, const engine::ModelBundle& bundle,
                         const engine::Prompt& prompt, const engine::AnalysisRun& run) {
  engine::ViewerData data;
  data.title = bundle.directory;
  data.prompt_text = prompt.text;
  for (const std::string& bytes : prompt.token_bytes) {
    data.tokens.push_back(analysis::DisplayToken(bytes, 40));
  }
  data.num_layers = bundle.config().num_layers;
  data.num_heads = bundle.config().num_heads;
  data.num_tokens = static_cast<int64_t>(prompt.ids.size());
  data.attentions = run.tensors->attentions();
  return engine::WriteViewerHtml(path, data);
}

void PrintJson(const engine::Prompt& prompt, const engine::AnalysisRun& run) {
  nlohmann::json out = analysis::StatsToJson(run.stats);
  out["input_ids"] = prompt.ids;
  out["tokens"] = prompt.tokens;
  out["template"] = std::string(analysis::TemplateName(run.structure));
  out["forward_seconds"] = run.forward_seconds;
  std::cout << out.dump() << "\n";
}

void PrintReport(const engine::Prompt& prompt, const engine::AnalysisRun& run, bool color) {
  std::cout << analysis::RenderTextReport(run.stats, prompt.token_bytes,
                                          analysis::TextReportOptions{color});
}

// The same analysis on a server: the results come back as the very values a
// local run gives, so they print identically.
int RunRemote(const AnalyzeArgs& a, const std::string& server) {
  absl::Status local_only = RejectLocalOnlyFlags(a.flags, {"export", "viewer", "threads"});
  if (!local_only.ok()) return UsageError("analyze", local_only);
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return UsageError("analyze", prompt.status());
  auto remote =
      rpc::RemoteClient(server).Analyze(RemoteModelName(a.flags), *prompt, a.settings);
  if (!remote.ok()) return RuntimeError("analyze", remote.status());
  if (a.flags.Has("json")) {
    PrintJson(remote->first, remote->second);
  } else {
    PrintReport(remote->first, remote->second, a.color);
  }
  return kExitOk;
}

}  // namespace

int RunAnalyze(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto parsed = ParseArgs(args);
  if (!parsed.ok()) return UsageError("analyze", parsed.status());
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("analyze", bundle.status());
  auto prompt = PromptFromFlags(**bundle, parsed->flags);
  if (!prompt.ok()) return RuntimeError("analyze", prompt.status());
  auto run = engine::RunAnalysis(**bundle, *prompt, parsed->settings);
  if (!run.ok()) return RuntimeError("analyze", run.status());
  if (parsed->flags.Has("export")) {
    absl::Status written = engine::ExportTensors(parsed->flags.Get("export"), prompt->ids,
                                                 (*bundle)->config(), *run->tensors);
    if (!written.ok()) return RuntimeError("analyze", written);
  }
  if (parsed->flags.Has("viewer")) {
    absl::Status written = WriteViewer(parsed->flags.Get("viewer"), **bundle, *prompt, *run);
    if (!written.ok()) return RuntimeError("analyze", written);
  }
  if (parsed->flags.Has("json")) {
    PrintJson(*prompt, *run);
  } else {
    PrintReport(*prompt, *run, parsed->color);
  }
  return kExitOk;
}

}  // namespace attnscope::cli
