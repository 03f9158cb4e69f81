#include "service/engine/viewer_html.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

constexpr char kDataMarker[] = "__ATTNSCOPE_DATA__";
constexpr char kScriptMarker[] = "__ATTNSCOPE_SCRIPT__";
constexpr int64_t kMaxThumbSize = 48;

nlohmann::json FiniteOrNull(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) out.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  return out;
}

}  // namespace

std::string EscapeJsonForScript(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

struct ViewerPageBuilder::Head {
  z_stream z{};
  bool open = false;
  std::string packed;         // the deflate stream so far
  std::vector<float> maxima;  // per row
  std::vector<float> thumb;   // N x N cell maxima
  float sink = 0.0f;          // A[T-1, 0]
  int64_t rows = 0;           // rows done
  std::string pending;        // bytes of a row not yet complete
  bool half = false;          // the pieces' element type
  std::vector<unsigned char> quantised;
  std::vector<float> widened;
  std::vector<uint16_t> kept;  // a sparse row's keys
  ~Head() {
    if (open) deflateEnd(&z);
  }
};

namespace {

absl::Status Deflate(z_stream& z, std::string& out, const void* data, size_t n, int flush) {
  z.next_in = static_cast<Bytef*>(const_cast<void*>(data));
  z.avail_in = static_cast<uInt>(n);
  int rc = Z_OK;
  do {
    constexpr size_t kStep = 1 << 16;
    const size_t at = out.size();
    out.resize(at + kStep);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(kStep);
    rc = deflate(&z, flush);
    out.resize(at + kStep - z.avail_out);
    if (rc == Z_STREAM_ERROR) return absl::InternalError("viewer: zlib deflate failed");
  } while (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  return absl::OkStatus();
}

}  // namespace

int64_t ViewerPageBound(int64_t heads, int64_t num_tokens, int64_t row_keys) {
  const int64_t t = num_tokens, n = std::min(t, kMaxThumbSize);
  const int64_t k = row_keys <= 0 ? t : std::min(row_keys, t);
  // Rows up to 3K + 1 keys long are dense; the rest are 3K + 3 bytes.
  const int64_t dense_rows = std::min(t, 3 * k + 2);
  int64_t raw = dense_rows * (dense_rows + 1) / 2 + dense_rows;
  raw += (t - dense_rows) * (3 + 3 * k) + 4 * t;
  const int64_t packed = raw + (raw >> 12) + (raw >> 14) + (raw >> 25) + 13;  // compressBound
  return heads * ((packed + 2) / 3 * 4 + 3 + (n * n + 2) / 3 * 4 + 32) + 64 * t + (1 << 16);
}

int64_t ViewerRowKeysFor(int64_t heads, int64_t num_tokens, int64_t max_bytes) {
  if (ViewerPageBound(heads, num_tokens, num_tokens) <= max_bytes) return num_tokens;
  int64_t lo = 0, hi = num_tokens;  // bound(lo) fits (or lo = 0), bound(hi) does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (ViewerPageBound(heads, num_tokens, mid) <= max_bytes ? lo : hi) = mid;
  }
  return lo;
}

ViewerPageBuilder::ViewerPageBuilder(HeadSelection selection, int64_t num_tokens, int64_t row_keys)
    : selection_(std::move(selection)),
      tokens_(num_tokens),
      row_keys_(row_keys <= 0 ? num_tokens : std::min(row_keys, num_tokens)) {
  const int64_t t = std::max<int64_t>(tokens_, 1), n = std::min(t, kMaxThumbSize);
  row_cell_.assign(static_cast<size_t>(t), 0);
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t i = a * t / n; i < (a + 1) * t / n; ++i) row_cell_[static_cast<size_t>(i)] = a;
  }
  for (int64_t k = 0; k < selection_.size(); ++k) {
    auto head = std::make_unique<Head>();
    head->thumb.assign(static_cast<size_t>(n * n), 0.0f);
    heads_.push_back(std::move(head));
  }
}

ViewerPageBuilder::~ViewerPageBuilder() = default;

absl::Status ViewerPageBuilder::AddRow(Head& h, const float* row) {
  const int64_t i = h.rows, t = tokens_, n = std::min(t, kMaxThumbSize);
  if (!h.open) {
    if (deflateInit(&h.z, 6) != Z_OK) return absl::InternalError("viewer: zlib deflateInit failed");
    h.open = true;
  }
  float m = 0.0f;
  for (int64_t j = 0; j <= i; ++j) m = std::max(m, row[j]);  // NaN is skipped
  h.maxima.push_back(m);
  h.quantised.resize(static_cast<size_t>(i + 2));
  unsigned char* q = h.quantised.data() + 1;  // after the flag byte
  float* cells = h.thumb.data() + row_cell_[static_cast<size_t>(i)] * n;
  int64_t nonzero = 0;
  for (int64_t j = 0; j <= i; ++j) {
    const float w = row[j];
    const double level = m > 0.0f && w > 0.0f ? std::round(255.0 * w / m) : 0.0;
    q[j] = static_cast<unsigned char>(std::min(level, 255.0));
    nonzero += q[j] != 0 ? 1 : 0;
    float& cell = cells[row_cell_[static_cast<size_t>(j)]];
    cell = std::max(cell, w);
  }
  if (i == t - 1) h.sink = row[0];
  const int64_t keys = std::min(nonzero, row_keys_);
  if (i + 1 <= 2 + 3 * keys) {
    // Dense: flag 0, then the i + 1 levels.
    h.quantised[0] = 0;
    ATTNSCOPE_RETURN_IF_ERROR(
        Deflate(h.z, h.packed, h.quantised.data(), h.quantised.size(), Z_NO_FLUSH));
  } else {
    // Sparse: flag 1, the count, the keys ascending (uint16), their levels;
    // when more than K keys have a level, the K largest weights (ties: the
    // earlier key) and the row counts as truncated.
    h.kept.clear();
    for (int64_t j = 0; j <= i; ++j) {
      if (q[j] != 0) h.kept.push_back(static_cast<uint16_t>(j));
    }
    if (nonzero > keys) {
      ++truncated_rows_;
      std::nth_element(h.kept.begin(), h.kept.begin() + keys, h.kept.end(),
                       [&](uint16_t a, uint16_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      h.kept.resize(static_cast<size_t>(keys));
      std::sort(h.kept.begin(), h.kept.end());
    }
    std::string record(static_cast<size_t>(3 + 3 * keys), '\0');
    record[0] = 1;
    const auto put16 = [&](size_t at, uint16_t v) {
      record[at] = static_cast<char>(v & 0xff);
      record[at + 1] = static_cast<char>(v >> 8);
    };
    put16(1, static_cast<uint16_t>(keys));
    for (int64_t k = 0; k < keys; ++k) {
      put16(static_cast<size_t>(3 + 2 * k), h.kept[static_cast<size_t>(k)]);
      record[static_cast<size_t>(3 + 2 * keys + k)] = static_cast<char>(q[h.kept[static_cast<size_t>(k)]]);
    }
    ATTNSCOPE_RETURN_IF_ERROR(Deflate(h.z, h.packed, record.data(), record.size(), Z_NO_FLUSH));
  }
  if (++h.rows < t) return absl::OkStatus();
  // The last row: the row maxima close the stream.
  ATTNSCOPE_RETURN_IF_ERROR(Deflate(h.z, h.packed, h.maxima.data(), h.maxima.size() * sizeof(float),
                                    Z_FINISH));
  deflateEnd(&h.z);
  h.open = false;
  std::vector<float>().swap(h.maxima);
  std::vector<unsigned char>().swap(h.quantised);
  std::vector<float>().swap(h.widened);
  std::vector<uint16_t>().swap(h.kept);
  return absl::OkStatus();
}

absl::Status ViewerPageBuilder::Add(const TensorPiece& p) {
  if (p.kind != TensorPiece::Kind::kAttention) return absl::OkStatus();
  const int64_t l = selection_.LayerSlot(p.layer), k = selection_.HeadSlot(p.head);
  if (l < 0 || k < 0) return absl::OkStatus();
  if (p.rows != tokens_ || p.cols != tokens_) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: an attention of (", p.rows, ", ", p.cols,
                                                   ") for T = ", tokens_));
  }
  if (tokens_ > kViewerMaxTokens) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: T = ", tokens_, " is over the ",
                                                   kViewerMaxTokens, " tokens a page can hold"));
  }
  Head& h = *heads_[static_cast<size_t>(l * static_cast<int64_t>(selection_.heads.size()) + k)];
  const int64_t element = p.float16 ? 2 : 4, row_bytes = tokens_ * element;
  const int64_t done = h.rows * row_bytes + static_cast<int64_t>(h.pending.size());
  if (p.offset != done || done + p.size > tokens_ * row_bytes || (done > 0 && p.float16 != h.half)) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: attention of head ", p.layer, ".",
                                                   p.head, " out of order (byte ", p.offset, ")"));
  }
  h.half = p.float16;
  const char* data = p.data;
  int64_t size = p.size;
  while (size > 0) {
    const char* row = nullptr;
    if (h.pending.empty() && size >= row_bytes) {
      row = data;
      data += row_bytes;
      size -= row_bytes;
    } else {
      const int64_t take = std::min(size, row_bytes - static_cast<int64_t>(h.pending.size()));
      h.pending.append(data, static_cast<size_t>(take));
      data += take;
      size -= take;
      if (static_cast<int64_t>(h.pending.size()) < row_bytes) break;
      row = h.pending.data();
    }
    const float* floats = reinterpret_cast<const float*>(row);
    if (h.half || (reinterpret_cast<uintptr_t>(row) % alignof(float)) != 0) {
      h.widened.resize(static_cast<size_t>(tokens_));
      for (int64_t j = 0; j < tokens_; ++j) {
        if (h.half) {
          uint16_t bits;
          std::memcpy(&bits, row + 2 * j, 2);
          h.widened[static_cast<size_t>(j)] = HalfToFloat(bits);
        } else {
          std::memcpy(&h.widened[static_cast<size_t>(j)], row + 4 * j, 4);
        }
      }
      floats = h.widened.data();
    }
    ATTNSCOPE_RETURN_IF_ERROR(AddRow(h, floats));
    h.pending.clear();
  }
  return absl::OkStatus();
}

absl::Status ViewerPageBuilder::Emit(const ViewerData& d,
                                     const std::function<void(const std::string&)>& out) {
  if (d.num_layers < 1 || d.num_heads < 1 || d.num_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: layers ", d.num_layers, ", heads ",
                                                   d.num_heads, ", tokens ", d.num_tokens,
                                                   "; each must be >= 1"));
  }
  if (d.num_tokens > kViewerMaxTokens) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: T = ", d.num_tokens, " is over the ",
                                                   kViewerMaxTokens, " tokens a page can hold"));
  }
  if (d.num_tokens != tokens_ || selection_.size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: T = ", d.num_tokens, " for a page of ",
                                                   tokens_, " tokens and ", selection_.size(),
                                                   " heads"));
  }
  if (static_cast<int64_t>(d.tokens.size()) != d.num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: ", d.tokens.size(),
                                                   " token labels for T = ", d.num_tokens));
  }
  for (const auto& [name, v] : {std::pair{"z", &d.z}, std::pair{"max_norm", &d.max_norm},
                                std::pair{"entropy_nats", &d.entropy_nats}}) {
    if (!v->empty() && static_cast<int64_t>(v->size()) != d.num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("viewer: ", name, " has ", v->size(),
                                                     " values for T = ", d.num_tokens));
    }
  }
  const size_t heads = selection_.heads.size();
  for (size_t k = 0; k < heads_.size(); ++k) {
    if (heads_[k]->rows != tokens_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "viewer: the attention of head ", selection_.layers[k / heads], ".",
          selection_.heads[k % heads], " is incomplete (", heads_[k]->rows, " of ", tokens_,
          " rows)"));
    }
  }
  const int64_t n = std::min(tokens_, kMaxThumbSize);
  std::string thumbs;
  thumbs.reserve(heads_.size() * static_cast<size_t>(n * n));
  nlohmann::json sink = nlohmann::json::array();
  for (size_t l = 0; l < selection_.layers.size(); ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (size_t k = 0; k < heads; ++k) {
      const Head& h = *heads_[l * heads + k];
      row.push_back(std::isfinite(h.sink) ? nlohmann::json(h.sink) : nlohmann::json());
      for (int64_t a = 0; a < n; ++a) {
        for (int64_t b = 0; b < n; ++b) {
          // Cells above the diagonal hold no weight (keys after the query).
          const float m = b <= a ? h.thumb[static_cast<size_t>(a * n + b)] : 0.0f;
          thumbs += static_cast<char>(
              static_cast<unsigned char>(std::lround(255.0 * std::min(m, 1.0f))));
        }
      }
    }
    sink.push_back(std::move(row));
  }
  nlohmann::json meta = {{"title", d.title},
                         {"prompt", d.prompt_text},
                         {"tokens", d.tokens},
                         {"layers", selection_.layers.size()},
                         {"heads", heads},
                         {"layer_ids", selection_.layers},
                         {"head_ids", selection_.heads},
                         {"model_layers", d.num_layers},
                         {"model_heads", d.num_heads},
                         {"format", "q8row-sparse-deflate-b64"},
                         {"row_keys", row_keys_},
                         {"truncated_rows", truncated_rows_},
                         {"sink", sink},
                         {"thumb_size", n},
                         {"thumbs", absl::Base64Escape(thumbs)},
                         {"sinks", d.sinks}};
  if (!d.z.empty()) meta["z"] = FiniteOrNull(d.z);
  if (!d.max_norm.empty()) meta["norm"] = FiniteOrNull(d.max_norm);
  if (!d.entropy_nats.empty()) meta["entropy"] = FiniteOrNull(d.entropy_nats);
  std::string json =
      EscapeJsonForScript(meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  json.pop_back();  // the closing brace: the attentions follow
  json += ",\"attn\":[";

  std::string page = internal::kViewerPage;
  const size_t script = page.find(kScriptMarker);
  if (script == std::string::npos) return absl::InternalError("viewer template has no script marker");
  page.replace(script, sizeof(kScriptMarker) - 1, internal::kViewerScript);
  const size_t at = page.find(kDataMarker);
  if (at == std::string::npos) return absl::InternalError("viewer template has no data marker");
  out(page.substr(0, at));
  out(json);
  for (size_t k = 0; k < heads_.size(); ++k) {
    out(absl::StrCat(k ? ",\"" : "\"", absl::Base64Escape(heads_[k]->packed), "\""));
  }
  out("]}");
  out(page.substr(at + sizeof(kDataMarker) - 1));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ViewerPageBuilder::Render(const ViewerData& data) {
  std::string page;
  ATTNSCOPE_RETURN_IF_ERROR(Emit(data, [&](const std::string& s) { page += s; }));
  return page;
}

absl::Status ViewerPageBuilder::Write(const std::string& path, const ViewerData& data) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::InternalError(absl::StrCat("cannot write the viewer page to ", path));
  absl::Status emitted = Emit(data, [&](const std::string& s) { file << s; });
  file.close();
  if (!emitted.ok()) {
    std::remove(path.c_str());
    return emitted;
  }
  if (!file) return absl::InternalError(absl::StrCat("cannot write the viewer page to ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data) {
  const int64_t l = data.num_layers, h = data.num_heads, t = data.num_tokens;
  if (l >= 1 && h >= 1 && t >= 1 && static_cast<int64_t>(data.attentions.size()) != l * h * t * t) {
    return absl::InvalidArgumentError(absl::StrCat(
        "viewer: attentions hold ", data.attentions.size(), " floats; (L, H, T, T) = (", l, ", ",
        h, ", ", t, ", ", t, ") needs ", l * h * t * t));
  }
  ViewerPageBuilder builder(HeadSelection::All(std::max<int64_t>(l, 0), std::max<int64_t>(h, 0)),
                            t, 0);
  if (l >= 1 && h >= 1 && t >= 1) {
    for (int64_t layer = 0; layer < l; ++layer) {
      for (int64_t head = 0; head < h; ++head) {
        TensorPiece p;
        p.layer = layer;
        p.head = head;
        p.rows = p.cols = t;
        p.data = reinterpret_cast<const char*>(data.attentions.data() + (layer * h + head) * t * t);
        p.size = t * t * 4;
        ATTNSCOPE_RETURN_IF_ERROR(builder.Add(p));
      }
    }
  }
  return builder.Render(data);
}

absl::Status WriteViewerHtml(const std::string& path, const ViewerData& data) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string page, RenderViewerHtml(data));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << page;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write the viewer page to ", path));
  return absl::OkStatus();
}

}  // namespace attnscope::engine
