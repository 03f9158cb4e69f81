#include "service/cli/probe_options.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {

std::vector<FlagSpec> ProbeFlagSpecs() { return {{"n"}, {"seqs"}, {"seed"}, {"ids-file"}}; }

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
  if (flags.Has("ids-file") && o.ids_file.empty()) {
    return absl::InvalidArgumentError("--ids-file needs a file name");
  }
  if (!o.ids_file.empty() && (flags.Has("seqs") || flags.Has("seed"))) {
    return absl::InvalidArgumentError(
        "--seqs and --seed shape the random probe; with --ids-file the file gives the sequences");
  }
  return o;
}

absl::StatusOr<engine::Probe> BuildProbe(const model::ModelConfig& config,
                                         const ProbeOptions& options) {
  engine::Probe probe;
  if (options.ids_file.empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(probe, engine::MakeRandomProbe(config, options.spec));
  } else {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        probe, engine::ReadProbeFile(options.ids_file, options.n_given ? options.spec.n : 0));
  }
  ATTNSCOPE_RETURN_IF_ERROR(engine::ValidateProbe(config, probe));
  return probe;
}

std::string DescribeProbe(const ProbeOptions& options, const engine::Probe& probe) {
  const size_t count = probe.sequences.size();
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
  if (options.ids_file.empty()) {
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
