// The probe flags shared by `attnscope heads` and `attnscope ablate`
// (--n, --seqs, --seed, --ids-file), and how the probe is described in their
// output.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/flags.h"
#include "service/engine/head_scan.h"
#include "service/model/model_config.h"

namespace attnscope::cli {

// The flag specs of the probe options, to append to a command's own.
std::vector<FlagSpec> ProbeFlagSpecs();

// The probe options as given on the command line, checked for form only.
struct ProbeOptions {
  engine::ProbeSpec spec;  // n, num_sequences, seed
  bool n_given = false;
  std::string ids_file;    // empty: the random probe
};

// InvalidArgument (a usage error) for a malformed number, --n outside
// 1..65536, --seqs outside 1..kMaxProbeSequences, --seed negative, or
// --seqs/--seed together with --ids-file.
absl::StatusOr<ProbeOptions> ParseProbeOptions(const Flags& flags);

// Draws or reads the probe and checks it against the model (runtime errors:
// the file, or a probe that does not fit the model).
absl::StatusOr<engine::Probe> BuildProbe(const model::ModelConfig& config,
                                         const ProbeOptions& options);

// One line for the report: "4 random sequences of BOS + 50 ids + the same 50
// (ids 1000..9999, seed 0), T = 101".
std::string DescribeProbe(const ProbeOptions& options, const engine::Probe& probe);

// {"source": "random"|"file", "seed", "min_id", "max_id" | "path", "n",
// "num_sequences", "num_tokens", "input_ids" [S][2n+1]}.
nlohmann::json ProbeJson(const ProbeOptions& options, const engine::Probe& probe);

}  // namespace attnscope::cli
