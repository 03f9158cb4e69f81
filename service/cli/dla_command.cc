// attnscope dla: direct logit attribution of a prompt's prediction at chosen
// positions to the embedding, every head, each layer's attention bias and
// MLP.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/dla_output.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/lens_run.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] dla [--model DIR|NAME] (--text TEXT | --text-file FILE | --ids 1,2,3 | --ids-file FILE | --chat FILE) [options]

Direct logit attribution (service/analysis/definitions.md, "Direct logit
attribution"): how much the embedding, every head of every layer, each
layer's attention bias and each MLP write the logit of a target token
directly, read out through the final norm with its scale frozen at the final
residual stream (TransformerLens's convention). The parts sum to the
target's logit (before Gemma-2's soft-capping) less the final norm's bias.
Prints, per position, the target, the model's logit and probability, the
sum of the parts, a layer x head grid with each layer's bias and MLP, and
the largest parts. With --server, the server's Lens RPC computes it
(--model names a served model); the output is the same.

  --model DIR        model directory (default: the bundled tiny-gpt2)
  --text TEXT        the prompt as text; --text - reads stdin
  --text-file FILE, --ids 1,2,3, --ids-file FILE, --chat FILE,
  --add-generation-prompt, --no-special-tokens
                     the prompt, as for analyze
  --positions P      last (default), all, or indices and ranges such as
                     0,5,10-13; at most 64 positions
  --target TOKEN     the target token, as text that is exactly one token
                     (e.g. " Paris"); default: each position's next prompt
                     token, and the model's top prediction at the last
  --target-id IDS    the target as token ids: one for every position, or
                     one per position (in position order)
  --top N            the largest parts listed per position (default 10)
  --json             machine-readable output: every contribution
  --block-size N     attention query rows per block (0: automatic)
  --precision P      float32 (default), bf16 or auto, as for analyze
  --device D         cpu (default), cuda or auto
  --threads N        intra-op threads (default: all cores)
  --deadline S       give up after S seconds
)";

struct DlaArgs {
  Flags flags;
  engine::LensSettings settings;
  std::string positions = "last";
  int64_t top = 10;
  double deadline = 0;
};

absl::StatusOr<DlaArgs> ParseArgs(const std::vector<std::string>& args) {
  DlaArgs a;
  std::vector<FlagSpec> specs =
      WithPromptFlags({{"model"}, {"json", false}, {"positions"}, {"target"}, {"target-id"},
                       {"top"}, {"block-size"}, {"threads"}, {"deadline"}});
  for (FlagSpec& spec : ComputeFlagSpecs()) specs.push_back(std::move(spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  engine::LensSettings& s = a.settings;
  s.lens = false;
  s.attribution = true;
  ATTNSCOPE_ASSIGN_OR_RETURN(a.top, a.flags.GetInt("top", 10, 0, 1 << 20));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.query_block_size, a.flags.GetInt("block-size", 0, 0, 1 << 30));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(s.precision, ParseComputeFlags(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  s.should_stop = LocalDeadline(a.deadline);
  if (a.flags.Has("target") && a.flags.Has("target-id")) {
    return absl::InvalidArgumentError("give the target as --target or as --target-id, not both");
  }
  if (a.flags.Has("target-id")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(s.attribution_options.targets,
                               engine::ParseIndexList(a.flags.Get("target-id", ""), "--target-id"));
    if (s.attribution_options.targets.empty()) {
      return absl::InvalidArgumentError("--target-id takes token ids such as 13 or 13,262");
    }
  }
  a.positions = a.flags.Get("positions", "last");
  if (a.positions != "last" && a.positions != "all") {
    ATTNSCOPE_RETURN_IF_ERROR(engine::ParseIndexList(a.positions, "--positions").status());
  }
  return a;
}

// What the observer would refuse after loading the prompt, as usage errors.
absl::Status CheckTargets(const analysis::AttributionOptions& o, const model::ModelConfig& config) {
  const size_t positions = o.positions.size();
  if (static_cast<int64_t>(positions) > o.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--positions: ", positions, " positions; direct logit attribution keeps every layer's "
        "writes at each position until the pass ends, so it takes at most ", o.max_positions));
  }
  if (o.targets.size() > 1 && o.targets.size() != positions) {
    return absl::InvalidArgumentError(absl::StrCat("--target-id: ", o.targets.size(),
                                                   " ids for ", positions,
                                                   " positions; give one, or one per position"));
  }
  for (int64_t id : o.targets) {
    if (id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--target-id: ", id, " is outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

int RunRemote(const DlaArgs& a, const std::string& server) {
  if (absl::Status s = RejectLocalOnlyFlags(a.flags, {"threads", "device"}); !s.ok()) {
    return UsageError("dla", s);
  }
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return RuntimeError("dla", prompt.status());
  rpc::LensQuery q;
  q.lens = false;
  q.attribution = true;
  q.attribution_positions = a.positions;
  q.target_ids = a.settings.attribution_options.targets;
  q.target_text = a.flags.Get("target", "");
  if (a.flags.Has("precision")) q.precision = a.settings.precision;
  q.query_block_size = a.settings.query_block_size;
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("dla", server, a.deadline));
  auto remote = client.Lens(RemoteModelName(a.flags), *prompt, q);
  if (!remote.ok()) return RuntimeError("dla", ExplainDeadline(remote.status(), a.deadline));
  if (a.flags.Has("json")) {
    std::cout << AttributionJson(remote->model, remote->prompt, remote->run).dump() << "\n";
  } else {
    std::cout << RenderAttribution(remote->prompt, remote->run, a.top);
  }
  return kExitOk;
}

}  // namespace

int RunDla(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("dla", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status read = LoadPromptSources(parsed->flags); !read.ok()) {
    return RuntimeError("dla", read);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("dla", bundle.status());
  auto prompt = PromptFromFlags(**bundle, parsed->flags);
  if (!prompt.ok()) return RuntimeError("dla", prompt.status());
  engine::LensSettings& settings = parsed->settings;
  auto positions = engine::ParsePromptPositions(parsed->positions, "--positions",
                                        static_cast<int64_t>(prompt->ids.size()));
  if (!positions.ok()) return UsageError("dla", positions.status());
  settings.attribution_options.positions = *positions;
  if (parsed->flags.Has("target")) {
    auto target =
        engine::SingleTokenId(**bundle, "--target", parsed->flags.Get("target", ""), "--target-id");
    if (!target.ok()) return UsageError("dla", target.status());
    settings.attribution_options.targets = {*target};
  }
  if (absl::Status checked = CheckTargets(settings.attribution_options, (*bundle)->config());
      !checked.ok()) {
    return UsageError("dla", checked);
  }
  auto run = engine::RunLens(**bundle, *prompt, settings);
  if (!run.ok()) return RuntimeError("dla", ExplainDeadline(run.status(), parsed->deadline));
  if (parsed->flags.Has("json")) {
    std::cout << AttributionJson((*bundle)->directory, *prompt, *run).dump() << "\n";
  } else {
    std::cout << RenderAttribution(*prompt, *run, parsed->top);
  }
  return kExitOk;
}

}  // namespace attnscope::cli
