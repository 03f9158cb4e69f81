// The viewer's page template (see viewer_html.h): HTML, CSS and plain
// JavaScript drawing SVG, no network access of any kind.
#include "service/engine/viewer_html.h"

namespace attnscope::engine::internal {

const char kViewerPage[] = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>attnscope attention viewer</title>
<style>
:root { --ink:#1c2430; --muted:#687385; --line:#dde2e8; --accent:#2458d3; --hl:#f08c00;
        --bg:#f5f6f8; --tri:#eef1f5; }
* { box-sizing:border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--ink); background:var(--bg); }
header { padding:14px 24px 12px; background:#fff; border-bottom:1px solid var(--line); }
header h1 { margin:0; font-size:18px; font-weight:600; }
header h1 span { color:var(--muted); font-weight:400; }
.meta { color:var(--muted); font-size:13px; margin-top:2px; }
.prompt { margin-top:6px; font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace; white-space:pre-wrap;
          max-height:2.9em; overflow:hidden; color:#37404d; }
main { display:flex; gap:18px; padding:16px 24px; align-items:flex-start; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:12px 14px; }
#matrix-card { flex:0 1 auto; min-width:0; overflow:auto; }
.controls { display:flex; gap:16px; align-items:center; margin-bottom:8px; flex-wrap:wrap; }
.controls label { font-weight:500; }
select { font:inherit; padding:2px 6px; border:1px solid #c5ccd6; border-radius:5px; background:#fff; }
.summary { color:var(--muted); font-size:12.5px; margin-bottom:6px; }
.summary b { color:var(--ink); font-weight:600; }
#side { flex:0 0 340px; display:flex; flex-direction:column; gap:16px; }
h2 { font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); margin:0 0 8px; }
svg text { font-family:ui-monospace,"DejaVu Sans Mono",monospace; fill:var(--ink); }
svg text.axis { fill:var(--muted); font-family:system-ui,"DejaVu Sans",sans-serif; font-size:11px; }
rect.cell { fill:var(--accent); }
rect.rowhit { fill:transparent; }
text.qlabel.hl, text.klabel.hl { fill:var(--hl); font-weight:700; }
text.cellnum { font-size:9px; pointer-events:none; text-anchor:middle; dominant-baseline:central; }
#outline { fill:none; stroke:var(--hl); stroke-width:2; pointer-events:none; }
.rtitle { margin-bottom:8px; }
.rtitle .tok, .entry .tok { font-family:ui-monospace,"DejaVu Sans Mono",monospace; }
#readout { max-height:520px; overflow-y:auto; }
.entry { display:grid; grid-template-columns:2.6em minmax(5em,9em) 1fr 4.2em; gap:8px; align-items:center;
         font-size:12.5px; padding:1px 2px; border-radius:3px; }
.entry .pos { color:var(--muted); text-align:right; }
.entry .tok { white-space:pre; overflow:hidden; text-overflow:ellipsis; }
.entry .bar { height:9px; background:var(--tri); border-radius:2px; overflow:hidden; }
.entry .bar i { display:block; height:100%; background:var(--accent); }
.entry .num { text-align:right; font-variant-numeric:tabular-nums; }
.entry.top { background:#fff4e0; }
.entry.top .num { font-weight:700; color:#b35c00; }
.hint { color:var(--muted); font-size:12.5px; }
#picker rect { cursor:pointer; }
#picker rect.sel { stroke:var(--hl); stroke-width:2.5; }
#test-output { display:none; }
</style>
</head>
<body>
<header>
  <h1>attnscope <span>attention viewer</span></h1>
  <div class="meta" id="meta"></div>
  <div class="prompt" id="prompt"></div>
</header>
<main>
  <div class="card" id="matrix-card">
    <div class="controls">
      <label>Layer <select id="layer"></select></label>
      <label>Head <select id="head"></select></label>
      <label class="hint"><input type="checkbox" id="boost"> boost faint weights (&radic;w)</label>
    </div>
    <div class="summary" id="summary"></div>
    <svg id="matrix" xmlns="http://www.w3.org/2000/svg"></svg>
    <div class="hint">Rows are queries, columns are keys; the upper triangle is empty (causal mask).
      Hover a row (or use &uarr; &darr;) to see what that token reads.</div>
  </div>
  <div id="side">
    <div class="card">
      <h2>What the query reads</h2>
      <div class="rtitle" id="rtitle">Hover a row of the matrix.</div>
      <div id="readout"></div>
    </div>
    <div class="card">
      <h2>Heads</h2>
      <div class="hint" style="margin-bottom:6px">Shade: sink score A[T&minus;1, 0]. Click to select.</div>
      <svg id="picker" xmlns="http://www.w3.org/2000/svg"></svg>
    </div>
  </div>
</main>
<pre id="test-output"></pre>
<script type="application/json" id="attnscope-data">__ATTNSCOPE_DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("attnscope-data").textContent);
const T = D.tokens.length, NS = "http://www.w3.org/2000/svg";
const state = { layer: 0, head: 0, row: -1 };
const $ = (id) => document.getElementById(id);

function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function label(tok, max) {
  let s = tok.replace(/ /g, "\u00b7");
  return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
}
function weights(l, h) { return D.attentions[l][h]; }
function opacity(w) { return $("boost").checked ? Math.sqrt(w) : w; }

// Margins fit the longest label; cells share the width the side panel leaves.
const maxChars = Math.min(14, Math.max(...D.tokens.map((t) => t.length), 1));
const x0 = Math.round(maxChars * 12 * 0.62 + 46);
const y0 = Math.round(maxChars * 12 * 0.62 * 0.82 + 30);
const room = Math.max(240, window.innerWidth - 48 - 30 - 18 - 340 - x0 - 20);
const cell = Math.max(3, Math.min(28, Math.floor(room / T)));
const fontSize = Math.max(8, Math.min(12, cell * 0.72));
const labelEvery = Math.max(1, Math.ceil(10 / cell));

function drawAxes(svg) {
  const size = T * cell;
  svg.setAttribute("width", x0 + size + 16);
  svg.setAttribute("height", y0 + size + 28);
  // The lower triangle (keys j <= i) as a staircase: where weights can be.
  let d = `M${x0},${y0}`;
  for (let i = 0; i < T; i++) d += `H${x0 + (i + 1) * cell}V${y0 + (i + 1) * cell}`;
  d += `H${x0}Z`;
  el("path", { d: d, fill: "#eef1f5" }, svg);
  for (let i = 0; i < T; i++) {
    if (i % labelEvery) continue;
    const q = el("text", { class: "qlabel", "data-i": i, x: x0 - 6, y: y0 + i * cell + cell / 2,
                          "text-anchor": "end", "dominant-baseline": "central", "font-size": fontSize }, svg);
    q.textContent = label(D.tokens[i], 14);
    const x = x0 + i * cell + cell / 2, y = y0 - 6;
    const k = el("text", { class: "klabel", "data-j": i, x: x, y: y, "font-size": Math.min(fontSize, cell * 0.55 + 1),
                          transform: `rotate(-60 ${x} ${y})` }, svg);
    k.textContent = label(D.tokens[i], 14);
  }
  const ax = el("text", { class: "axis", x: x0 + size / 2, y: y0 + size + 18, "text-anchor": "middle" }, svg);
  ax.textContent = "keys (what is read) \u2192";
  const ay = el("text", { class: "axis", x: 12, y: y0 + size / 2, "text-anchor": "middle",
                         transform: `rotate(-90 12 ${y0 + size / 2})` }, svg);
  ay.textContent = "queries (who reads) \u2192";
}

function drawCells() {
  const svg = $("matrix");
  svg.querySelectorAll("rect.cell, rect.rowhit, #outline, text.cellnum").forEach((e) => e.remove());
  const A = weights(state.layer, state.head);
  for (let i = 0; i < T; i++) {
    el("rect", { class: "rowhit", "data-i": i, x: x0, y: y0 + i * cell, width: T * cell, height: cell }, svg);
  }
  for (let i = 0; i < T; i++) {
    for (let j = 0; j <= i; j++) {
      const w = A[i][j];
      if (!(w > 0)) continue;
      el("rect", { class: "cell", "data-i": i, "data-j": j, "data-w": w, "fill-opacity": opacity(w),
                   x: x0 + j * cell, y: y0 + i * cell, width: cell, height: cell }, svg);
    }
  }
  el("rect", { id: "outline", x: 0, y: 0, width: 0, height: 0, rx: 2, visibility: "hidden" }, svg);
  summarize(A);
  if (state.row >= 0) showRow(state.row);
}

function summarize(A) {
  let prev = 0, ent = 0;
  for (let i = 0; i < T; i++) {
    if (i > 0) prev += A[i][i - 1] / (T - 1);
    for (const w of A[i]) if (w > 0) ent -= w * Math.log(w) / T;
  }
  $("summary").innerHTML = `layer ${state.layer}, head ${state.head} &middot; sink score <b>${A[T - 1][0].toFixed(3)}</b>` +
    ` &middot; previous-token <b>${(T > 1 ? prev : 0).toFixed(3)}</b> &middot; entropy <b>${ent.toFixed(3)}</b> nats`;
  drawPicker();
}

function showRow(i) {
  state.row = i;
  const svg = $("matrix");
  svg.querySelectorAll(".hl").forEach((e) => e.classList.remove("hl"));
  svg.querySelectorAll("text.cellnum").forEach((e) => e.remove());
  const A = weights(state.layer, state.head)[i];
  const best = A.indexOf(Math.max(...A));
  svg.querySelectorAll(`rect.cell[data-i="${i}"]`).forEach((c) => {
    c.classList.add("hl");
    const w = +c.dataset.w, j = +c.dataset.j;
    if (cell >= 21 && w >= 0.005) {
      const t = el("text", { class: "cellnum", x: x0 + j * cell + cell / 2, y: y0 + i * cell + cell / 2,
                             fill: opacity(w) > 0.55 ? "#fff" : "#1c2430" }, svg);
      t.textContent = w.toFixed(2).replace(/^0/, "");
    }
  });
  svg.querySelectorAll(`text.qlabel[data-i="${i}"]`).forEach((e) => e.classList.add("hl"));
  svg.querySelectorAll(`text.klabel[data-j="${best}"]`).forEach((e) => e.classList.add("hl"));
  const o = $("outline");
  o.setAttribute("x", x0 - 1); o.setAttribute("y", y0 + i * cell - 1);
  o.setAttribute("width", (i + 1) * cell + 2); o.setAttribute("height", cell + 2);
  o.setAttribute("visibility", "visible");
  svg.appendChild(o);
  fillReadout(i, A, best);
}

function fillReadout(i, A, best) {
  const tok = (s) => { const e = document.createElement("span"); e.className = "tok"; e.textContent = s; return e; };
  const title = $("rtitle");
  title.textContent = "";
  // Long rows are listed by weight, so that what matters comes first.
  const order = [...Array(i + 1).keys()];
  if (i >= 24) order.sort((a, b) => A[b] - A[a] || a - b);
  title.append(`Query ${i} `, tok(`\u201c${label(D.tokens[i], 30)}\u201d`),
               ` (layer ${state.layer}, head ${state.head}) reads` + (i >= 24 ? ", by weight:" : ":"));
  const box = $("readout");
  box.textContent = "";
  box.dataset.row = i;
  for (const j of order) {
    const e = document.createElement("div");
    e.className = "entry" + (j === best ? " top" : "");
    e.dataset.j = j;
    const pos = document.createElement("span"); pos.className = "pos"; pos.textContent = j;
    const bar = document.createElement("span"); bar.className = "bar";
    const fill = document.createElement("i"); fill.style.width = (100 * A[j]).toFixed(1) + "%"; bar.append(fill);
    const num = document.createElement("span"); num.className = "num"; num.textContent = A[j].toFixed(4);
    e.append(pos, tok(label(D.tokens[j], 24)), bar, num);
    box.append(e);
  }
}

function drawPicker() {
  const svg = $("picker"), s = 18, g = 3, lx = 34, ty = 18;
  svg.textContent = "";
  svg.setAttribute("width", lx + D.heads * (s + g) + 4);
  svg.setAttribute("height", ty + D.layers * (s + g) + 4);
  for (let h = 0; h < D.heads; h++) {
    const t = el("text", { class: "axis", x: lx + h * (s + g) + s / 2, y: 12, "text-anchor": "middle" }, svg);
    t.textContent = h;
  }
  for (let l = 0; l < D.layers; l++) {
    const t = el("text", { class: "axis", x: lx - 8, y: ty + l * (s + g) + s / 2, "text-anchor": "end",
                          "dominant-baseline": "central" }, svg);
    t.textContent = "L" + l;
    for (let h = 0; h < D.heads; h++) {
      const sink = D.attentions[l][h][T - 1][0];
      const r = el("rect", { x: lx + h * (s + g), y: ty + l * (s + g), width: s, height: s, rx: 3,
                             fill: `rgba(36,88,211,${(0.07 + 0.93 * sink).toFixed(3)})`,
                             class: l === state.layer && h === state.head ? "sel" : "" }, svg);
      const tip = el("title", {}, r);
      tip.textContent = `layer ${l}, head ${h}: sink score ${sink.toFixed(3)}`;
      r.addEventListener("click", () => select(l, h));
    }
  }
}

function select(l, h) {
  state.layer = l; state.head = h;
  $("layer").value = String(l); $("head").value = String(h);
  drawCells();
}

function setup() {
  $("meta").textContent = `${D.title} \u00b7 ${T} tokens \u00b7 ${D.layers} layers \u00d7 ${D.heads} heads`;
  $("prompt").textContent = D.prompt;
  for (const [id, n] of [["layer", D.layers], ["head", D.heads]]) {
    for (let k = 0; k < n; k++) {
      const o = document.createElement("option"); o.value = String(k); o.textContent = String(k); $(id).append(o);
    }
    $(id).addEventListener("change", () => select(+$("layer").value, +$("head").value));
  }
  $("boost").addEventListener("change", drawCells);
  const svg = $("matrix");
  drawAxes(svg);
  svg.addEventListener("mouseover", (e) => {
    const i = e.target.dataset ? e.target.dataset.i : undefined;
    if (i !== undefined && +i !== state.row) showRow(+i);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      showRow(Math.min(T - 1, Math.max(0, state.row + (e.key === "ArrowDown" ? 1 : -1))));
      e.preventDefault();
    }
  });
  drawCells();
}

// FILE#test=l,h,i: select the head through the controls, hover row i with a
// real event, and report what is drawn (for the headless-browser test).
function testHook() {
  const m = /^#test=(\d+),(\d+),(\d+)$/.exec(location.hash);
  if (!m) return;
  $("layer").value = m[1]; $("layer").dispatchEvent(new Event("change", { bubbles: true }));
  $("head").value = m[2]; $("head").dispatchEvent(new Event("change", { bubbles: true }));
  const target = $("matrix").querySelector(`rect.cell[data-i="${m[3]}"]`) ||
                 $("matrix").querySelector(`rect.rowhit[data-i="${m[3]}"]`);
  target.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  const cells = [...$("matrix").querySelectorAll("rect.cell")];
  const report = {
    layer: state.layer, head: state.head, row: state.row,
    cells: cells.length,
    upper_cells: cells.filter((c) => +c.dataset.j > +c.dataset.i).length,
    highlighted: cells.filter((c) => c.classList.contains("hl")).map((c) => ({
      i: +c.dataset.i, j: +c.dataset.j, w: +c.dataset.w, opacity: +c.getAttribute("fill-opacity") })),
    readout: [...document.querySelectorAll("#readout .entry")].map((e) => ({
      j: +e.dataset.j, num: e.querySelector(".num").textContent })),
    query_labels: [...document.querySelectorAll("text.qlabel")].map((e) => e.textContent),
    key_labels: [...document.querySelectorAll("text.klabel")].map((e) => e.textContent),
  };
  $("test-output").textContent = JSON.stringify(report);
}

setup();
testHook();
</script>
</body>
</html>
)HTML";

}  // namespace attnscope::engine::internal
