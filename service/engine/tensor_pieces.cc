#include "service/engine/tensor_pieces.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace attnscope::engine {
namespace {

int64_t Slot(const std::vector<int64_t>& sorted, int64_t value) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), value);
  return it != sorted.end() && *it == value ? it - sorted.begin() : -1;
}

absl::StatusOr<std::vector<int64_t>> Checked(const std::vector<int64_t>& given, int64_t limit,
                                             const std::string& flag, const char* what) {
  std::vector<int64_t> out;
  if (given.empty()) {
    for (int64_t i = 0; i < limit; ++i) out.push_back(i);
    return out;
  }
  for (int64_t i : given) {
    if (i < 0 || i >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what, " ", i,
                                                     " is not one of this model's ", limit, " ",
                                                     what, "s (0-", limit - 1, ")"));
    }
    out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

HeadSelection HeadSelection::All(int64_t num_layers, int64_t num_heads) {
  HeadSelection s;
  for (int64_t l = 0; l < num_layers; ++l) s.layers.push_back(l);
  for (int64_t h = 0; h < num_heads; ++h) s.heads.push_back(h);
  return s;
}

int64_t HeadSelection::LayerSlot(int64_t layer) const { return Slot(layers, layer); }
int64_t HeadSelection::HeadSlot(int64_t head) const { return Slot(heads, head); }

absl::StatusOr<std::vector<int64_t>> ParseIndexList(const std::string& text,
                                                    const std::string& flag) {
  std::vector<int64_t> out;
  if (text == "all") return out;
  auto bad = [&](absl::string_view item, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "': '", item, "' ", why,
        "; give indices and ranges such as 0,5,10-13, or all"));
  };
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) return bad(item, "is empty");
    int64_t first = 0, last = 0;
    const size_t dash = item.find('-', 1);
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(item, &first) || first < 0) return bad(item, "is not an index >= 0");
      last = first;
    } else if (!absl::SimpleAtoi(item.substr(0, dash), &first) ||
               !absl::SimpleAtoi(item.substr(dash + 1), &last) || first < 0 || last < 0) {
      return bad(item, "is not a range FIRST-LAST of indices >= 0");
    } else if (last < first) {
      return bad(item, "is a reversed range");
    } else if (last - first >= (int64_t{1} << 20)) {
      return bad(item, "is too long a range");
    }
    for (int64_t i = first; i <= last; ++i) out.push_back(i);
  }
  return out;
}

absl::StatusOr<HeadSelection> SelectHeads(const std::vector<int64_t>& layers,
                                          const std::vector<int64_t>& heads, int64_t num_layers,
                                          int64_t num_heads, const std::string& layer_flag,
                                          const std::string& head_flag) {
  HeadSelection s;
  auto l = Checked(layers, num_layers, layer_flag, "layer");
  if (!l.ok()) return l.status();
  auto h = Checked(heads, num_heads, head_flag, "head");
  if (!h.ok()) return h.status();
  s.layers = std::move(*l);
  s.heads = std::move(*h);
  return s;
}

std::string FormatIndexList(const std::vector<int64_t>& indices) {
  std::string out;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", indices[i]);
    if (j > i) absl::StrAppend(&out, "-", indices[j]);
    i = j + 1;
  }
  return out;
}

PiecePublisher::PiecePublisher(TensorRequest request, TensorPieceSink* sink)
    : request_(std::move(request)), sink_(sink) {}

model::ObserverNeeds PiecePublisher::Needs() const {
  model::ObserverNeeds needs;
  needs.attention = request_.attention.size() > 0;
  needs.hidden_states = request_.hidden_states;
  needs.logits = request_.logits;
  needs.logits_in_blocks = request_.logits;
  return needs;
}

void PiecePublisher::OnBegin(int sequence, int64_t num_tokens) {
  if (sequence == 0) tokens_ = num_tokens;
}

void PiecePublisher::Send(const TensorPiece& piece) {
  if (status_.ok()) status_ = sink_->Add(piece);
}

void PiecePublisher::OnHiddenState(int sequence, int state, const float* x, int64_t num_tokens,
                                   int64_t width) {
  if (sequence != 0 || !request_.hidden_states) return;
  TensorPiece p;
  p.kind = TensorPiece::Kind::kHiddenState;
  p.layer = state;
  p.rows = num_tokens;
  p.cols = width;
  p.data = reinterpret_cast<const char*>(x);
  p.size = num_tokens * width * 4;
  Send(p);
}

void PiecePublisher::OnAttention(const model::AttentionBlock& b) {
  if (b.sequence != 0 || request_.attention.LayerSlot(b.layer) < 0) return;
  const int64_t rows = b.query_end - b.query_begin, t = b.num_keys;
  for (int64_t h = 0; h < b.num_heads; ++h) {
    if (request_.attention.HeadSlot(h) < 0) continue;
    TensorPiece p;
    p.kind = TensorPiece::Kind::kAttention;
    p.layer = b.layer;
    p.head = h;
    p.rows = t;
    p.cols = t;
    p.offset = b.query_begin * t * 4;
    p.data = reinterpret_cast<const char*>(b.probs + h * rows * t);
    p.size = rows * t * 4;
    Send(p);
  }
}

void PiecePublisher::OnLogitsBlock(int sequence, int64_t row_begin, const float* logits,
                                   int64_t rows, int64_t num_tokens, int64_t vocab) {
  if (sequence != 0 || !request_.logits) return;
  TensorPiece p;
  p.kind = TensorPiece::Kind::kLogits;
  p.rows = num_tokens;
  p.cols = vocab;
  p.offset = row_begin * vocab * 4;
  p.data = reinterpret_cast<const char*>(logits);
  p.size = rows * vocab * 4;
  Send(p);
}

}  // namespace attnscope::engine
