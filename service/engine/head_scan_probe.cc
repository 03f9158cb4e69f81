// The induction probe of head_scan.h: drawn at random or read from a file,
// and checked against the model.
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/core/status_macros.h"
#include "service/engine/head_scan.h"

namespace attnscope::engine {
namespace {

// Uniform in [0, range) by rejection, so that the draw is the same in any
// language with a standard mt19937_64 (std::uniform_int_distribution is
// implementation-defined).
uint64_t Draw(std::mt19937_64& rng, uint64_t range) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / range * range;
  // Values >= limit would make the low residues more likely; redraw them.
  uint64_t u = rng();
  while (u >= limit) u = rng();
  return u % range;
}

absl::StatusOr<int64_t> ProbeBos(const model::ModelConfig& config, const ProbeSpec& spec) {
  int64_t bos = spec.bos_id;
  if (bos < 0) bos = config.bos_token_id >= 0 ? config.bos_token_id : config.eos_token_id;
  if (bos < 0) {
    return absl::InvalidArgumentError(
        "the model's config.json names no bos_token_id or eos_token_id to start the probe with; "
        "give the probe as an ids file");
  }
  if (bos >= config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the probe's BOS id ", bos,
                                                   " is outside the vocabulary [0, ",
                                                   config.vocab_size, "); give an ids file"));
  }
  return bos;
}

absl::Status CheckSpec(const model::ModelConfig& config, const ProbeSpec& spec) {
  if (spec.n < 1 || 2 * spec.n + 1 > config.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", spec.n, " does not fit: the probe has 2n+1 tokens and the model takes 1..",
        config.max_positions, ", so n must be in 1..", (config.max_positions - 1) / 2));
  }
  if (spec.num_sequences < 1 || spec.num_sequences > kMaxProbeSequences) {
    return absl::InvalidArgumentError(absl::StrCat("the number of probe sequences is ",
                                                   spec.num_sequences, "; it must be in 1..",
                                                   kMaxProbeSequences));
  }
  if (spec.min_id < 0 || spec.min_id > spec.max_id || spec.max_id >= config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "random probe ids are drawn from ", spec.min_id, "..", spec.max_id,
        ", which is not inside the model's vocabulary 0..", config.vocab_size - 1,
        "; give the probe as an ids file"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> ParseLine(const std::string& line, int line_number,
                                               const std::string& path) {
  std::vector<int64_t> ids;
  for (absl::string_view item : absl::StrSplit(line, absl::ByAnyChar(", \t\r"),
                                               absl::SkipEmpty())) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(item, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": '", item,
                                                     "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

absl::StatusOr<Probe> MakeRandomProbe(const model::ModelConfig& config, const ProbeSpec& spec) {
  ATTNSCOPE_RETURN_IF_ERROR(CheckSpec(config, spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t bos, ProbeBos(config, spec));
  std::mt19937_64 rng(spec.seed);
  const auto range = static_cast<uint64_t>(spec.max_id - spec.min_id + 1);
  Probe probe;
  probe.n = spec.n;
  for (int64_t s = 0; s < spec.num_sequences; ++s) {
    std::vector<int64_t> span(spec.n);
    for (int64_t& id : span) id = spec.min_id + static_cast<int64_t>(Draw(rng, range));
    std::vector<int64_t> sequence = {bos};
    sequence.insert(sequence.end(), span.begin(), span.end());
    sequence.insert(sequence.end(), span.begin(), span.end());
    probe.sequences.push_back(std::move(sequence));
  }
  return probe;
}

absl::StatusOr<Probe> MakeRepeatedProbe(const model::ModelConfig& config,
                                        const std::vector<int64_t>& span) {
  const auto n = static_cast<int64_t>(span.size());
  if (n < 1) return absl::InvalidArgumentError("the probe's span has no tokens; give some text");
  if (2 * n + 1 > config.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text has ", n, " tokens: BOS + the text + the text again is ", 2 * n + 1,
        " tokens, over the model's ", config.max_positions, " positions; shorten it to at most ",
        (config.max_positions - 1) / 2, " tokens"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t bos, ProbeBos(config, ProbeSpec{}));
  std::vector<int64_t> sequence = {bos};
  sequence.insert(sequence.end(), span.begin(), span.end());
  sequence.insert(sequence.end(), span.begin(), span.end());
  Probe probe;
  probe.n = n;
  probe.sequences.push_back(std::move(sequence));
  ATTNSCOPE_RETURN_IF_ERROR(ValidateProbe(config, probe));
  return probe;
}

absl::StatusOr<Probe> ReadProbeFile(const std::string& path, int64_t n) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the probe ids file ", path));
  Probe probe;
  probe.n = n;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped[0] == '#') continue;
    ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseLine(line, line_number, path));
    const auto length = static_cast<int64_t>(ids.size());
    if (probe.n == 0) {
      if (length % 2 == 0 || length < 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_number, ": ", length,
            " ids; a probe sequence has 2n+1 ids (BOS + n ids + the same n) with n >= 1"));
      }
      probe.n = (length - 1) / 2;
    }
    if (length != 2 * probe.n + 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", length,
                                                     " ids, expected 2n+1 = ", 2 * probe.n + 1,
                                                     " (n = ", probe.n, ")"));
    }
    if (static_cast<int64_t>(probe.sequences.size()) == kMaxProbeSequences) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": more than ", kMaxProbeSequences,
                                                     " probe sequences"));
    }
    probe.sequences.push_back(std::move(ids));
  }
  if (probe.sequences.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no probe sequences in the file"));
  }
  return probe;
}

absl::Status ValidateProbe(const model::ModelConfig& config, const Probe& probe) {
  if (probe.sequences.empty()) return absl::InvalidArgumentError("the probe has no sequences");
  if (probe.n < 1 || 2 * probe.n + 1 > config.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", probe.n, " does not fit: the probe has 2n+1 tokens and the model takes 1..",
        config.max_positions));
  }
  for (size_t s = 0; s < probe.sequences.size(); ++s) {
    const std::vector<int64_t>& seq = probe.sequences[s];
    if (static_cast<int64_t>(seq.size()) != 2 * probe.n + 1) {
      return absl::InvalidArgumentError(absl::StrCat("probe sequence ", s, " has ", seq.size(),
                                                     " ids, expected 2n+1 = ", 2 * probe.n + 1));
    }
    for (size_t i = 0; i < seq.size(); ++i) {
      if (seq[i] < 0 || seq[i] >= config.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "probe sequence ", s, ", position ", i, ": id ", seq[i],
            " is outside the vocabulary [0, ", config.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace attnscope::engine
