// attnscope ablate: the loss on each half of the induction probe with and
// without the listed heads.
#include <iostream>

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/head_report.h"
#include "service/cli/probe_options.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] ablate [--model DIR|NAME] --heads 5.1,5.5 [--mode zero|mean] [options]

Switches heads off and measures the mean next-token loss on each half of the
induction probe of service/analysis/definitions.md (BOS + n random ids + the same n ids):
first the baseline, then each listed head alone, then all of them together.
Zero-ablation sets the head's output (its slice before the output
projection) to 0; mean-ablation replaces it by its mean over all positions
and sequences of the probe.

  --model DIR|NAME   model directory (default: the bundled tiny-gpt2); with
                     --server, a model name from 'attnscope models' (the
                     output is the same but for the "Model:" line)
  --heads L.H,...    heads to ablate, as layer.head (0-based)
  --mode M           zero (default) or mean
  --n N              ids per half (default 50; T = 2n+1)
  --seqs S           number of random sequences (default 4)
  --seed X           random seed (default 0)
  --ids-file F       the probe from a file: one sequence per line, each
                     BOS + n ids + the same n (see 'attnscope heads --help')
  --text TEXT        the probe from text: BOS + its tokens + the same tokens
                     (--text - reads stdin)
  --text-file FILE   the same with the text of FILE
  --json             machine-readable output
  --threads N        intra-op threads (default: all cores; not with --server)
  --deadline S       give up after S seconds (with --server the server stops
                     too)
)";

struct AblateArgs {
  Flags flags;
  ProbeOptions probe;
  std::vector<model::HeadRef> heads;
  model::AblationMode mode = model::AblationMode::kZero;
  double deadline = 0;
};

absl::StatusOr<AblateArgs> ParseArgs(const std::vector<std::string>& args) {
  AblateArgs a;
  std::vector<FlagSpec> specs = {{"model"},   {"heads"},   {"mode"},
                                 {"json", false}, {"threads"}, {"deadline"}};
  for (FlagSpec& s : ProbeFlagSpecs()) specs.push_back(s);
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.probe, ParseProbeOptions(a.flags));
  if (!a.flags.Has("heads")) {
    return absl::InvalidArgumentError("--heads is required, e.g. --heads 5.1,5.5");
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(a.heads, engine::ParseHeadList(a.flags.Get("heads")));
  const std::string mode = a.flags.Get("mode", "zero");
  if (mode != "zero" && mode != "mean") {
    return absl::InvalidArgumentError("--mode must be zero or mean, got '" + mode + "'");
  }
  a.mode = mode == "zero" ? model::AblationMode::kZero : model::AblationMode::kMean;
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  return a;
}

// The same output for a local and a remote table; `model` names the model.
void PrintTable(const AblateArgs& a, const std::string& model, const engine::Probe& probe,
                const std::vector<engine::AblationRow>& rows) {
  if (a.flags.Has("json")) {
    nlohmann::json out = AblationJson(rows, a.mode);
    out["model"] = model;
    out["probe"] = ProbeJson(a.probe, probe);
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "Model: " << model << "\n"
              << RenderAblation(rows, a.mode, DescribeProbe(a.probe, probe));
  }
}

int RunRemote(const AblateArgs& a, const std::string& server) {
  absl::Status local_only = RejectLocalOnlyFlags(a.flags, {"threads"});
  if (!local_only.ok()) return UsageError("ablate", local_only);
  auto source = RemoteProbeSource(a.probe);
  if (!source.ok()) return RuntimeError("ablate", source.status());
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("ablate", server, a.deadline));
  auto remote = client.Ablate(RemoteModelName(a.flags), *source, a.heads, a.mode);
  if (!remote.ok()) return RuntimeError("ablate", ExplainDeadline(remote.status(), a.deadline));
  PrintTable(a, remote->model, remote->probe, remote->rows);
  return kExitOk;
}

}  // namespace

int RunAblate(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("ablate", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status read = ReadProbeText(parsed->flags, &parsed->probe); !read.ok()) {
    return RuntimeError("ablate", read);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("ablate", bundle.status());
  if (absl::Status s = engine::CheckHeads((*bundle)->config(), parsed->heads); !s.ok()) {
    return RuntimeError("ablate", s);
  }
  auto probe = BuildProbe(**bundle, parsed->probe);
  if (!probe.ok()) return RuntimeError("ablate", probe.status());
  auto rows = engine::AblationTable(*(*bundle)->model, *probe, parsed->heads, parsed->mode,
                                    LocalDeadline(parsed->deadline));
  if (!rows.ok()) return RuntimeError("ablate", ExplainDeadline(rows.status(), parsed->deadline));
  PrintTable(*parsed, (*bundle)->directory, *probe, *rows);
  return kExitOk;
}

}  // namespace attnscope::cli
