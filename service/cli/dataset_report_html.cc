#include "service/cli/dataset_report_html.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attnscope::cli {
namespace {

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// White -> dark blue for a share in [0, 1].
std::string Sequential(double v) {
  const double t = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
  return absl::StrFormat("rgb(%d,%d,%d)", static_cast<int>(247 - 239 * t),
                         static_cast<int>(251 - 203 * t), static_cast<int>(255 - 148 * t));
}

// Blue (negative) - white - red (positive) for a difference in [-scale, scale].
std::string Diverging(double v, double scale) {
  const double t = std::isfinite(v) && scale > 0 ? std::clamp(v / scale, -1.0, 1.0) : 0.0;
  if (t >= 0) {
    return absl::StrFormat("rgb(255,%d,%d)", static_cast<int>(255 - 200 * t),
                           static_cast<int>(255 - 215 * t));
  }
  return absl::StrFormat("rgb(%d,%d,255)", static_cast<int>(255 + 215 * t),
                         static_cast<int>(255 + 155 * t));
}

// A layer x head heatmap; `color` maps a value to a fill.
template <typename Color>
std::string Heatmap(const Grid& grid, const std::string& what, const char* format, Color color) {
  const size_t layers = grid.size(), heads = layers ? grid[0].size() : 0;
  const int cell = static_cast<int>(std::clamp<size_t>(480 / std::max<size_t>(heads, 1), 10, 44));
  const bool labels = cell >= 34;
  const int left = 40, top = 20;
  std::string svg = absl::StrFormat(
      "<svg class=\"heatmap\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\">",
      left + cell * static_cast<int>(heads) + 10, top + cell * static_cast<int>(layers) + 10,
      Escape(what));
  for (size_t h = 0; h < heads; h += std::max<size_t>(1, heads / 16)) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"14\" class=\"axis\">h%d</text>",
                                          left + cell * static_cast<int>(h) + 2, h));
  }
  for (size_t l = 0; l < layers; ++l) {
    if (l % std::max<size_t>(1, layers / 16) == 0) {
      absl::StrAppend(&svg, absl::StrFormat("<text x=\"2\" y=\"%d\" class=\"axis\">L%d</text>",
                                            top + cell * static_cast<int>(l) + cell / 2 + 4, l));
    }
    for (size_t h = 0; h < heads; ++h) {
      const double v = grid[l][h];
      const std::string value = absl::StrFormat(format, v);
      absl::StrAppend(&svg, absl::StrFormat(
          "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">"
          "<title>L%d h%d: %s</title></rect>",
          left + cell * static_cast<int>(h), top + cell * static_cast<int>(l), cell - 1, cell - 1,
          color(v), l, h, value));
      if (labels) {
        absl::StrAppend(&svg, absl::StrFormat(
            "<text x=\"%d\" y=\"%d\" class=\"val\">%s</text>", left + cell * static_cast<int>(h) + 3,
            top + cell * static_cast<int>(l) + cell / 2 + 4, value));
      }
    }
  }
  return svg + "</svg>";
}

// Bars of `counts` with the lower edge of each bin under it.
std::string Histogram(const std::vector<int64_t>& counts, double low, double width,
                      const std::string& what) {
  const int64_t most = counts.empty() ? 1 : std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  const int bar = 34, height = 120, top = 16;
  std::string svg = absl::StrFormat(
      "<svg class=\"histogram\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\">",
      bar * static_cast<int>(counts.size()) + 50, height + top + 34, Escape(what));
  for (size_t k = 0; k < counts.size(); ++k) {
    const int h = static_cast<int>(std::lround(static_cast<double>(height) * counts[k] / most));
    const int x = 10 + bar * static_cast<int>(k);
    absl::StrAppend(&svg, absl::StrFormat(
        "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>[%.3g, %.3g): "
        "%d</title></rect><text x=\"%d\" y=\"%d\" class=\"count\">%d</text>"
        "<text x=\"%d\" y=\"%d\" class=\"axis\">%.3g</text>",
        x, top + height - h, bar - 3, h, low + width * k, low + width * (k + 1), counts[k], x + 2,
        top + height - h - 3, counts[k], x, top + height + 14, low + width * k));
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"%d\" class=\"axis\">%.3g</text>",
                                        10 + bar * static_cast<int>(counts.size()) - 8,
                                        top + height + 28, low + width * counts.size()));
  return svg + "</svg>";
}

std::string Figure(const std::string& caption, const std::string& body) {
  return absl::StrCat("<figure>", body, "<figcaption>", caption, "</figcaption></figure>");
}

std::string FileSection(const DatasetSummary& s) {
  std::string out = absl::StrFormat(
      "<section><h2>%s</h2><p class=\"facts\">%d prompts (%d error lines left out) &middot; model "
      "%s &middot; %d layers &times; %d heads</p><p class=\"big\">Sink-&epsilon; (&epsilon; = "
      "%.2f): <b>%.4f</b></p>",
      Escape(s.path), s.prompts, s.errors, Escape(s.model.empty() ? "?" : s.model), s.layers,
      s.heads, s.epsilon, s.sink_eps);
  absl::StrAppend(
      &out, "<div class=\"row\">",
      Figure("Share of prompts with &alpha; &gt; &epsilon;, per layer &times; head",
             Heatmap(s.share_above, "Sink-eps per layer x head", "%.2f", Sequential)),
      Figure("Mean first-token importance &alpha;",
             Heatmap(s.mean_importance, "mean alpha per layer x head", "%.2f", Sequential)),
      "</div><div class=\"row\">");
  std::vector<int64_t> mass_bars;
  for (double m : s.first_token_mass_by_layer) mass_bars.push_back(std::lround(1000 * m));
  absl::StrAppend(
      &out,
      Figure("Health (0&ndash;10), prompts per bin",
             Histogram(s.health.bins, s.health.bin_low, s.health.bin_width, "health")),
      Figure("Sink-&epsilon; of each prompt",
             Histogram(s.sink_eps_per_prompt.bins, s.sink_eps_per_prompt.bin_low,
                       s.sink_eps_per_prompt.bin_width, "per-prompt Sink-eps")),
      Figure("Next-token entropy, mean per prompt (nats)",
             Histogram(s.entropy.bins, s.entropy.bin_low, s.entropy.bin_width, "entropy")),
      Figure("First-token mass by layer (mean &alpha; &times; 1000; bar k = layer k)",
             Histogram(mass_bars, 0, 1, "first-token mass by layer")),
      "</div><h3>Lowest health</h3><table><tr><th>id</th><th>health</th><th>sinks</th>"
      "<th>tokens</th></tr>");
  for (const LowHealthPrompt& p : s.lowest_health) {
    absl::StrAppend(&out, absl::StrFormat("<tr><td>%s</td><td>%.2f</td><td>%d</td><td>%d</td></tr>",
                                          Escape(p.id.dump()), p.health, p.sinks, p.tokens));
  }
  return out + "</table></section>";
}

constexpr char kStyle[] = R"(<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}h3{font-size:14px}
.row{display:flex;flex-wrap:wrap;gap:24px}figure{margin:0}figcaption{font-size:12px;color:#555}
.axis,.count{font-size:10px;fill:#444}.val{font-size:10px;fill:#111}.bar{fill:#4a7ab8}
.big{font-size:16px}.facts{color:#555}table{border-collapse:collapse}
td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}
</style>)";

// The test hook: what the browser built, for tests (see the header).
constexpr char kScript[] = R"(<script>
if (location.hash.indexOf('test') >= 0) {
  const pre = document.createElement('pre');
  pre.id = 'test-output';
  pre.textContent = JSON.stringify({title: document.title,
    heatmaps: document.querySelectorAll('svg.heatmap').length,
    cells: document.querySelectorAll('rect.cell').length,
    bars: document.querySelectorAll('rect.bar').length});
  document.body.appendChild(pre);
}
</script>)";

}  // namespace

std::string DatasetReportHtml(const std::vector<DatasetSummary>& summaries,
                              const std::optional<Grid>& share_delta) {
  std::string title = "attnscope summarize";
  for (const DatasetSummary& s : summaries) absl::StrAppend(&title, " ", s.path);
  std::string out = absl::StrCat("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>",
                                 Escape(title), "</title>", kStyle, "</head><body><h1>",
                                 Escape(title), "</h1>");
  if (share_delta && summaries.size() == 2) {
    double scale = 0.05;
    for (const auto& row : *share_delta) {
      for (double v : row) scale = std::max(scale, std::isfinite(v) ? std::fabs(v) : 0.0);
    }
    absl::StrAppend(
        &out,
        absl::StrFormat("<section><h2>Difference: %s &minus; %s</h2><p class=\"big\">Sink-&epsilon; "
                        "%+.4f (%.4f &rarr; %.4f)</p>",
                        Escape(summaries[1].path), Escape(summaries[0].path),
                        summaries[1].sink_eps - summaries[0].sink_eps, summaries[0].sink_eps,
                        summaries[1].sink_eps),
        Figure(absl::StrFormat("Share of prompts with &alpha; &gt; &epsilon;: second minus first "
                               "(red: more sinking; full colour at &plusmn;%.2f)",
                               scale),
               Heatmap(*share_delta, "difference per layer x head", "%+.2f",
                       [scale](double v) { return Diverging(v, scale); })),
        "</section>");
  }
  for (const DatasetSummary& s : summaries) out += FileSection(s);
  return out + kScript + "</body></html>\n";
}

}  // namespace attnscope::cli
