// attnscope summarize: the population figures of one or two results files
// of `attnscope batch`, as text, JSON or a self-contained HTML page.
#include <fstream>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "service/cli/commands.h"
#include "service/cli/command_support.h"
#include "service/cli/dataset_report_html.h"
#include "service/cli/dataset_summary.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

using nlohmann::json;

constexpr char kHelp[] = R"(Usage: attnscope summarize RESULTS.jsonl [OTHER.jsonl] [--json] [--html FILE] [options]

Population figures of the results of 'attnscope batch' (see
service/analysis/definitions.md, "Population metrics"): the dataset's
Sink-eps (the mean over prompts of the share of heads whose first-token
importance alpha exceeds eps), per layer x head the mean alpha and the share
of prompts with alpha > eps, the first-token mass by layer, the
distributions of health and next-token entropy, and the prompts with the
lowest health. Error lines are counted and left out.

With a second file (another model, or the same model after fine-tuning)
both are summarized and their difference (second minus first) is shown
head by head; the two models must have the same layers x heads.

  --json             one JSON document: {"results": [...], "delta": {...}}
  --html FILE        also write a self-contained HTML report (no network):
                     heatmaps of the share of prompts with alpha > eps per
                     layer x head (and of the differences), histograms
  --sink-epsilon X   the cut eps on alpha, in [0, 1] (default 0.3);
                     recomputed from each prompt's first_token_importance
  --lowest N         prompts listed by lowest health (default 10)
)";

// RESULTS files are the arguments that are not flags or flag values.
absl::Status SplitArgs(const std::vector<std::string>& args, std::vector<std::string>* files,
                       std::vector<std::string>* flag_args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      files->push_back(a);
      continue;
    }
    flag_args->push_back(a);
    const bool takes_value = a.find('=') == std::string::npos && a != "--json";
    if (takes_value && i + 1 < args.size()) flag_args->push_back(args[++i]);
  }
  if (files->empty() || files->size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give one or two results files of 'attnscope batch' (got ", files->size(), ")"));
  }
  return absl::OkStatus();
}

json DeltaJson(const DatasetSummary& a, const DatasetSummary& b, const Grid& share,
               const Grid& importance) {
  auto grid = [](const Grid& g) {
    json out = json::array();
    for (const auto& row : g) out.push_back(row);
    return out;
  };
  return {{"sink_eps", b.sink_eps - a.sink_eps},
          {"share_above_epsilon", grid(share)},
          {"mean_first_token_importance", grid(importance)}};
}

int Summarize(const std::vector<std::string>& files, const Flags& flags, double epsilon,
              int lowest) {
  std::vector<DatasetSummary> summaries;
  for (const std::string& file : files) {
    auto s = SummarizeResults(file, epsilon, lowest);
    if (!s.ok()) return RuntimeError("summarize", s.status());
    summaries.push_back(*std::move(s));
  }
  std::optional<Grid> share_delta, importance_delta;
  if (summaries.size() == 2) {
    auto share = GridDelta(summaries[0].share_above, summaries[1].share_above);
    if (!share.ok()) return RuntimeError("summarize", share.status());
    share_delta = *share;
    importance_delta = *GridDelta(summaries[0].mean_importance, summaries[1].mean_importance);
  }
  if (flags.Has("html")) {
    const std::string page = DatasetReportHtml(summaries, share_delta);
    std::ofstream out(flags.Get("html"), std::ios::binary);
    out << page;
    if (!out.flush()) {
      return RuntimeError("summarize", absl::InternalError(absl::StrCat(
                                           "--html ", flags.Get("html"), ": cannot write the file")));
    }
    std::cerr << "wrote " << flags.Get("html") << " (" << page.size() / 1024 << " kB)\n";
  }
  if (flags.Has("json")) {
    json out = {{"results", json::array()}};
    for (const DatasetSummary& s : summaries) out["results"].push_back(SummaryToJson(s));
    if (share_delta) {
      out["delta"] = DeltaJson(summaries[0], summaries[1], *share_delta, *importance_delta);
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  for (const DatasetSummary& s : summaries) std::cout << SummaryToText(s) << "\n";
  if (share_delta) {
    std::cout << DeltaText(summaries[0], summaries[1], *share_delta);
  }
  return kExitOk;
}

}  // namespace

int RunSummarize(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  std::vector<std::string> files, flag_args;
  if (absl::Status split = SplitArgs(args, &files, &flag_args); !split.ok()) {
    return UsageError("summarize", split);
  }
  auto flags = Flags::Parse(flag_args, {{"json", false}, {"html"}, {"sink-epsilon"}, {"lowest"}});
  if (!flags.ok()) return UsageError("summarize", flags.status());
  auto epsilon = flags->GetDouble("sink-epsilon", 0.3);
  if (epsilon.ok() && !(*epsilon >= 0 && *epsilon <= 1)) {
    epsilon = absl::InvalidArgumentError(absl::StrCat(
        "--sink-epsilon must be a share of attention in [0, 1] (default 0.3), got '",
        flags->Get("sink-epsilon"), "'"));
  }
  if (!epsilon.ok()) return UsageError("summarize", epsilon.status());
  auto lowest = flags->GetInt("lowest", 10, 0, 1000000);
  if (!lowest.ok()) return UsageError("summarize", lowest.status());
  if (flags->Has("html") && flags->Get("html").empty()) {
    return UsageError("summarize", absl::InvalidArgumentError("--html needs a file name"));
  }
  return Summarize(files, *flags, *epsilon, static_cast<int>(*lowest));
}

}  // namespace attnscope::cli
