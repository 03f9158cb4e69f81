// attnscope lens: the logit lens of a prompt (every hidden state read out
// through the final norm and the head) and, with --rollout, its attention
// rollout.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/lens_output.h"
#include "service/cli/lens_viewer.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/lens_run.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] lens [--model DIR|NAME] (--text TEXT | --text-file FILE | --ids 1,2,3 | --ids-file FILE | --chat FILE) [options]

The logit lens (service/analysis/definitions.md, "Logit lens"): every hidden
state s = 0..L (0 = the embeddings, s = after layer s, L = after the final
norm) read out through the model's final norm and head (and Gemma-2's final
soft-capping), as if the model stopped there. Prints a table of states x
positions with the most likely token and its probability, then the actual
next token's probability and rank (0 = the most likely) per cell. The last
state's row is the model's own prediction. With --rollout, also the
attention rollout (Abnar & Zuidema 2020; "Attention rollout" there) of the
chosen queries after every layer. With --server, the server's Lens RPC
computes it (--model names a served model); the output is the same.

  --model DIR        model directory (default: the bundled tiny-gpt2)
  --text TEXT        the prompt as text; --text - reads stdin
  --text-file FILE, --ids 1,2,3, --ids-file FILE, --chat FILE,
  --add-generation-prompt, --no-special-tokens
                     the prompt, as for analyze
  --positions P      positions read out: last (default), all, or indices
                     and ranges such as 0,5,10-13
  --top K            tokens per cell in --json (default 5; the table shows
                     the first)
  --chunk-rows N     rows read out at once (default 256): the extra memory
                     is 4 N (V + D) bytes; the results do not depend on it
                     (not with --server)
  --rollout          also the attention rollout; it keeps two T x T float32
                     matrices (8 T^2 bytes) and takes prompts of up to 8192
                     tokens (512 MiB)
  --rollout-queries Q  the queries of the rollout: last (default) or indices
                     and ranges
  --no-lens          only the rollout (with --rollout)
  --json             machine-readable output: every cell's top K, the next
                     token's id, probability and rank, the entropy (nats),
                     and the rollout rows in full
  --viewer FILE      also write a self-contained HTML page of the same
                     document: the states x positions grid coloured by the
                     next token's probability, the top probability or the
                     entropy (linear or log scale; top tokens on hover), and
                     the rollout as the prompt shaded by a chosen query's
                     weights after a chosen layer
  --block-size N     attention query rows per block (0: automatic)
  --precision P      float32 (default), bf16 or auto, as for analyze (the
                     read-out too)
  --device D         cpu (default), cuda or auto (not with --server)
  --threads N        intra-op threads (default: all cores; not with --server)
  --deadline S       give up after S seconds
)";

struct LensArgs {
  Flags flags;
  engine::LensSettings settings;
  std::string positions = "last", queries = "last";
  double deadline = 0;
};

absl::StatusOr<LensArgs> ParseArgs(const std::vector<std::string>& args) {
  LensArgs a;
  std::vector<FlagSpec> specs = WithPromptFlags(
      {{"model"}, {"json", false}, {"viewer"}, {"positions"}, {"top"}, {"chunk-rows"}, {"rollout", false},
       {"rollout-queries"}, {"no-lens", false}, {"block-size"}, {"threads"}, {"deadline"}});
  for (FlagSpec& spec : ComputeFlagSpecs()) specs.push_back(std::move(spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  engine::LensSettings& s = a.settings;
  ATTNSCOPE_ASSIGN_OR_RETURN(s.lens_options.top_k, a.flags.GetInt("top", 5, 1, 1 << 20));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.lens_options.chunk_rows,
                             a.flags.GetInt("chunk-rows", 256, 1, 1 << 20));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.query_block_size, a.flags.GetInt("block-size", 0, 0, 1 << 30));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(s.precision, ParseComputeFlags(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  s.should_stop = LocalDeadline(a.deadline);
  s.rollout = a.flags.Has("rollout");
  s.lens = !a.flags.Has("no-lens");
  if (!s.rollout && (a.flags.Has("rollout-queries") || a.flags.Has("no-lens"))) {
    return absl::InvalidArgumentError("--rollout-queries and --no-lens need --rollout");
  }
  if (!s.lens && (a.flags.Has("positions") || a.flags.Has("top") || a.flags.Has("chunk-rows"))) {
    return absl::InvalidArgumentError("--positions, --top and --chunk-rows shape the logit lens, "
                                      "which --no-lens leaves out");
  }
  a.positions = a.flags.Get("positions", "last");
  a.queries = a.flags.Get("rollout-queries", "last");
  // Every query's row after every layer would be L T^2 numbers.
  if (a.queries == "all") {
    return absl::InvalidArgumentError(
        "--rollout-queries takes last or a list such as 0,5,10-13, not all (L x T x T numbers)");
  }
  // Checked here for the syntax; against the prompt's length once it is known.
  for (const auto& [flag, text] : {std::pair<std::string, std::string>{"--positions", a.positions},
                                   {"--rollout-queries", a.queries}}) {
    if (text != "last") ATTNSCOPE_RETURN_IF_ERROR(engine::ParseIndexList(text, flag).status());
  }
  return a;
}

// Prints the table or --json, and writes --viewer's page (the --json document).
int Report(const Flags& flags, const std::string& model, const engine::Prompt& prompt,
           const engine::LensRun& run, int64_t num_layers) {
  if (!flags.Has("json") && !flags.Has("viewer")) {
    std::cout << RenderLens(prompt, run, num_layers);
    return kExitOk;
  }
  const nlohmann::json doc = LensJson(model, prompt, run, num_layers);
  if (flags.Has("viewer")) {
    if (absl::Status written = WritePage(flags, "viewer", LensViewerHtml(doc)); !written.ok()) {
      return RuntimeError("lens", written);
    }
  }
  if (flags.Has("json")) {
    std::cout << doc.dump() << "\n";
  } else {
    std::cout << RenderLens(prompt, run, num_layers);
  }
  return kExitOk;
}

int RunRemote(const LensArgs& a, const std::string& server) {
  if (absl::Status s = RejectLocalOnlyFlags(a.flags, {"threads", "device", "chunk-rows"}); !s.ok()) {
    return UsageError("lens", s);
  }
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return RuntimeError("lens", prompt.status());
  rpc::LensQuery q;
  q.lens = a.settings.lens;
  q.rollout = a.settings.rollout;
  q.lens_positions = a.positions;
  q.rollout_queries = a.settings.rollout ? a.queries : "";
  if (a.settings.lens) q.top_k = a.settings.lens_options.top_k;
  if (a.flags.Has("precision")) q.precision = a.settings.precision;
  q.query_block_size = a.settings.query_block_size;
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("lens", server, a.deadline));
  auto remote = client.Lens(RemoteModelName(a.flags), *prompt, q);
  if (!remote.ok()) return RuntimeError("lens", ExplainDeadline(remote.status(), a.deadline));
  return Report(a.flags, remote->model, remote->prompt, remote->run, remote->num_layers);
}

}  // namespace

int RunLens(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("lens", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status page = CheckPageFile(parsed->flags, "viewer"); !page.ok()) {
    return RuntimeError("lens", page);
  }
  if (absl::Status read = LoadPromptSources(parsed->flags); !read.ok()) {
    return RuntimeError("lens", read);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("lens", bundle.status());
  auto prompt = PromptFromFlags(**bundle, parsed->flags);
  if (!prompt.ok()) return RuntimeError("lens", prompt.status());
  const auto tokens = static_cast<int64_t>(prompt->ids.size());
  engine::LensSettings& settings = parsed->settings;
  auto positions = engine::ParsePromptPositions(parsed->positions, "--positions", tokens, true);
  if (!positions.ok()) return UsageError("lens", positions.status());
  settings.lens_options.positions = *positions;
  auto queries = engine::ParsePromptPositions(parsed->queries, "--rollout-queries", tokens, true);
  if (!queries.ok()) return UsageError("lens", queries.status());
  settings.rollout_options.queries = *queries;
  auto run = engine::RunLens(**bundle, *prompt, settings);
  if (!run.ok()) return RuntimeError("lens", ExplainDeadline(run.status(), parsed->deadline));
  return Report(parsed->flags, (*bundle)->directory, *prompt, *run,
                (*bundle)->config().num_layers);
}

}  // namespace attnscope::cli
