#include "service/engine/viewer_html.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

constexpr char kDataMarker[] = "__ATTNSCOPE_DATA__";

// A weight in [0, 1] as a JSON number with at most 7 decimals ("0", "1",
// "0.0123457"): exact enough for the page (5e-8) and half the size of %.9g.
void AppendWeight(std::string& out, float w) {
  if (!(w > 0.0f)) {  // 0, negative zero or NaN: the page draws nothing
    out += '0';
    return;
  }
  char buffer[32];
  const int written = std::snprintf(buffer, sizeof(buffer), "%.7f", static_cast<double>(w));
  int end = written;
  while (end > 0 && buffer[end - 1] == '0') --end;
  if (end > 0 && buffer[end - 1] == '.') --end;
  if (end == 1 && buffer[0] == '0') {  // rounded to 0
    out += '0';
    return;
  }
  out.append(buffer, end);
}

// attentions [L][H][i][0..i] as JSON text.
std::string AttentionJson(const ViewerData& d) {
  const int64_t t = d.num_tokens;
  std::string out;
  out.reserve(static_cast<size_t>(d.num_layers * d.num_heads * t * (t + 1) / 2 * 6));
  out += '[';
  for (int64_t l = 0; l < d.num_layers; ++l) {
    out += l ? ",[" : "[";
    for (int64_t h = 0; h < d.num_heads; ++h) {
      out += h ? ",[" : "[";
      const float* head = d.attentions.data() + (l * d.num_heads + h) * t * t;
      for (int64_t i = 0; i < t; ++i) {
        out += i ? ",[" : "[";
        for (int64_t j = 0; j <= i; ++j) {
          if (j) out += ',';
          AppendWeight(out, head[i * t + j]);
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  out += ']';
  return out;
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data) {
  ATTNSCOPE_RETURN_IF_ERROR(CheckData(data));
  const nlohmann::json meta = {{"title", data.title},       {"prompt", data.prompt_text},
                               {"tokens", data.tokens},     {"layers", data.num_layers},
                               {"heads", data.num_heads}};
  std::string json =
      EscapeForScript(meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  json.pop_back();  // the closing brace: the attentions follow
  json += ",\"attentions\":" + AttentionJson(data) + "}";

  std::string page = internal::kViewerPage;
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
