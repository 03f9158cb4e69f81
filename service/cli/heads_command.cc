// attnscope heads: previous-token, induction and sink scores of every head on
// the induction probe, and the loss on each half of it.
#include <unistd.h>

#include <iostream>

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/head_report.h"
#include "service/cli/probe_options.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] heads [--model DIR|NAME] [--n 50] [--seqs 4] [--seed 0] [options]

Scans every layer x head on the induction probe of service/analysis/definitions.md: BOS
followed by n random ids (uniform in 1000..9999) and the same n ids again.
Prints, as layer x head grids, each head's previous-token score
(mean_{i>=1} A[i,i-1]), induction score (mean_{i=n+1..2n} A[i,i-n+1]) and
sink score (A[T-1,0]), each the mean over the sequences; the top heads of
each kind; and the mean next-token loss on each half of the probe (a model
that copies the repeat has a much lower loss on the second half).

  --model DIR|NAME   model directory (default: the bundled tiny-gpt2); with
                     --server, a model name from 'attnscope models' (default:
                     the server's default model); the output is the same
                     but for the "Model:" line, which names it
  --n N              ids per half (default 50; T = 2n+1)
  --seqs S           number of random sequences (default 4)
  --seed X           random seed (default 0): std::mt19937_64, see
                     engine/head_scan.h for the exact draw
  --ids-file F       the probe from a file instead: one sequence per line,
                     ids separated by commas or spaces, each BOS + n ids +
                     the same n (n is taken from the first line unless --n)
  --text TEXT        the probe from text instead: one sequence, BOS + the
                     text's tokens (no special tokens) + the same tokens
                     again, so n is the text's token count; --text - reads
                     stdin
  --text-file FILE   the same with the text of FILE (any UTF-8)
  --top K            top heads listed per kind (default 5)
  --json             machine-readable output (grids as [layer][head])
  --threads N        intra-op threads (default: all cores; not with --server)
  --color WHEN       auto (default), always or never
  --deadline S       give up after S seconds (with --server the server stops
                     too)
)";

struct HeadsArgs {
  Flags flags;
  ProbeOptions probe;
  int top = 5;
  bool color = false;
  double deadline = 0;
};

absl::StatusOr<HeadsArgs> ParseArgs(const std::vector<std::string>& args) {
  HeadsArgs a;
  std::vector<FlagSpec> specs = {{"model"}, {"top"},   {"json", false},
                                 {"threads"}, {"color"}, {"deadline"}};
  for (FlagSpec& s : ProbeFlagSpecs()) specs.push_back(s);
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.probe, ParseProbeOptions(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t top, a.flags.GetInt("top", 5, 0, 1 << 20));
  a.top = static_cast<int>(top);
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.color, ParseColorFlag(a.flags));
  return a;
}

// The same output for a local and a remote scan; `model` names the model.
void PrintScan(const HeadsArgs& a, const std::string& model, const engine::Probe& probe,
               const engine::HeadScan& scan) {
  if (a.flags.Has("json")) {
    nlohmann::json out = HeadScanJson(scan, a.top);
    out["model"] = model;
    out["probe"] = ProbeJson(a.probe, probe);
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "Model: " << model << "\n"
              << RenderHeadScan(scan, DescribeProbe(a.probe, probe), a.top, a.color);
  }
}

int RunRemote(const HeadsArgs& a, const std::string& server) {
  absl::Status local_only = RejectLocalOnlyFlags(a.flags, {"threads"});
  if (!local_only.ok()) return UsageError("heads", local_only);
  auto source = RemoteProbeSource(a.probe);
  if (!source.ok()) return RuntimeError("heads", source.status());
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("heads", server, a.deadline));
  auto remote = client.ScanHeads(RemoteModelName(a.flags), *source);
  if (!remote.ok()) return RuntimeError("heads", ExplainDeadline(remote.status(), a.deadline));
  PrintScan(a, remote->model, remote->probe, remote->scan);
  return kExitOk;
}

}  // namespace

int RunHeads(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("heads", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status read = ReadProbeText(parsed->flags, &parsed->probe); !read.ok()) {
    return RuntimeError("heads", read);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("heads", bundle.status());
  auto probe = BuildProbe(**bundle, parsed->probe);
  if (!probe.ok()) return RuntimeError("heads", probe.status());
  auto scan = engine::ScanHeads(*(*bundle)->model, *probe, 0, LocalDeadline(parsed->deadline));
  if (!scan.ok()) return RuntimeError("heads", ExplainDeadline(scan.status(), parsed->deadline));
  PrintScan(*parsed, (*bundle)->directory, *probe, *scan);
  return kExitOk;
}

}  // namespace attnscope::cli
