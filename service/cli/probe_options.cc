#include "service/cli/probe_options.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "service/cli/command_support.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

// The form checks of --text / --text-file (after those of the random probe).
absl::Status CheckTextFlags(const Flags& flags, const ProbeOptions& o) {
  const int given = flags.Has("text") + flags.Has("text-file") + flags.Has("ids-file");
  if (given > 1) {
    return absl::InvalidArgumentError(
        "give at most one of --ids-file FILE, --text TEXT (- for stdin) and --text-file FILE");
  }
  if (!o.from_text) return absl::OkStatus();
  if (flags.Has("text") && flags.Get("text").empty()) {
    return absl::InvalidArgumentError(
        "--text is empty: give the text, or --text - to read it from stdin");
  }
  if (flags.Has("text-file") && flags.Get("text-file").empty()) {
    return absl::InvalidArgumentError("--text-file needs a file name");
  }
  if (flags.Has("n") || flags.Has("seqs") || flags.Has("seed")) {
    return absl::InvalidArgumentError(
        "--n, --seqs and --seed shape the random probe; with a text the probe is BOS + the "
        "text's tokens + the same tokens");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<FlagSpec> ProbeFlagSpecs() {
  return {{"n"}, {"seqs"}, {"seed"}, {"ids-file"}, {"text"}, {"text-file"}};
}

absl::StatusOr<ProbeOptions> ParseProbeOptions(const Flags& flags) {
  ProbeOptions o;
  o.n_given = flags.Has("n");
  ATTNSCOPE_ASSIGN_OR_RETURN(o.spec.n, flags.GetInt("n", 50, 1, 65536));
  ATTNSCOPE_ASSIGN_OR_RETURN(o.spec.num_sequences,
                             flags.GetInt("seqs", 4, 1, engine::kMaxProbeSequences));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      const int64_t seed,
      flags.GetInt("seed", 0, 0, std::numeric_limits<int64_t>::max()));
  o.spec.seed = static_cast<uint64_t>(seed);
  o.ids_file = flags.Get("ids-file");
  o.from_text = flags.Has("text") || flags.Has("text-file");
  ATTNSCOPE_RETURN_IF_ERROR(CheckTextFlags(flags, o));
  if (flags.Has("ids-file") && o.ids_file.empty()) {
    return absl::InvalidArgumentError("--ids-file needs a file name");
  }
  if (!o.ids_file.empty() && (flags.Has("seqs") || flags.Has("seed"))) {
    return absl::InvalidArgumentError(
        "--seqs and --seed shape the random probe; with --ids-file the file gives the sequences");
  }
  return o;
}

absl::Status ReadProbeText(const Flags& flags, ProbeOptions* options) {
  if (!options->from_text) return absl::OkStatus();
  // The prompt readers of analyze and friends, on a copy holding only the
  // text flags (heads' --ids-file is a probe file, not a prompt).
  Flags text_only;
  if (flags.Has("text")) text_only.Set("text", flags.Get("text"));
  if (flags.Has("text-file")) text_only.Set("text-file", flags.Get("text-file"));
  ATTNSCOPE_RETURN_IF_ERROR(LoadPromptSources(text_only));
  options->text = text_only.Get("text");
  options->text_source = flags.Has("text-file") ? flags.Get("text-file")
                         : flags.Get("text") == "-" ? "stdin" : "--text";
  return absl::OkStatus();
}

absl::StatusOr<engine::Probe> BuildProbe(const engine::ModelBundle& bundle,
                                         const ProbeOptions& options) {
  const model::ModelConfig& config = bundle.config();
  engine::Probe probe;
  if (options.text.has_value()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(engine::Prompt prompt,
                               engine::PromptFromText(bundle, *options.text, false));
    ATTNSCOPE_ASSIGN_OR_RETURN(probe, engine::MakeRepeatedProbe(config, prompt.ids));
  } else if (options.ids_file.empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(probe, engine::MakeRandomProbe(config, options.spec));
  } else {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        probe, engine::ReadProbeFile(options.ids_file, options.n_given ? options.spec.n : 0));
  }
  ATTNSCOPE_RETURN_IF_ERROR(engine::ValidateProbe(config, probe));
  return probe;
}

absl::StatusOr<rpc::ProbeSource> RemoteProbeSource(const ProbeOptions& options) {
  rpc::ProbeSource source;
  if (options.text.has_value()) {
    source.text = *options.text;
  } else if (options.ids_file.empty()) {
    source.random = options.spec;
  } else {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        source.sequences,
        engine::ReadProbeFile(options.ids_file, options.n_given ? options.spec.n : 0));
  }
  return source;
}

std::string DescribeProbe(const ProbeOptions& options, const engine::Probe& probe) {
  const size_t count = probe.sequences.size();
  if (options.from_text) {
    return absl::StrCat("BOS + the ", probe.n, " tokens of the text (", options.text_source,
                        ") + the same ", probe.n, ", T = ", 2 * probe.n + 1);
  }
  const std::string shape = absl::StrCat(count, count == 1 ? " sequence" : " sequences",
                                         " of BOS + ", probe.n, " ids + the same ", probe.n);
  if (!options.ids_file.empty()) {
    return absl::StrCat(shape, " from ", options.ids_file, ", T = ", 2 * probe.n + 1);
  }
  return absl::StrCat(shape, " (ids ", options.spec.min_id, "..", options.spec.max_id, ", seed ",
                      options.spec.seed, "), T = ", 2 * probe.n + 1);
}

nlohmann::json ProbeJson(const ProbeOptions& options, const engine::Probe& probe) {
  nlohmann::json j;
  if (options.from_text) {
    j["source"] = "text";
    if (options.text_source != "--text") {
      j["path"] = options.text_source == "stdin" ? "-" : options.text_source;
    }
  } else if (options.ids_file.empty()) {
    j["source"] = "random";
    j["seed"] = options.spec.seed;
    j["min_id"] = options.spec.min_id;
    j["max_id"] = options.spec.max_id;
  } else {
    j["source"] = "file";
    j["path"] = options.ids_file;
  }
  j["n"] = probe.n;
  j["num_sequences"] = probe.sequences.size();
  j["num_tokens"] = 2 * probe.n + 1;
  j["input_ids"] = probe.sequences;
  return j;
}

}  // namespace attnscope::cli
