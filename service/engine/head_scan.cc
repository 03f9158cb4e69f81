#include "service/engine/head_scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/analysis/prompt_analyzer.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

// Collects the half losses of every sequence of the batch from its logits.
class LossObserver : public model::ForwardObserver {
 public:
  explicit LossObserver(const Probe& probe)
      : probe_(probe), losses_(probe.sequences.size()), seen_(probe.sequences.size(), false) {}

  model::ObserverNeeds Needs() const override { return {false, false, false, true}; }

  void OnLogits(int sequence, const float* logits, int64_t num_tokens, int64_t vocab) override {
    if (sequence < 0 || static_cast<size_t>(sequence) >= losses_.size()) return;
    if (num_tokens != 2 * probe_.n + 1) return;
    losses_[sequence] = SequenceHalfLosses(logits, vocab, probe_.sequences[sequence], probe_.n);
    seen_[sequence] = true;
  }

  absl::StatusOr<HalfLosses> Mean() const {
    HalfLosses mean;
    for (size_t s = 0; s < losses_.size(); ++s) {
      if (!seen_[s]) {
        return absl::InternalError(absl::StrCat("no logits were published for sequence ", s));
      }
      mean.first += losses_[s].first / losses_.size();
      mean.second += losses_[s].second / losses_.size();
    }
    return mean;
  }

 private:
  const Probe& probe_;
  std::vector<HalfLosses> losses_;
  std::vector<bool> seen_;
};

// -log softmax(row)[target], in double with the max subtracted first.
double CrossEntropy(const float* row, int64_t vocab, int64_t target) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return -(static_cast<double>(row[target]) - max - std::log(sum));
}

// Mean loss of the targets at positions [first, last] (row p-1 predicts p).
double SpanLoss(const float* logits, int64_t vocab, const std::vector<int64_t>& ids,
                int64_t first, int64_t last) {
  if (last < first) return 0;
  double total = 0;
  for (int64_t p = first; p <= last; ++p) {
    total += CrossEntropy(logits + (p - 1) * vocab, vocab, ids[p]);
  }
  return total / static_cast<double>(last - first + 1);
}

analysis::HeadGrid ZeroGrid(int64_t layers, int64_t heads) {
  return analysis::HeadGrid(layers, std::vector<double>(heads, 0.0));
}

// grid += part / count, entry by entry (shapes already checked equal).
void AddScaled(analysis::HeadGrid& grid, const analysis::HeadGrid& part, double count) {
  for (size_t l = 0; l < grid.size(); ++l) {
    for (size_t h = 0; h < grid[l].size(); ++h) grid[l][h] += part[l][h] / count;
  }
}

absl::Status CheckStatsShape(const analysis::PromptStats& s, int64_t layers, int64_t heads) {
  const auto fits = [&](const analysis::HeadGrid& g) {
    return static_cast<int64_t>(g.size()) == layers &&
           std::all_of(g.begin(), g.end(),
                       [&](const auto& row) { return static_cast<int64_t>(row.size()) == heads; });
  };
  if (fits(s.prev_token_score) && fits(s.induction_score) && fits(s.sink_score)) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("the analyzer's head grids are not ", layers, " x ",
                                          heads, " as the model config says"));
}

}  // namespace

HalfLosses SequenceHalfLosses(const float* logits, int64_t vocab, const std::vector<int64_t>& ids,
                              int64_t n) {
  HalfLosses loss;
  loss.first = SpanLoss(logits, vocab, ids, 2, n);
  loss.second = SpanLoss(logits, vocab, ids, n + 2, 2 * n);
  return loss;
}

absl::StatusOr<HeadScan> ScanHeads(const model::LanguageModel& model, const Probe& probe,
                                   int64_t query_block_size, std::function<bool()> should_stop) {
  const model::ModelConfig& config = model.config();
  ATTNSCOPE_RETURN_IF_ERROR(ValidateProbe(config, probe));
  analysis::AnalysisOptions options;
  options.induction_n = probe.n;
  std::vector<std::unique_ptr<analysis::PromptAnalyzer>> analyzers;
  LossObserver losses(probe);
  std::vector<model::ForwardObserver*> observers = {&losses};
  for (size_t s = 0; s < probe.sequences.size(); ++s) {
    analyzers.push_back(std::make_unique<analysis::PromptAnalyzer>(options, static_cast<int>(s)));
    observers.push_back(analyzers.back().get());
  }
  model::ForwardOptions forward;
  forward.query_block_size = query_block_size;
  forward.should_stop = std::move(should_stop);
  ATTNSCOPE_RETURN_IF_ERROR(model.Forward(probe.sequences, forward, observers));

  HeadScan scan;
  scan.n = probe.n;
  scan.num_sequences = static_cast<int64_t>(probe.sequences.size());
  scan.prev_token = scan.induction = scan.sink = ZeroGrid(config.num_layers, config.num_heads);
  const double count = static_cast<double>(probe.sequences.size());
  for (const auto& analyzer : analyzers) {
    ATTNSCOPE_ASSIGN_OR_RETURN(analysis::PromptStats stats, analyzer->Finish());
    ATTNSCOPE_RETURN_IF_ERROR(CheckStatsShape(stats, config.num_layers, config.num_heads));
    AddScaled(scan.prev_token, stats.prev_token_score, count);
    AddScaled(scan.induction, stats.induction_score, count);
    AddScaled(scan.sink, stats.sink_score, count);
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(scan.loss, losses.Mean());
  return scan;
}

absl::Status CheckHeads(const model::ModelConfig& config,
                        const std::vector<model::HeadRef>& heads) {
  for (const model::HeadRef& h : heads) {
    if (h.layer < 0 || h.layer >= config.num_layers || h.head < 0 || h.head >= config.num_heads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head ", HeadName(h), " does not exist: the model has layers 0..", config.num_layers - 1,
          " and heads 0..", config.num_heads - 1));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HalfLosses> ProbeLosses(const model::LanguageModel& model, const Probe& probe,
                                       const std::vector<model::HeadRef>& ablate,
                                       model::AblationMode mode,
                                       std::function<bool()> should_stop) {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateProbe(model.config(), probe));
  ATTNSCOPE_RETURN_IF_ERROR(CheckHeads(model.config(), ablate));
  LossObserver losses(probe);
  model::ForwardOptions forward;
  forward.ablate = ablate;
  forward.ablation_mode = mode;
  forward.should_stop = std::move(should_stop);
  ATTNSCOPE_RETURN_IF_ERROR(model.Forward(probe.sequences, forward, {&losses}));
  return losses.Mean();
}

absl::StatusOr<std::vector<AblationRow>> AblationTable(const model::LanguageModel& model,
                                                       const Probe& probe,
                                                       const std::vector<model::HeadRef>& heads,
                                                       model::AblationMode mode,
                                                       std::function<bool()> should_stop) {
  if (heads.empty()) return absl::InvalidArgumentError("no heads to ablate: list at least one");
  ATTNSCOPE_RETURN_IF_ERROR(CheckHeads(model.config(), heads));
  std::vector<std::vector<model::HeadRef>> sets = {{}};
  for (const model::HeadRef& h : heads) sets.push_back({h});
  if (heads.size() > 1) sets.push_back(heads);
  std::vector<AblationRow> rows;
  for (auto& set : sets) {
    ATTNSCOPE_ASSIGN_OR_RETURN(HalfLosses loss, ProbeLosses(model, probe, set, mode, should_stop));
    rows.push_back(AblationRow{std::move(set), loss});
  }
  return rows;
}

std::vector<RankedHead> TopHeads(const analysis::HeadGrid& grid, int k) {
  std::vector<RankedHead> all;
  for (size_t l = 0; l < grid.size(); ++l) {
    for (size_t h = 0; h < grid[l].size(); ++h) {
      if (!std::isnan(grid[l][h])) {
        all.push_back({static_cast<int>(l), static_cast<int>(h), grid[l][h]});
      }
    }
  }
  // stable_sort keeps the (layer, head) order among equal scores.
  std::stable_sort(all.begin(), all.end(),
                   [](const RankedHead& a, const RankedHead& b) { return a.score > b.score; });
  if (k >= 0 && all.size() > static_cast<size_t>(k)) all.resize(k);
  return all;
}

absl::StatusOr<std::vector<model::HeadRef>> ParseHeadList(const std::string& text) {
  std::vector<model::HeadRef> heads;
  std::set<std::pair<int, int>> seen;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, '.');
    int layer = -1, head = -1;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &layer) ||
        !absl::SimpleAtoi(parts[1], &head) || layer < 0 || head < 0 ||
        parts[0].find_first_not_of("0123456789") != absl::string_view::npos ||
        parts[1].find_first_not_of("0123456789") != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad head '", item, "' in '", text, "': give LAYER.HEAD pairs like 5.1,5.5"));
    }
    if (!seen.insert({layer, head}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("head ", layer, ".", head, " is listed twice in '", text, "'"));
    }
    heads.push_back({layer, head});
  }
  return heads;
}

std::string HeadName(const model::HeadRef& head) { return absl::StrCat(head.layer, ".", head.head); }

}  // namespace attnscope::engine
