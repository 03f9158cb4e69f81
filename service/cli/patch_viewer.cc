#include "service/cli/patch_viewer.h"

#include "service/cli/lens_viewer.h"

namespace attnscope::cli {
namespace {

constexpr char kStyle[] = R"PAGE(#metric { font: 13px monospace; margin: 6px 0; }
#grid-wrap { max-height: 75vh; }
)PAGE";

constexpr char kBody[] = R"PAGE(
<h1>attnscope patch <small id="title"></small></h1>
<div id="metric"></div>
<span class="legend">recovery <canvas id="legend" width="200" height="12"></canvas> -1 (blue) to 1 (red), clamped</span>
<p class="note">Each cell: the corrupted run with that part taken from the clean run, and the
recovery (patched - corrupted) / (clean - corrupted) of the metric: 1 = the clean run's metric,
0 = no change. Hover over a cell for the metric and the tokens.</p>
<div id="grid-wrap"><canvas id="grid"></canvas></div>
)PAGE";

constexpr char kScript[] = R"PAGE(const P = D.patch, $ = (id) => document.getElementById(id);
const heads = P.patched === "heads";
const shown = (t) => JSON.stringify(String(t)).slice(1, -1);
const cut = (t, n) => { const s = shown(t); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; };
const diverging = (v) => {
  const t = Number.isFinite(v) ? Math.max(-1, Math.min(1, v)) : 0;
  if (t >= 0) return "rgb(255," + Math.round(255 - 200 * t) + "," + Math.round(255 - 215 * t) + ")";
  return "rgb(" + Math.round(255 + 215 * t) + "," + Math.round(255 + 155 * t) + ",255)";
};
const layers = P.recovery.length, columns = layers ? P.recovery[0].length : 0;
$("title").textContent = P.model + " \u00b7 " + (heads ? "each head's output" : "the residual stream per position") +
    " \u00b7 " + P.passes + " patched passes";
const num = (x) => (x === null ? "-" : x.toFixed(4));
$("metric").textContent = "metric: logit(\"" + shown(P.target_a.token) + "\") - logit(\"" + shown(P.target_b.token) +
    "\") at the last position: clean " + num(P.clean_metric) + ", corrupted " + num(P.corrupted_metric);
{
  const c = $("legend"), g = c.getContext("2d");
  for (let x = 0; x < c.width; ++x) { g.fillStyle = diverging(2 * x / (c.width - 1) - 1); g.fillRect(x, 0, 1, c.height); }
}
const stats = { cells: 0, best: null, best_at: null };
const cw = columns <= 16 ? 56 : columns <= 64 ? 22 : 10, rh = cw >= 56 ? 26 : 16;
const gridLeft = 56, gridTop = heads ? 24 : 110;
function columnLabel(k) {
  if (heads) return "H" + k;
  const a = D.clean_tokens[k], b = D.corrupted_tokens[k];
  return k + " " + cut(b, 8) + (a === b ? "" : " \u2190 " + cut(a, 8));
}
function draw() {
  const c = $("grid"), g = c.getContext("2d");
  c.width = gridLeft + cw * columns + (heads ? 4 : 90); c.height = gridTop + rh * layers + 4;
  g.font = "11px sans-serif"; g.textBaseline = "middle"; g.fillStyle = "#333";
  const step = Math.max(1, Math.ceil((heads ? 30 : 14) / cw));
  for (let k = 0; k < columns; k += step) {
    const x = gridLeft + k * cw + cw / 2;
    if (heads) { g.textAlign = "center"; g.fillText(columnLabel(k), x, gridTop - 10); continue; }
    g.save(); g.translate(x, gridTop - 4); g.rotate(-Math.PI / 3); g.textAlign = "left";
    g.fillStyle = D.clean_tokens[k] === D.corrupted_tokens[k] ? "#333" : "#d62728";
    g.fillText(columnLabel(k), 0, 0); g.restore();
  }
  g.textAlign = "right"; g.fillStyle = "#333";
  for (let l = 0; l < layers; ++l) g.fillText("layer " + l, gridLeft - 6, gridTop + l * rh + rh / 2);
  g.textAlign = "center";
  for (let l = 0; l < layers; ++l) {
    for (let k = 0; k < columns; ++k) {
      const v = P.recovery[l][k];
      g.fillStyle = v === null ? "rgb(205,205,205)" : diverging(v);
      g.fillRect(gridLeft + k * cw, gridTop + l * rh, cw - 1, rh - 1);
      stats.cells += 1;
      if (v !== null && (stats.best === null || v > stats.best)) { stats.best = v; stats.best_at = [l, k]; }
      if (cw >= 56 && v !== null) {
        g.fillStyle = Math.abs(v) > 0.6 ? "#fff" : "#111";
        g.fillText(v.toFixed(2), gridLeft + k * cw + cw / 2, gridTop + l * rh + rh / 2);
      }
    }
  }
}
draw();
const tip = $("tip");
$("grid").addEventListener("mousemove", (e) => {
  const r = $("grid").getBoundingClientRect();
  const k = Math.floor((e.clientX - r.left - gridLeft) / cw), l = Math.floor((e.clientY - r.top - gridTop) / rh);
  if (k < 0 || l < 0 || k >= columns || l >= layers) { tip.style.display = "none"; return; }
  const lines = ["layer " + l + (heads ? ", head " + k : ", position " + k)];
  if (!heads) {
    lines.push("clean \"" + shown(D.clean_tokens[k]) + "\", corrupted \"" + shown(D.corrupted_tokens[k]) + "\"");
  }
  lines.push("recovery " + num(P.recovery[l][k]), "metric " + num(P.metric[l][k]));
  tip.textContent = lines.join("\n");
  tip.style.left = (e.clientX + 14) + "px"; tip.style.top = (e.clientY + 14) + "px";
  tip.style.display = "block";
});
$("grid").addEventListener("mouseleave", () => { tip.style.display = "none"; });
if (location.hash === "#test") {
  $("test-output").textContent = JSON.stringify({
    layers, columns, cells: stats.cells, best: stats.best, best_at: stats.best_at,
    canvas: [$("grid").width, $("grid").height], title: $("title").textContent });
}
</script>
</body></html>
)PAGE";

}  // namespace

std::string PatchViewerHtml(const nlohmann::json& patch_json,
                            const std::vector<std::string>& clean_tokens,
                            const std::vector<std::string>& corrupted_tokens) {
  const nlohmann::json doc = {{"patch", patch_json},
                              {"clean_tokens", clean_tokens},
                              {"corrupted_tokens", corrupted_tokens}};
  return ViewerPage("attnscope patch", kStyle, kBody, doc, kScript);
}

}  // namespace attnscope::cli
