#include "service/engine/viewer_html.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

constexpr char kDataMarker[] = "__ATTNSCOPE_DATA__";
constexpr char kScriptMarker[] = "__ATTNSCOPE_SCRIPT__";
constexpr int64_t kMaxThumbSize = 48;

// One head's bytes before compression: the quantised lower triangle, then
// the row maxima as little-endian float32 (x86 and ARM Linux are little-endian).
std::string QuantiseHead(const float* head, int64_t t) {
  std::string out(static_cast<size_t>(t * (t + 1) / 2 + 4 * t), '\0');
  size_t at = 0;
  std::vector<float> maxima(static_cast<size_t>(t), 0.0f);
  for (int64_t i = 0; i < t; ++i) {
    const float* row = head + i * t;
    float m = 0.0f;
    for (int64_t j = 0; j <= i; ++j) m = std::max(m, row[j]);  // NaN is skipped
    maxima[static_cast<size_t>(i)] = m;
    for (int64_t j = 0; j <= i; ++j) {
      const float w = row[j];
      const double q = m > 0.0f && w > 0.0f ? std::round(255.0 * w / m) : 0.0;
      out[at++] = static_cast<char>(static_cast<unsigned char>(std::min(q, 255.0)));
    }
  }
  std::memcpy(out.data() + at, maxima.data(), maxima.size() * sizeof(float));
  return out;
}

absl::StatusOr<std::string> Deflate(const std::string& bytes) {
  uLongf size = compressBound(static_cast<uLong>(bytes.size()));
  std::string out(size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                           reinterpret_cast<const Bytef*>(bytes.data()),
                           static_cast<uLong>(bytes.size()), 6);
  if (rc != Z_OK) return absl::InternalError(absl::StrCat("viewer: zlib compress2 failed (", rc, ")"));
  out.resize(size);
  return out;
}

// N x N block maxima of one head, as bytes round(255 * max).
void AppendThumb(const float* head, int64_t t, int64_t n, std::string& out) {
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t b = 0; b < n; ++b) {
      float m = 0.0f;
      for (int64_t i = a * t / n; i < (a + 1) * t / n; ++i) {
        const int64_t j_end = std::min((b + 1) * t / n, i + 1);
        for (int64_t j = b * t / n; j < j_end; ++j) m = std::max(m, head[i * t + j]);
      }
      out += static_cast<char>(static_cast<unsigned char>(std::lround(255.0 * std::min(m, 1.0f))));
    }
  }
}

// Inside <script>, "</script" or "<!--" in a token would end or confuse the
// element; '<' only occurs inside JSON strings, where \u003c means the same.
std::string EscapeForScript(const std::string& json) {
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

nlohmann::json FiniteOrNull(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) out.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  return out;
}

absl::Status CheckData(const ViewerData& d) {
  if (d.num_layers < 1 || d.num_heads < 1 || d.num_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: layers ", d.num_layers, ", heads ",
                                                   d.num_heads, ", tokens ", d.num_tokens,
                                                   "; each must be >= 1"));
  }
  if (static_cast<int64_t>(d.tokens.size()) != d.num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("viewer: ", d.tokens.size(),
                                                   " token labels for T = ", d.num_tokens));
  }
  const int64_t expected = d.num_layers * d.num_heads * d.num_tokens * d.num_tokens;
  if (static_cast<int64_t>(d.attentions.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "viewer: attentions hold ", d.attentions.size(), " floats; (L, H, T, T) = (",
        d.num_layers, ", ", d.num_heads, ", ", d.num_tokens, ", ", d.num_tokens, ") needs ",
        expected));
  }
  for (const auto& [name, v] : {std::pair{"z", &d.z}, std::pair{"max_norm", &d.max_norm},
                                std::pair{"entropy_nats", &d.entropy_nats}}) {
    if (!v->empty() && static_cast<int64_t>(v->size()) != d.num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("viewer: ", name, " has ", v->size(),
                                                     " values for T = ", d.num_tokens));
    }
  }
  return absl::OkStatus();
}

// The metadata (everything but "attn") as one JSON object.
nlohmann::json Metadata(const ViewerData& d) {
  const int64_t t = d.num_tokens, n = std::min(t, kMaxThumbSize);
  nlohmann::json sink = nlohmann::json::array();
  std::string thumbs;
  thumbs.reserve(static_cast<size_t>(d.num_layers * d.num_heads * n * n));
  for (int64_t l = 0; l < d.num_layers; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t h = 0; h < d.num_heads; ++h) {
      const float* head = d.attentions.data() + (l * d.num_heads + h) * t * t;
      const float s = head[(t - 1) * t];
      row.push_back(std::isfinite(s) ? nlohmann::json(s) : nlohmann::json());
      AppendThumb(head, t, n, thumbs);
    }
    sink.push_back(std::move(row));
  }
  nlohmann::json meta = {{"title", d.title},   {"prompt", d.prompt_text},
                         {"tokens", d.tokens}, {"layers", d.num_layers},
                         {"heads", d.num_heads}, {"format", "q8row-deflate-b64"},
                         {"sink", sink},       {"thumb_size", n},
                         {"thumbs", absl::Base64Escape(thumbs)}, {"sinks", d.sinks}};
  if (!d.z.empty()) meta["z"] = FiniteOrNull(d.z);
  if (!d.max_norm.empty()) meta["norm"] = FiniteOrNull(d.max_norm);
  if (!d.entropy_nats.empty()) meta["entropy"] = FiniteOrNull(d.entropy_nats);
  return meta;
}

}  // namespace

absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data) {
  ATTNSCOPE_RETURN_IF_ERROR(CheckData(data));
  std::string json = EscapeForScript(
      Metadata(data).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  json.pop_back();  // the closing brace: the attentions follow
  json += ",\"attn\":[";
  const int64_t t = data.num_tokens;
  for (int64_t k = 0; k < data.num_layers * data.num_heads; ++k) {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string packed,
                               Deflate(QuantiseHead(data.attentions.data() + k * t * t, t)));
    absl::StrAppend(&json, k ? ",\"" : "\"", absl::Base64Escape(packed), "\"");
  }
  json += "]}";

  std::string page = internal::kViewerPage;
  const size_t script = page.find(kScriptMarker);
  if (script == std::string::npos) return absl::InternalError("viewer template has no script marker");
  page.replace(script, sizeof(kScriptMarker) - 1, internal::kViewerScript);
  const size_t at = page.find(kDataMarker);
  if (at == std::string::npos) return absl::InternalError("viewer template has no data marker");
  page.replace(at, sizeof(kDataMarker) - 1, json);
  return page;
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
