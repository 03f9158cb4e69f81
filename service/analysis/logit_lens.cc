#include "service/analysis/logit_lens.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/parallel.h"
#include "service/core/vector_math.h"

namespace attnscope::analysis {
namespace {

// The rank of `next` in z[0..vocab): how many tokens come before it, larger
// logits first and ties by lower id.
int64_t RankOf(const float* z, int64_t vocab, int64_t next) {
  const float target = z[next];
  int64_t rank = 0;
  for (int64_t v = 0; v < vocab; ++v) rank += z[v] > target || (z[v] == target && v < next);
  return rank;
}

// "every position", or the caller's, checked against T.
absl::StatusOr<std::vector<int64_t>> ChosenPositions(const std::vector<int64_t>& asked,
                                                     int64_t num_tokens) {
  if (asked.empty()) {
    std::vector<int64_t> all(static_cast<size_t>(num_tokens));
    for (int64_t i = 0; i < num_tokens; ++i) all[static_cast<size_t>(i)] = i;
    return all;
  }
  for (size_t k = 0; k < asked.size(); ++k) {
    if (asked[k] < 0 || asked[k] >= num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("logit lens position ", asked[k],
                                                     " is outside the prompt's 0..",
                                                     num_tokens - 1));
    }
    if (k > 0 && asked[k] <= asked[k - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit lens positions must be ascending without repeats; ", asked[k],
                       " follows ", asked[k - 1]));
    }
  }
  return asked;
}

}  // namespace

LensCell LensRow(const float* z, int64_t vocab, int64_t top_k, int64_t next) {
  LensCell cell;
  const vmath::LogitRowStats stats = vmath::LogitRow(z, vocab);
  cell.entropy = stats.entropy;
  if (next >= 0 && next < vocab) {
    cell.next_p = std::exp(static_cast<double>(z[next]) - stats.log_z);
    cell.next_rank = RankOf(z, vocab, next);
  } else {
    cell.next_p = std::numeric_limits<double>::quiet_NaN();
  }
  const int64_t keep = std::max<int64_t>(0, std::min(top_k, vocab));
  std::vector<int64_t> best(static_cast<size_t>(keep));
  const int64_t found = keep > 0 ? vmath::TopK(z, vocab, keep, best.data()) : 0;
  for (int64_t k = 0; k < found; ++k) {
    const int64_t id = best[static_cast<size_t>(k)];
    cell.top.push_back({id, std::exp(static_cast<double>(z[id]) - stats.log_z), ""});
  }
  return cell;
}

LogitLensObserver::LogitLensObserver(LensOptions options, int64_t num_states, int64_t vocab,
                                     LensReadOut read_out)
    : options_(std::move(options)), num_states_(num_states), vocab_(vocab),
      read_out_(std::move(read_out)) {}

model::ObserverNeeds LogitLensObserver::Needs() const {
  model::ObserverNeeds needs;
  needs.hidden_states = true;
  return needs;
}

void LogitLensObserver::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence != 0) return;
  status_ = absl::OkStatus();
  lens_ = LogitLens();
  lens_.num_tokens = num_tokens;
  lens_.vocab = vocab_;
  seen_.assign(static_cast<size_t>(num_states_), false);
  if (options_.chunk_rows < 1) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("logit lens chunk_rows is ", options_.chunk_rows, "; it must be at least 1"));
    return;
  }
  absl::StatusOr<std::vector<int64_t>> positions = ChosenPositions(options_.positions, num_tokens);
  if (!positions.ok()) {
    status_ = positions.status();
    return;
  }
  lens_.positions = std::move(*positions);
  lens_.cells.assign(static_cast<size_t>(num_states_),
                     std::vector<LensCell>(lens_.positions.size()));
}

void LogitLensObserver::OnHiddenState(int sequence, int state, const float* x,
                                      int64_t num_tokens, int64_t width) {
  if (sequence != 0 || !status_.ok()) return;
  if (state < 0 || state >= num_states_ || num_tokens != lens_.num_tokens) {
    status_ = absl::InternalError(absl::StrCat("logit lens: hidden state ", state, " of ",
                                               num_tokens, " rows does not fit a model of ",
                                               num_states_, " states and a prompt of ",
                                               lens_.num_tokens, " tokens"));
    return;
  }
  ReadState(state, x, width);
  if (!status_.ok()) return;
  seen_[static_cast<size_t>(state)] = true;
  if (listener_) listener_(state, lens_.cells[static_cast<size_t>(state)]);
}

// The chosen rows, `chunk_rows` at a time: gathered, read out, reduced to
// their cells; the buffers are reused across chunks.
void LogitLensObserver::ReadState(int state, const float* x, int64_t width) {
  const auto count = static_cast<int64_t>(lens_.positions.size());
  const int64_t chunk = std::min(options_.chunk_rows, std::max<int64_t>(count, 1));
  std::vector<float> rows(static_cast<size_t>(chunk * width));            // (chunk, width)
  std::vector<float> logits(static_cast<size_t>(chunk) * static_cast<size_t>(vocab_));  // (chunk, V)
  const std::vector<int64_t>& ids = options_.input_ids;
  const bool with_ids = static_cast<int64_t>(ids.size()) == lens_.num_tokens;
  std::vector<LensCell>& cells = lens_.cells[static_cast<size_t>(state)];
  for (int64_t begin = 0; begin < count; begin += chunk) {
    const int64_t n = std::min(chunk, count - begin);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t position = lens_.positions[static_cast<size_t>(begin + r)];
      std::copy(x + position * width, x + (position + 1) * width, rows.begin() + r * width);
    }
    status_ = read_out_(state, rows.data(), n, logits.data());
    if (!status_.ok()) return;
    core::ParallelFor(n, 1, [&](int64_t first, int64_t end) {
      for (int64_t r = first; r < end; ++r) {
        const int64_t position = lens_.positions[static_cast<size_t>(begin + r)];
        const int64_t next =
            with_ids && position + 1 < lens_.num_tokens ? ids[static_cast<size_t>(position + 1)] : -1;
        cells[static_cast<size_t>(begin + r)] =
            LensRow(logits.data() + r * vocab_, vocab_, options_.top_k, next);
      }
    });
  }
}

absl::StatusOr<LogitLens> LogitLensObserver::Finish() {
  if (!status_.ok()) return status_;
  for (size_t s = 0; s < seen_.size(); ++s) {
    if (!seen_[s]) {
      return absl::FailedPreconditionError(
          absl::StrCat("logit lens: hidden state ", s, " never arrived"));
    }
  }
  if (seen_.empty()) return absl::FailedPreconditionError("logit lens: the pass never began");
  return std::move(lens_);
}

}  // namespace attnscope::analysis
