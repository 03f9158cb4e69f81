#include "service/cli/lens_viewer.h"

#include "absl/strings/str_cat.h"
#include "service/engine/viewer_html.h"

namespace attnscope::cli {
namespace {

// The style both pages share: the grid, its legend, the hover tip, the
// tests' hook.
constexpr char kCommonStyle[] = R"PAGE(body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 8px; } h1 small { font-weight: normal; color: #555; }
.note { color: #555; margin: 6px 0; max-width: 70em; }
#grid-wrap { overflow: auto; max-width: 100%; max-height: 70vh; border: 1px solid #ccc; }
canvas { display: block; }
.legend canvas { display: inline-block; vertical-align: middle; border: 1px solid #ccc; }
#tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #888;
       padding: 6px 8px; font: 12px monospace; white-space: pre; display: none; z-index: 2; }
#test-output { display: none; }
)PAGE";

constexpr char kStyle[] = R"PAGE(h2 { font-size: 15px; margin: 20px 0 6px; }
#strip { font: 13px monospace; line-height: 1.9; max-width: 100%; word-break: break-all; }
#strip span { white-space: pre-wrap; border-radius: 2px; margin-right: 2px; }
#strip .after { color: #aaa; }
#strip .query { outline: 2px solid #d62728; }
)PAGE";

constexpr char kBody[] = R"PAGE(
<h1>attnscope lens <small id="title"></small></h1>
<div id="lens-section">
<label>colour <select id="mode">
<option value="next">the actual next token's probability</option>
<option value="top">the top token's probability</option>
<option value="entropy">entropy (nats, 0 to ln V)</option>
</select></label>
<label>scale <select id="scale">
<option value="log">log (1e-6 to 1)</option>
<option value="linear">linear (0 to 1)</option>
</select></label>
<span class="legend"><canvas id="legend" width="200" height="12"></canvas> <span id="legend-text"></span></span>
<p class="note">Rows: the hidden states read out through the final norm and the head
(0 = the embeddings, L = after the final norm: the model's own prediction). Columns: the
positions read out. A wide cell shows its most likely next token; hover over a cell for its
top tokens, the actual next token's probability and rank, and the entropy. Grey: no value
(the last position has no next token).</p>
<div id="grid-wrap"><canvas id="grid"></canvas></div>
</div>
<div id="rollout-section">
<h2>Attention rollout</h2>
<label>query <select id="query"></select></label>
<label>after layer <input id="layer" type="range" min="1" value="1"> <span id="layer-text"></span></label>
<p class="note">Each token shaded by the chosen query's rollout weight after the chosen layer
(darkest: the row's largest weight; hover for the number). Tokens after the query are grey.</p>
<div id="strip"></div>
</div>
)PAGE";

constexpr char kScript[] = R"PAGE(const $ = (id) => document.getElementById(id);
const L = D.num_layers, tokens = D.tokens;
const shown = (t) => JSON.stringify(String(t)).slice(1, -1);
const cut = (t, n) => { const s = shown(t); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; };
const blue = (t) => {
  t = Math.max(0, Math.min(1, t));
  return "rgb(" + Math.round(247 - 239 * t) + "," + Math.round(251 - 203 * t) + "," +
         Math.round(255 - 148 * t) + ")";
};
const GREY = "rgb(205,205,205)";
$("title").textContent = D.model + " \u00b7 " + tokens.length + " tokens \u00b7 " + L + " layers";
const stats = { cells: 0, grey: 0, spans: 0, strip_sum: 0 };

// The logit lens grid.
const lens = D.lens;
let geometry = null;
function valueOf(cell, mode) {
  if (mode === "next") return cell.next_p;
  if (mode === "top") return cell.top.length ? cell.top[0].p : null;
  return cell.entropy;
}
function drawLegend(mode) {
  const c = $("legend"), g = c.getContext("2d");
  for (let x = 0; x < c.width; ++x) { g.fillStyle = blue(x / (c.width - 1)); g.fillRect(x, 0, 1, c.height); }
  $("scale").disabled = mode === "entropy";
  $("legend-text").textContent = mode === "entropy"
      ? "entropy 0 to ln V = " + Math.log(D.vocab).toFixed(2) + " nats"
      : $("scale").value === "log" ? "probability 1e-6 (or less) to 1, log scale" : "probability 0 to 1";
}
function drawGrid() {
  const mode = $("mode").value, states = lens.states, P = lens.positions.length;
  const cw = P <= 24 ? 72 : P <= 200 ? 14 : 5, rh = cw >= 72 ? 24 : 14;
  const left = 64, top = cw >= 72 ? 34 : 22;
  const c = $("grid"), g = c.getContext("2d");
  c.width = left + cw * P + 4; c.height = top + rh * states.length + 4;
  g.clearRect(0, 0, c.width, c.height);
  g.font = "11px sans-serif"; g.textBaseline = "middle";
  // Probabilities on a log scale by default: a diffuse read-out (early
  // states, 150K-token vocabularies) is far below 0.01 and would look blank.
  const norm = mode === "entropy" ? (v) => v / Math.log(D.vocab)
      : $("scale").value === "log" ? (v) => (v > 0 ? (Math.log10(v) + 6) / 6 : 0) : (v) => v;
  stats.cells = 0; stats.grey = 0;
  g.fillStyle = "#333";
  const step = Math.max(1, Math.ceil(44 / cw));
  for (let k = 0; k < P; k += step) {
    const i = lens.positions[k];
    g.fillText(cw >= 72 ? i + " " + cut(tokens[i], 8) : String(i), left + k * cw + 2, top - 10);
  }
  g.textAlign = "right";
  for (let s = 0; s < states.length; ++s) {
    const name = s === 0 ? "0 embed" : s === L ? s + " final" : String(s);
    g.fillText(name, left - 6, top + s * rh + rh / 2);
  }
  g.textAlign = "left";
  for (let s = 0; s < states.length; ++s) {
    for (let k = 0; k < P; ++k) {
      const v = valueOf(states[s][k], mode), ok = v !== null && Number.isFinite(v);
      const t = ok ? norm(v) : 0;
      g.fillStyle = ok ? blue(t) : GREY;
      g.fillRect(left + k * cw, top + s * rh, cw - (cw > 5 ? 1 : 0), rh - 1);
      stats.cells += 1; if (!ok) stats.grey += 1;
      if (cw >= 72 && states[s][k].top.length) {
        g.fillStyle = t > 0.55 ? "#fff" : "#111";
        g.fillText(cut(states[s][k].top[0].token, 9), left + k * cw + 3, top + s * rh + rh / 2);
      }
    }
  }
  geometry = { left, top, cw, rh, P, S: states.length };
  drawLegend(mode);
}
function tipFor(s, k) {
  const cell = lens.states[s][k], i = cell.position;
  const lines = ["position " + i + "  \"" + shown(tokens[i]) + "\"" +
                 (cell.next_id === null ? "" : "  \u2192 \"" + shown(tokens[i + 1]) + "\""),
                 "state " + s + (s === 0 ? " (the embeddings)" : s === L ? " (after the final norm)" : " (after layer " + s + ")")];
  for (const p of cell.top) lines.push("  " + p.p.toFixed(4) + "  \"" + shown(p.token) + "\"  (" + p.id + ")");
  if (cell.next_id !== null) {
    lines.push("next token p " + (cell.next_p === null ? "-" : cell.next_p.toExponential(3)) + ", rank " + cell.next_rank);
  }
  lines.push("entropy " + (cell.entropy === null ? "-" : cell.entropy.toFixed(3)) + " nats");
  return lines.join("\n");
}
if (lens) {
  $("mode").addEventListener("change", drawGrid);
  $("scale").addEventListener("change", drawGrid);
  drawGrid();
  const tip = $("tip");
  $("grid").addEventListener("mousemove", (e) => {
    const r = $("grid").getBoundingClientRect(), q = geometry;
    const k = Math.floor((e.clientX - r.left - q.left) / q.cw), s = Math.floor((e.clientY - r.top - q.top) / q.rh);
    if (k < 0 || s < 0 || k >= q.P || s >= q.S) { tip.style.display = "none"; return; }
    tip.textContent = tipFor(s, k);
    tip.style.left = (e.clientX + 14) + "px"; tip.style.top = (e.clientY + 14) + "px";
    tip.style.display = "block";
  });
  $("grid").addEventListener("mouseleave", () => { $("tip").style.display = "none"; });
} else {
  $("lens-section").style.display = "none";
}

// The attention rollout strip.
const rollout = D.rollout;
function drawStrip() {
  const qi = +$("query").value, layer = +$("layer").value, q = rollout.queries[qi];
  const row = rollout.rows[layer - 1][qi];
  $("layer-text").textContent = layer + " of " + rollout.rows.length;
  let peak = 0;
  for (let j = 0; j <= q; ++j) peak = Math.max(peak, row[j]);
  const strip = $("strip");
  strip.textContent = "";
  stats.spans = 0; stats.strip_sum = 0;
  for (let j = 0; j < tokens.length; ++j) {
    const span = document.createElement("span");
    span.textContent = shown(tokens[j]);
    if (j <= q) {
      const t = peak > 0 ? row[j] / peak : 0;
      span.style.background = blue(t);
      if (t > 0.55) span.style.color = "#fff";
      span.title = j + ": " + row[j].toExponential(3);
      stats.strip_sum += row[j];
    } else {
      span.className = "after";
    }
    if (j === q) span.classList.add("query");
    strip.appendChild(span);
    stats.spans += 1;
  }
}
if (rollout) {
  rollout.queries.forEach((q, i) => {
    const o = document.createElement("option");
    o.value = String(i); o.textContent = q + " \"" + cut(tokens[q], 12) + "\"";
    $("query").appendChild(o);
  });
  $("layer").max = String(rollout.rows.length); $("layer").value = String(rollout.rows.length);
  $("query").addEventListener("change", drawStrip);
  $("layer").addEventListener("input", drawStrip);
  drawStrip();
} else {
  $("rollout-section").style.display = "none";
}

// FILE#test: what was drawn, for the tests.
if (location.hash === "#test") {
  $("test-output").textContent = JSON.stringify({
    states: lens ? lens.states.length : 0, positions: lens ? lens.positions.length : 0,
    cells: stats.cells, grey: stats.grey, canvas: [$("grid").width, $("grid").height],
    rollout_layers: rollout ? rollout.rows.length : 0, rollout_queries: rollout ? rollout.queries.length : 0,
    spans: stats.spans, strip_sum: stats.strip_sum, title: $("title").textContent });
}
</script>
</body></html>
)PAGE";

}  // namespace

std::string ScriptSafeJson(const nlohmann::json& doc) {
  return engine::EscapeJsonForScript(
      doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string ViewerPage(const std::string& title, const std::string& style,
                       const std::string& body, const nlohmann::json& doc,
                       const std::string& script) {
  return absl::StrCat("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>", title,
                      "</title>\n<style>\n", kCommonStyle, style, "</style></head><body>", body,
                      "<div id=\"tip\"></div>\n<pre id=\"test-output\"></pre>\n"
                      "<script id=\"data\" type=\"application/json\">",
                      ScriptSafeJson(doc),
                      "</script>\n<script>\n\"use strict\";\n"
                      "const D = JSON.parse(document.getElementById(\"data\").textContent);\n",
                      script);
}

std::string LensViewerHtml(const nlohmann::json& lens_json) {
  return ViewerPage("attnscope lens", kStyle, kBody, lens_json, kScript);
}

}  // namespace attnscope::cli
