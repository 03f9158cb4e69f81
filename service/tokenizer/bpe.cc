#include "service/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/core/utf8.h"

namespace attnscope::tokenizer {
namespace {

constexpr size_t kMaxQuotedLine = 80;

// absl here is built with its own string_view type, distinct from std's.
absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

std::string QuoteLine(std::string_view line) {
  std::string shown = SanitizeUtf8(line.substr(0, kMaxQuotedLine));
  if (line.size() > kMaxQuotedLine) shown += "...";
  return absl::StrCat("'", shown, "'");
}

// Splits on runs of spaces and tabs, dropping empty fields.
std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t begin = line.find_first_not_of(" \t", pos);
    if (begin == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t", begin);
    if (end == std::string_view::npos) end = line.size();
    fields.push_back(line.substr(begin, end - begin));
    pos = end;
  }
  return fields;
}

// Calls `fn(line_number, line)` for every '\n'-separated line (1-based),
// stopping at the first non-OK status.
template <typename Fn>
absl::Status ForEachLine(std::string_view text, Fn fn) {
  int32_t line_number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    absl::Status status = fn(++line_number, text.substr(pos, end - pos));
    if (!status.ok()) return status;
    pos = end + 1;
  }
  return absl::OkStatus();
}

// One symbol of the word being merged; symbols form a doubly linked list in
// text order so a merge is O(1). A merged-away symbol gets alive = false.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

}  // namespace

absl::StatusOr<BpeMerges> BpeMerges::Parse(
    std::string_view text, std::string_view path,
    const std::unordered_map<std::string, int32_t>& vocab) {
  BpeMerges result;
  absl::Status status = ForEachLine(text, [&](int32_t line_number, std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.substr(0, 8) == "#version") return absl::OkStatus();
    const std::vector<std::string_view> parts = SplitFields(line);
    if (parts.empty()) return absl::OkStatus();
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          Absl(path), " line ", line_number, ": expected 2 symbols separated by a space, got ",
          parts.size(), " in ", QuoteLine(line)));
    }
    const std::string names[3] = {std::string(parts[0]), std::string(parts[1]),
                                  std::string(parts[0]) + std::string(parts[1])};
    int32_t ids[3];
    for (int i = 0; i < 3; ++i) {
      auto it = vocab.find(names[i]);
      if (it == vocab.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            Absl(path), " line ", line_number, ": ", i == 2 ? "merged token " : "symbol ",
            QuoteLine(names[i]), " is not in the vocabulary (vocab.json)"));
      }
      ids[i] = it->second;
    }
    result.merges_.insert_or_assign(Key(ids[0], ids[1]), Merge{line_number, ids[2]});
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return result;
}

const BpeMerges::Merge* BpeMerges::Find(int32_t left, int32_t right) const {
  auto it = merges_.find(Key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<int32_t> BpeMerges::Apply(const std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2) return symbols;
  std::vector<Symbol> word(symbols.size());
  for (int32_t i = 0; i < n; ++i) word[i] = Symbol{symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  // (rank, position of the pair's left symbol). Entries go stale when a
  // neighbour merges; they are re-checked against the current pair on use.
  using Candidate = std::pair<int32_t, int32_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t left) {
    if (left < 0 || word[left].next < 0) return;
    if (const Merge* m = Find(word[left].id, word[word[left].next].id)) heap.push({m->rank, left});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  std::vector<int32_t> batch;
  while (!heap.empty()) {
    // All occurrences of the lowest-ranked pair present now, merged left to
    // right before any pair created by these merges is considered: this is
    // exactly one iteration of encoder.py's loop.
    const int32_t rank = heap.top().first;
    batch.clear();
    while (!heap.empty() && heap.top().first == rank) {
      batch.push_back(heap.top().second);
      heap.pop();
    }
    std::sort(batch.begin(), batch.end());
    for (int32_t pos : batch) {
      Symbol& left = word[pos];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = word[left.next];
      const Merge* m = Find(left.id, right.id);
      if (m == nullptr || m->rank != rank) continue;  // stale candidate
      left.id = m->merged_id;
      right.alive = false;
      left.next = right.next;
      if (left.next >= 0) word[left.next].prev = pos;
      push_pair(left.prev);
      push_pair(pos);
    }
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i >= 0; i = word[i].next) out.push_back(word[i].id);
  return out;
}

}  // namespace attnscope::tokenizer
