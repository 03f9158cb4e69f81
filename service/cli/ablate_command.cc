// attnscope ablate: the loss on each half of the induction probe with and
// without the listed heads.
#include <iostream>

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/head_report.h"
#include "service/cli/probe_options.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope ablate [--model DIR] --heads 5.1,5.5 [--mode zero|mean] [options]

Switches heads off and measures the mean next-token loss on each half of the
induction probe of service/analysis/definitions.md (BOS + n random ids + the same n ids):
first the baseline, then each listed head alone, then all of them together.
Zero-ablation sets the head's output (its slice before the output
projection) to 0; mean-ablation replaces it by its mean over all positions
and sequences of the probe.

  --model DIR        model directory (default: the bundled tiny-gpt2)
  --heads L.H,...    heads to ablate, as layer.head (0-based)
  --mode M           zero (default) or mean
  --n N              ids per half (default 50; T = 2n+1)
  --seqs S           number of random sequences (default 4)
  --seed X           random seed (default 0)
  --ids-file F       the probe from a file: one sequence per line, each
                     BOS + n ids + the same n (see 'attnscope heads --help')
  --json             machine-readable output
  --threads N        intra-op threads (default: all cores)
)";

struct AblateArgs {
  Flags flags;
  ProbeOptions probe;
  std::vector<model::HeadRef> heads;
  model::AblationMode mode = model::AblationMode::kZero;
};

absl::StatusOr<AblateArgs> ParseArgs(const std::vector<std::string>& args) {
  AblateArgs a;
  std::vector<FlagSpec> specs = {{"model"}, {"heads"}, {"mode"}, {"json", false}, {"threads"}};
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
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 0, 1024).status());
  return a;
}

}  // namespace

int RunAblate(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto parsed = ParseArgs(args);
  if (!parsed.ok()) return UsageError("ablate", parsed.status());
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("ablate", bundle.status());
  if (absl::Status s = engine::CheckHeads((*bundle)->config(), parsed->heads); !s.ok()) {
    return RuntimeError("ablate", s);
  }
  auto probe = BuildProbe((*bundle)->config(), parsed->probe);
  if (!probe.ok()) return RuntimeError("ablate", probe.status());
  auto rows = engine::AblationTable(*(*bundle)->model, *probe, parsed->heads, parsed->mode);
  if (!rows.ok()) return RuntimeError("ablate", rows.status());
  if (parsed->flags.Has("json")) {
    nlohmann::json out = AblationJson(*rows, parsed->mode);
    out["model"] = (*bundle)->directory;
    out["probe"] = ProbeJson(parsed->probe, *probe);
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "Model: " << (*bundle)->directory << "\n"
              << RenderAblation(*rows, parsed->mode, DescribeProbe(parsed->probe, *probe));
  }
  return kExitOk;
}

}  // namespace attnscope::cli
