// Head scans and head ablation on the induction probe of service/analysis/definitions.md
// ("Induction and ablation protocol"): BOS, r_1..r_n, r_1..r_n. Torch-free.
//
// A probe is a batch of sequences of T = 2n+1 ids that all run through one
// forward pass, so that mean-ablation averages over all positions and all
// sequences of the probe, as the protocol says.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/analysis/prompt_stats.h"
#include "service/model/language_model.h"
#include "service/model/model_config.h"

namespace attnscope::engine {

// The protocol's random probe.
struct ProbeSpec {
  int64_t n = 50;              // length of the repeated span, >= 1
  int64_t num_sequences = 4;   // 1..kMaxProbeSequences
  uint64_t seed = 0;
  int64_t min_id = 1000;       // ids drawn uniformly from [min_id, max_id]
  int64_t max_id = 9999;
  int64_t bos_id = -1;         // -1: the config's bos_token_id, else its eos_token_id
};

constexpr int64_t kMaxProbeSequences = 1024;

struct Probe {
  int64_t n = 0;
  std::vector<std::vector<int64_t>> sequences;  // each BOS + n ids + the same n ids
};

// Draws the probe. Generator (so that another language can reproduce it): one
// std::mt19937_64 seeded with `seed`; for sequence s = 0.. and k = 0..n-1 in
// that order, r = min_id + u % R with R = max_id - min_id + 1 and u the first
// raw 64-bit output with u < floor((2^64 - 1) / R) * R (rejection keeps it
// uniform).
// InvalidArgument naming the value and the limit: n < 1, 2n+1 above the
// model's max_positions, num_sequences outside 1..kMaxProbeSequences,
// min_id > max_id or an id range outside the vocabulary (the message suggests
// an ids file), no BOS id in the config and none given, BOS outside the vocabulary.
absl::StatusOr<Probe> MakeRandomProbe(const model::ModelConfig& config, const ProbeSpec& spec);

// One sequence BOS + span + span (n = span.size()), e.g. a text's tokens
// repeated: the classic induction probe on real text. BOS as in ProbeSpec's
// default. InvalidArgument for an empty span, 2n+1 over max_positions (the
// message says how many tokens fit), no BOS id, or an id outside the
// vocabulary (ValidateProbe).
absl::StatusOr<Probe> MakeRepeatedProbe(const model::ModelConfig& config,
                                        const std::vector<int64_t>& span);

// Reads probe sequences from `path`: one sequence per line, ids separated by
// commas and/or whitespace; blank lines and lines starting with '#' are
// skipped. The repeat structure is the caller's business; each line must
// have 2n+1 ids, and n = (length - 1) / 2 of the first line when `n` is 0.
// NotFound for a missing file; InvalidArgument naming the line for a bad id,
// an even length (n = 0), or a length other than 2n+1; no sequences; more
// than kMaxProbeSequences.
absl::StatusOr<Probe> ReadProbeFile(const std::string& path, int64_t n = 0);

// InvalidArgument naming the sequence (and position) when the probe does not
// fit the model: no sequences, n < 1, a length other than 2n+1, more than
// max_positions tokens, an id outside [0, vocab).
absl::Status ValidateProbe(const model::ModelConfig& config, const Probe& probe);

// Mean next-token cross-entropy (nats) over the targets of each half, mean
// over the sequences: first half targets at positions 2..n (predicted by
// logits rows 1..n-1), second half at n+2..2n (rows n+1..2n-1). 0 for a half
// with no targets (n = 1).
struct HalfLosses {
  double first = 0;
  double second = 0;
};

// The half losses of one sequence from its logits (2n+1, vocab), row-major,
// with log-softmax in double. `ids` has 2n+1 entries in [0, vocab).
HalfLosses SequenceHalfLosses(const float* logits, int64_t vocab, const std::vector<int64_t>& ids,
                              int64_t n);

struct HeadScan {
  int64_t n = 0;
  int64_t num_sequences = 0;
  // [L][H], each the mean over the probe's sequences.
  analysis::HeadGrid prev_token;  // mean_{i>=1} A[l,h,i,i-1]
  analysis::HeadGrid induction;   // mean_{i=n+1..2n} A[l,h,i,i-n+1]
  analysis::HeadGrid sink;        // A[l,h,T-1,0]
  HalfLosses loss;
};

// One forward pass of the whole probe (query_block_size and should_stop as
// in model::ForwardOptions), with a PromptAnalyzer per sequence. Errors:
// those of ValidateProbe, of the forward pass (Cancelled once should_stop
// turns true) and of the analyzer.
absl::StatusOr<HeadScan> ScanHeads(const model::LanguageModel& model, const Probe& probe,
                                   int64_t query_block_size = 0,
                                   std::function<bool()> should_stop = nullptr);

// The half losses of the probe with `ablate` switched off as `mode` says (no
// heads: the baseline). One forward pass of the whole batch. Errors: those of
// ValidateProbe and CheckHeads, and of the forward pass (Cancelled once
// should_stop turns true).
absl::StatusOr<HalfLosses> ProbeLosses(const model::LanguageModel& model, const Probe& probe,
                                       const std::vector<model::HeadRef>& ablate,
                                       model::AblationMode mode,
                                       std::function<bool()> should_stop = nullptr);

// InvalidArgument "head L.H does not exist: the model has layers 0..L-1 and
// heads 0..H-1" for the first head out of range.
absl::Status CheckHeads(const model::ModelConfig& config, const std::vector<model::HeadRef>& heads);

struct AblationRow {
  std::vector<model::HeadRef> heads;  // empty: the baseline
  HalfLosses loss;
};

// The seed's table: the baseline, each listed head alone, then all of them
// together (only when more than one is listed). `heads` must not be empty.
// should_stop as in ProbeLosses.
absl::StatusOr<std::vector<AblationRow>> AblationTable(const model::LanguageModel& model,
                                                       const Probe& probe,
                                                       const std::vector<model::HeadRef>& heads,
                                                       model::AblationMode mode,
                                                       std::function<bool()> should_stop = nullptr);

struct RankedHead {
  int layer = 0;
  int head = 0;
  double score = 0;
};

// The `k` highest entries of a grid (fewer if it is smaller), highest first;
// equal scores in (layer, head) order. NaN entries are never ranked.
std::vector<RankedHead> TopHeads(const analysis::HeadGrid& grid, int k);

// "5.1" -> {5, 1}; "5.1,5.5" -> both. InvalidArgument naming the bad item for
// anything but comma-separated LAYER.HEAD pairs of non-negative integers, an
// empty list or a head listed twice. Ranges are checked by CheckHeads.
absl::StatusOr<std::vector<model::HeadRef>> ParseHeadList(const std::string& text);

// "5.1"
std::string HeadName(const model::HeadRef& head);

}  // namespace attnscope::engine
