// The probe flags shared by `attnscope heads` and `attnscope ablate`
// (--n, --seqs, --seed, --ids-file, --text, --text-file), and how the probe
// is described in their output.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/cli/flags.h"
#include "service/engine/head_scan.h"
#include "service/engine/model_bundle.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {

// The flag specs of the probe options, to append to a command's own.
std::vector<FlagSpec> ProbeFlagSpecs();

// The probe options as given on the command line, checked for form only.
struct ProbeOptions {
  engine::ProbeSpec spec;  // n, num_sequences, seed
  bool n_given = false;
  std::string ids_file;    // empty: not from an ids file
  // --text TEXT / --text - / --text-file FILE: BOS + the text's tokens + the
  // same tokens. `text` is filled by ReadProbeText; text_source names where
  // it came from ("--text", "stdin" or the file).
  bool from_text = false;
  std::optional<std::string> text;
  std::string text_source;
};

// InvalidArgument (a usage error) for a malformed number, --n outside
// 1..65536, --seqs outside 1..kMaxProbeSequences, --seed negative, more than
// one of --ids-file, --text and --text-file, --text "", or --n/--seqs/--seed
// with a text (--seqs/--seed with --ids-file).
absl::StatusOr<ProbeOptions> ParseProbeOptions(const Flags& flags);

// Reads the text of --text -, --text-file or --text into options->text (a
// runtime error, naming the file or stdin, for a file that cannot be read,
// no content or invalid UTF-8). Nothing to do for other probes.
absl::Status ReadProbeText(const Flags& flags, ProbeOptions* options);

// Draws, reads or tokenizes the probe and checks it against the model
// (runtime errors: the file, a text the model cannot tokenize, or a probe
// that does not fit the model). A text is tokenized without special tokens.
absl::StatusOr<engine::Probe> BuildProbe(const engine::ModelBundle& bundle,
                                         const ProbeOptions& options);

// The probe as a ScanHeads/Ablate request carries it: the random spec, the
// sequences of the ids file (read here) or the text.
absl::StatusOr<rpc::ProbeSource> RemoteProbeSource(const ProbeOptions& options);

// One line for the report: "4 random sequences of BOS + 50 ids + the same 50
// (ids 1000..9999, seed 0), T = 101".
std::string DescribeProbe(const ProbeOptions& options, const engine::Probe& probe);

// {"source": "random"|"file"|"text", "seed", "min_id", "max_id" | "path"
// (files; "-" for stdin), "n", "num_sequences", "num_tokens", "input_ids"
// [S][2n+1]}.
nlohmann::json ProbeJson(const ProbeOptions& options, const engine::Probe& probe);

}  // namespace attnscope::cli
