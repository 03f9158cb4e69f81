// attnscope patch: activation patching of a clean and a corrupted prompt,
// per head or per (layer, position) of the residual stream.
#include <unistd.h>

#include <cmath>
#include <functional>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "service/analysis/text_report.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/patch_viewer.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/patching_run.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] patch [--model DIR|NAME] --clean TEXT --corrupted TEXT [options]

Activation patching (service/analysis/definitions.md, "Activation
patching"): a clean and a corrupted prompt of the same token length (e.g.
"The Eiffel Tower is in" and "The Colosseum is in" where both are 5 tokens);
the corrupted prompt is run again once per activation with that activation
taken from the clean run, and the metric logit(A) - logit(B) at the last
position is reported with its normalised recovery (patched - corrupted) /
(clean - corrupted): 1 means the activation alone restores the clean
answer. By default every head's output (its weighted values at every
position) is patched, layer x head; --residual patches the residual stream
entering each layer at each position instead (layer x position). With
--server, the server's Patch RPC runs it (--model names a served model);
the output is the same.

  --model DIR          model directory (default: the bundled tiny-gpt2)
  --clean TEXT         the clean prompt
  --corrupted TEXT     the corrupted prompt (the same number of tokens)
  --clean-ids IDS, --corrupted-ids IDS
                       the prompts as token ids instead
  --no-special-tokens  do not add the tokenizer's special tokens (BOS)
  --residual           patch the residual stream per (layer, position)
  --target-a TOKEN, --target-b TOKEN
                       the metric's tokens, as text that is one token each;
                       default: A = the clean run's top prediction, B = the
                       corrupted run's
  --target-ids A,B     the metric's tokens as ids
  --json               machine-readable output: every patch's metric and
                       recovery
  --viewer FILE        also write a self-contained HTML page: the recovery
                       grid on a diverging scale, the metric and the tokens
                       on hover (the --json document inside)
  --block-size N       attention query rows per block (0: automatic)
  --precision P        float32 (default), bf16 or auto
  --device D           cpu (default), cuda or auto (not with --server)
  --threads N          intra-op threads (default: all cores; not with --server)
  --deadline S         give up after S seconds
)";

struct PatchArgs {
  Flags flags;
  engine::PatchSettings settings;
  double deadline = 0;
};

absl::StatusOr<PatchArgs> ParseArgs(const std::vector<std::string>& args) {
  PatchArgs a;
  std::vector<FlagSpec> specs = {{"model"},          {"clean"},         {"corrupted"},
                                 {"clean-ids"},      {"corrupted-ids"}, {"no-special-tokens", false},
                                 {"residual", false}, {"target-a"},     {"target-b"},
                                 {"target-ids"},     {"json", false},   {"viewer"},
                                 {"block-size"},
                                 {"threads"},        {"deadline"}};
  for (FlagSpec& spec : ComputeFlagSpecs()) specs.push_back(std::move(spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  for (const auto& [text, ids] : {std::pair<const char*, const char*>{"clean", "clean-ids"},
                                  {"corrupted", "corrupted-ids"}}) {
    if (a.flags.Has(text) == a.flags.Has(ids)) {
      return absl::InvalidArgumentError(
          absl::StrCat("give exactly one of --", text, " and --", ids));
    }
  }
  if (a.flags.Has("target-ids") && (a.flags.Has("target-a") || a.flags.Has("target-b"))) {
    return absl::InvalidArgumentError("give the targets as --target-a/--target-b or as "
                                      "--target-ids, not both");
  }
  engine::PatchSettings& s = a.settings;
  s.what = a.flags.Has("residual") ? engine::PatchTarget::kResidual : engine::PatchTarget::kHeads;
  if (a.flags.Has("target-ids")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                               engine::ParseIndexList(a.flags.Get("target-ids", ""), "--target-ids"));
    if (ids.size() != 2) {
      return absl::InvalidArgumentError("--target-ids takes two token ids, A,B");
    }
    s.token_a = ids[0];
    s.token_b = ids[1];
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(s.query_block_size, a.flags.GetInt("block-size", 0, 0, 1 << 30));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(s.precision, ParseComputeFlags(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  s.should_stop = LocalDeadline(a.deadline);
  return a;
}

absl::StatusOr<engine::Prompt> PromptOf(const engine::ModelBundle& bundle, const Flags& flags,
                                        const std::string& name) {
  if (flags.Has(name)) {
    return engine::PromptFromText(bundle, flags.Get(name, ""), !flags.Has("no-special-tokens"));
  }
  const std::string flag = name + "-ids";
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                             engine::ParseIndexList(flags.Get(flag, ""), "--" + flag));
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return engine::PromptFromIds(bundle, std::move(ids));
}

nlohmann::json Grid(const std::vector<std::vector<double>>& grid) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : grid) {
    nlohmann::json r = nlohmann::json::array();
    for (double x : row) r.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json PatchJson(const std::string& model, const engine::Prompt& clean,
                         const engine::Prompt& corrupted, const engine::PatchRun& run) {
  const bool heads = run.what == engine::PatchTarget::kHeads;
  return {{"model", model},
          {"patched", heads ? "heads" : "residual"},
          {"clean_ids", clean.ids},
          {"corrupted_ids", corrupted.ids},
          {"target_a", {{"id", run.token_a}, {"token", run.text_a}}},
          {"target_b", {{"id", run.token_b}, {"token", run.text_b}}},
          {"clean_metric", run.clean_metric},
          {"corrupted_metric", run.corrupted_metric},
          {"metric", Grid(run.metric)},
          {"recovery", Grid(run.recovery)},
          {"passes", run.passes},
          {"seconds", run.seconds}};
}

std::string RenderPatch(const engine::Prompt& corrupted, const engine::PatchRun& run) {
  const bool heads = run.what == engine::PatchTarget::kHeads;
  std::string out = absl::StrCat(
      "attnscope patch  ", run.num_tokens, " tokens, ", run.metric.size(), " layers, ",
      run.passes, " patched passes\n\nmetric: logit(\"", run.text_a, "\") - logit(\"",
      run.text_b, "\") at the last position: clean ", absl::StrFormat("%.4f", run.clean_metric),
      ", corrupted ", absl::StrFormat("%.4f", run.corrupted_metric),
      "\nrecovery (patched - corrupted) / (clean - corrupted) with ",
      heads ? "each head's output" : "the residual stream entering each layer at each position",
      " taken from the clean run:\n\n");
  const size_t columns = run.recovery.empty() ? 0 : run.recovery[0].size();
  out += "layer ";
  for (size_t c = 0; c < columns; ++c) {
    const std::string head =
        heads ? absl::StrCat("H", c)
              : absl::StrCat(c, " \"",
                             analysis::DisplayToken(corrupted.token_bytes[c], 5), "\"");
    out += absl::StrFormat(" %9s", head);
  }
  out += "\n";
  for (size_t l = 0; l < run.recovery.size(); ++l) {
    out += absl::StrFormat("%-6d", l);
    for (double r : run.recovery[l]) {
      out += absl::StrFormat(" %+9.3f", std::fabs(r) < 5e-4 ? 0.0 : r);  // no "-0.000"
    }
    out += "\n";
  }
  return out;
}

std::function<void(const engine::PatchStep&)> TerminalProgress() {
  if (!isatty(STDERR_FILENO)) return nullptr;
  return [](const engine::PatchStep& step) {
    std::cerr << "\rpatched " << step.done << " of " << step.total
              << (step.done == step.total ? "\n" : "") << std::flush;
  };
}

absl::StatusOr<rpc::PromptSpec> RemotePrompt(const Flags& flags, const std::string& name) {
  rpc::PromptSpec spec;
  if (flags.Has(name)) {
    spec.text = flags.Get(name, "");
    if (flags.Has("no-special-tokens")) spec.add_special_tokens = false;
    return spec;
  }
  const std::string flag = name + "-ids";
  ATTNSCOPE_ASSIGN_OR_RETURN(spec.ids, engine::ParseIndexList(flags.Get(flag, ""), "--" + flag));
  if (spec.ids.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return spec;
}

// Prints the grid or --json, and writes --viewer's page (the --json document).
int Report(const Flags& flags, const std::string& model, const engine::Prompt& clean,
           const engine::Prompt& corrupted, const engine::PatchRun& run) {
  if (!flags.Has("json") && !flags.Has("viewer")) {
    std::cout << RenderPatch(corrupted, run);
    return kExitOk;
  }
  const nlohmann::json doc = PatchJson(model, clean, corrupted, run);
  if (flags.Has("viewer")) {
    const std::string page = PatchViewerHtml(doc, clean.token_bytes, corrupted.token_bytes);
    if (absl::Status written = WritePage(flags, "viewer", page); !written.ok()) {
      return RuntimeError("patch", written);
    }
  }
  if (flags.Has("json")) {
    std::cout << doc.dump() << "\n";
  } else {
    std::cout << RenderPatch(corrupted, run);
  }
  return kExitOk;
}

int RunRemote(const PatchArgs& a, const std::string& server) {
  if (absl::Status s = RejectLocalOnlyFlags(a.flags, {"threads", "device"}); !s.ok()) {
    return UsageError("patch", s);
  }
  rpc::PatchQuery q;
  auto clean = RemotePrompt(a.flags, "clean");
  if (!clean.ok()) return RuntimeError("patch", clean.status());
  auto corrupted = RemotePrompt(a.flags, "corrupted");
  if (!corrupted.ok()) return RuntimeError("patch", corrupted.status());
  q.clean = *clean;
  q.corrupted = *corrupted;
  q.what = a.settings.what;
  if (a.settings.token_a >= 0) q.target_a_id = a.settings.token_a;
  if (a.settings.token_b >= 0) q.target_b_id = a.settings.token_b;
  q.target_a_text = a.flags.Get("target-a", "");
  q.target_b_text = a.flags.Get("target-b", "");
  if (a.flags.Has("precision")) q.precision = a.settings.precision;
  q.query_block_size = a.settings.query_block_size;
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("patch", server, a.deadline));
  auto remote = client.Patch(RemoteModelName(a.flags), q, TerminalProgress());
  if (!remote.ok()) return RuntimeError("patch", ExplainDeadline(remote.status(), a.deadline));
  return Report(a.flags, remote->model, remote->clean, remote->corrupted, remote->run);
}

}  // namespace

int RunPatch(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("patch", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status page = CheckPageFile(parsed->flags, "viewer"); !page.ok()) {
    return RuntimeError("patch", page);
  }
  if (!server.empty()) return RunRemote(*parsed, server);
  auto bundle = LoadModelFromFlags(parsed->flags);
  if (!bundle.ok()) return RuntimeError("patch", bundle.status());
  auto clean = PromptOf(**bundle, parsed->flags, "clean");
  if (!clean.ok()) return RuntimeError("patch", clean.status());
  auto corrupted = PromptOf(**bundle, parsed->flags, "corrupted");
  if (!corrupted.ok()) return RuntimeError("patch", corrupted.status());
  engine::PatchSettings& settings = parsed->settings;
  for (const auto& [flag, target] :
       {std::pair<const char*, int64_t*>{"target-a", &settings.token_a},
        {"target-b", &settings.token_b}}) {
    if (!parsed->flags.Has(flag)) continue;
    auto id = engine::SingleTokenId(**bundle, absl::StrCat("--", flag), parsed->flags.Get(flag, ""),
                            "--target-ids");
    if (!id.ok()) return UsageError("patch", id.status());
    *target = *id;
  }
  settings.progress = TerminalProgress();
  auto run = engine::RunPatching(**bundle, *clean, *corrupted, settings);
  if (!run.ok()) return RuntimeError("patch", ExplainDeadline(run.status(), parsed->deadline));
  return Report(parsed->flags, (*bundle)->directory, *clean, *corrupted, *run);
}

}  // namespace attnscope::cli
