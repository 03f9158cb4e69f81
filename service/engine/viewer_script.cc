// The viewer's script (see viewer_html.h): plain JavaScript drawing on
// canvases; heads are decoded (base64, deflate, 8-bit dense or sparse rows)
// only when shown.
#include "service/engine/viewer_html.h"

namespace attnscope::engine::internal {

const char kViewerScript[] = R"JS("use strict";
const errors = [];
window.addEventListener("error", (e) => errors.push(String(e.message)));
window.addEventListener("unhandledrejection", (e) => errors.push(String(e.reason)));
const D = JSON.parse(document.getElementById("attnscope-data").textContent);
const T = D.tokens.length, L = D.layers, H = D.heads;
// The model's indices of the page's layers and heads (a selection of them).
const LID = D.layer_ids || [...Array(L).keys()], HID = D.head_ids || [...Array(H).keys()];
const $ = (id) => document.getElementById(id);
const state = { layer: 0, head: 0, row: -1, A: null, pending: Promise.resolve(), labels: [] };
const ACCENT = [36, 88, 211], TRI = [238, 241, 245];
const rowStart = (i) => i * (i + 1) / 2;

function label(tok, max) {
  const s = tok.replace(/ /g, "\u00b7");
  return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
}
function opacity(w) { return $("boost").checked ? Math.sqrt(w) : w; }
function fmt(v, d) { return v === null || v === undefined ? "\u2013" : v.toFixed(d); }
function bytesOf(b64) {
  const bin = atob(b64), out = new Uint8Array(bin.length);
  for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
  return out;
}

// A zlib stream (RFC 1950/1951) inflated synchronously: the browser's
// DecompressionStream takes seconds on its first use in headless Chromium,
// and a head is a few hundred KB. Codes are read bit by bit (as zlib's puff).
const LBASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
  115, 131, 163, 195, 227, 258];
const LEXT = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DBASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025,
  1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DEXT = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12,
  12, 13, 13];
const ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
function huffman(lengths) {
  const count = new Uint16Array(16), offs = new Uint16Array(16), symbol = new Uint16Array(lengths.length);
  for (const l of lengths) count[l]++;
  count[0] = 0;
  for (let i = 1; i < 16; i++) offs[i] = offs[i - 1] + count[i - 1];
  for (let s = 0; s < lengths.length; s++) if (lengths[s]) symbol[offs[lengths[s]]++] = s;
  return { count, symbol };
}
function inflate(src) {
  if (src.length < 2 || (src[0] & 15) !== 8 || ((src[0] << 8) | src[1]) % 31 !== 0) {
    throw new Error("not a zlib stream");
  }
  let pos = 2, buf = 0, cnt = 0, n = 0, out = new Uint8Array(Math.max(1024, 4 * src.length));
  const bits = (k) => {
    while (cnt < k) {
      if (pos >= src.length) throw new Error("inflate: the stream is cut short");
      buf |= src[pos++] << cnt; cnt += 8;
    }
    const v = buf & ((1 << k) - 1);
    buf >>>= k; cnt -= k;
    return v;
  };
  const room = (k) => {
    if (n + k <= out.length) return;
    let m = 2 * out.length;
    while (m < n + k) m *= 2;
    const o = new Uint8Array(m); o.set(out.subarray(0, n)); out = o;
  };
  const decode = (h) => {
    let code = 0, first = 0, index = 0;
    for (let len = 1; len < 16; len++) {
      code |= bits(1);
      const c = h.count[len];
      if (code - c < first) return h.symbol[index + (code - first)];
      index += c; first += c; first <<= 1; code <<= 1;
    }
    throw new Error("inflate: a code that no table holds");
  };
  let last = 0;
  while (!last) {
    last = bits(1);
    const type = bits(2);
    if (type === 0) {  // stored
      buf = 0; cnt = 0;
      if (pos + 4 > src.length) throw new Error("inflate: the stream is cut short");
      const len = src[pos] | (src[pos + 1] << 8);
      pos += 4;
      if (pos + len > src.length) throw new Error("inflate: the stream is cut short");
      room(len); out.set(src.subarray(pos, pos + len), n); n += len; pos += len;
      continue;
    }
    let lit, dist;
    if (type === 1) {  // fixed codes
      const l = new Uint8Array(288);
      l.fill(8, 0, 144); l.fill(9, 144, 256); l.fill(7, 256, 280); l.fill(8, 280, 288);
      lit = huffman(l); dist = huffman(new Uint8Array(30).fill(5));
    } else if (type === 2) {  // dynamic codes
      const nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
      const cl = new Uint8Array(19);
      for (let i = 0; i < ncode; i++) cl[ORDER[i]] = bits(3);
      const ch = huffman(cl), lengths = new Uint8Array(nlen + ndist);
      for (let i = 0; i < nlen + ndist;) {
        const sym = decode(ch);
        if (sym < 16) { lengths[i++] = sym; continue; }
        let rep = 0, val = 0;
        if (sym === 16) {
          if (i === 0) throw new Error("inflate: a repeat with nothing before");
          val = lengths[i - 1]; rep = 3 + bits(2);
        } else {
          rep = sym === 17 ? 3 + bits(3) : 11 + bits(7);
        }
        if (i + rep > nlen + ndist) throw new Error("inflate: too many lengths");
        lengths.fill(val, i, i + rep); i += rep;
      }
      lit = huffman(lengths.subarray(0, nlen)); dist = huffman(lengths.subarray(nlen));
    } else {
      throw new Error("inflate: block type 3");
    }
    for (;;) {
      let sym = decode(lit);
      if (sym < 256) { room(1); out[n++] = sym; continue; }
      if (sym === 256) break;
      sym -= 257;
      if (sym >= 29) throw new Error("inflate: a bad length");
      const len = LBASE[sym] + bits(LEXT[sym]);
      const ds = decode(dist);
      if (ds >= 30) throw new Error("inflate: a bad distance");
      const d = DBASE[ds] + bits(DEXT[ds]);
      if (d > n) throw new Error("inflate: a distance before the start");
      room(len);
      for (let k = 0; k < len; k++, n++) out[n] = out[n - d];
    }
  }
  return out.subarray(0, n);
}

// One head as a Float32Array of the lower triangle (row i at rowStart(i)),
// decoded on first use; the last few heads stay cached.
const cache = new Map();
function decodeHead(l, h) {
  const key = l * H + h;
  if (cache.has(key)) return cache.get(key);
  const p = (async () => {
    const raw = inflate(bytesOf(D.attn[key]));
    if (raw.length < 4 * T) throw new Error(`head ${l}.${h}: ${raw.length} bytes`);
    const rowsEnd = raw.length - 4 * T;
    const maxima = new Float32Array(raw.slice(rowsEnd).buffer);
    const w = new Float32Array(rowStart(T));  // zeros: the keys a sparse row leaves out
    let o = 0;
    for (let i = 0; i < T; i++) {
      const s = maxima[i] / 255, at = rowStart(i);
      if (o >= rowsEnd) throw new Error(`head ${l}.${h}: row ${i} missing`);
      if (raw[o] === 0) {  // dense: levels of keys 0..i
        for (let j = 0; j <= i; j++) w[at + j] = raw[o + 1 + j] * s;
        o += 2 + i;
      } else {  // sparse: count, keys, levels
        const c = raw[o + 1] | (raw[o + 2] << 8), keys = o + 3, levels = keys + 2 * c;
        for (let k = 0; k < c; k++) {
          const j = raw[keys + 2 * k] | (raw[keys + 2 * k + 1] << 8);
          if (j > i) throw new Error(`head ${l}.${h}: row ${i} names key ${j}`);
          w[at + j] = raw[levels + k] * s;
        }
        o = levels + c;
      }
    }
    if (o !== rowsEnd) throw new Error(`head ${l}.${h}: ${rowsEnd - o} bytes left over`);
    return w;
  })();
  cache.set(key, p);
  if (cache.size > 12) cache.delete(cache.keys().next().value);
  return p;
}
function row(i) { return state.A.subarray(rowStart(i), rowStart(i) + i + 1); }

// Geometry: cells share the width the side panel leaves; token labels only
// when a cell is tall enough, position numbers always.
const maxChars = Math.min(14, Math.max(...D.tokens.map((t) => t.length), 1));
const room = Math.max(300, window.innerWidth - 48 - 30 - 18 - 360 - 60);
const cell = Math.max(1, Math.min(28, Math.floor(room / T)));
const showLabels = cell >= 9;
const x0 = showLabels ? Math.round(maxChars * 12 * 0.62 + 24) : 30;
const y0 = showLabels ? Math.round(maxChars * 12 * 0.62 * 0.82 + 16) : 12;
const size = T * cell;
const step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000].find((s) => s * cell >= 36) || 20000;

function mix(a) { return TRI.map((c, k) => Math.round(c + (ACCENT[k] - c) * a)); }

function drawMatrix() {
  const c = $("matrix"), o = $("overlay");
  c.width = o.width = x0 + size + 44;
  c.height = o.height = y0 + size + 34;
  const ctx = c.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
  const img = new ImageData(T, T), px = img.data;
  px.fill(255);  // white above the diagonal
  // T^2 pixels: no allocation and no DOM access per pixel.
  const boost = $("boost").checked;
  const d0 = ACCENT[0] - TRI[0], d1 = ACCENT[1] - TRI[1], d2 = ACCENT[2] - TRI[2];
  for (let i = 0; i < T; i++) {
    const r = row(i);
    for (let j = 0, at = 4 * i * T; j <= i; j++, at += 4) {
      const w = r[j], a = Math.min(1, boost ? Math.sqrt(w) : w);
      px[at] = Math.round(TRI[0] + d0 * a); px[at + 1] = Math.round(TRI[1] + d1 * a);
      px[at + 2] = Math.round(TRI[2] + d2 * a);
    }
  }
  const off = document.createElement("canvas");
  off.width = off.height = T;
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, x0, y0, size, size);
  drawAxes(ctx);
}

function drawAxes(ctx) {
  ctx.fillStyle = "#687385"; ctx.font = "10px system-ui, sans-serif";
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (let j = 0; j < T; j += step) ctx.fillText(String(j), x0 + j * cell + cell / 2, y0 + size + 4);
  ctx.textAlign = "left"; ctx.textBaseline = "middle";
  for (let i = 0; i < T; i += step) ctx.fillText(String(i), x0 + size + 4, y0 + i * cell + cell / 2);
  ctx.textAlign = "center"; ctx.textBaseline = "top"; ctx.font = "11px system-ui, sans-serif";
  ctx.fillText("keys (what is read) \u2192, positions", x0 + size / 2, y0 + size + 18);
  state.labels = [];
  if (!showLabels) return;
  const fs = Math.max(8, Math.min(12, cell * 0.72));
  ctx.fillStyle = "#1c2430"; ctx.font = `${fs}px ui-monospace, "DejaVu Sans Mono", monospace`;
  for (let i = 0; i < T; i++) {
    const text = label(D.tokens[i], 14);
    state.labels.push(text);
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(text, x0 - 6, y0 + i * cell + cell / 2);
    ctx.save();
    ctx.translate(x0 + i * cell + cell / 2, y0 - 6);
    ctx.rotate(-Math.PI / 3);
    ctx.textAlign = "left";
    ctx.fillText(text, 0, 0);
    ctx.restore();
  }
}

function summarize() {
  let prev = 0, ent = 0;
  for (let i = 0; i < T; i++) {
    const r = row(i);
    if (i > 0) prev += r[i - 1] / (T - 1);
    for (const w of r) if (w > 0) ent -= w * Math.log(w) / T;
  }
  $("summary").innerHTML = `layer ${LID[state.layer]}, head ${HID[state.head]} &middot; sink score <b>${row(T - 1)[0].toFixed(3)}</b>` +
    ` &middot; previous-token <b>${(T > 1 ? prev : 0).toFixed(3)}</b> &middot; entropy <b>${ent.toFixed(3)}</b> nats`;
}
)JS"
    R"JS(
function tokenStats(i) {
  const parts = [`position <b>${i}</b>`];
  if (D.z) parts.push(`z <b>${fmt(D.z[i], 2)}</b>`);
  if (D.norm) parts.push(`max norm <b>${fmt(D.norm[i], 1)}</b>`);
  if (D.entropy) parts.push(`next-token entropy <b>${fmt(D.entropy[i], 3)}</b> nats`);
  if (D.sinks && D.sinks.includes(i)) parts.push(`<span class="sink">sink</span>`);
  return parts.join(" &middot; ");
}

function showRow(i) {
  state.row = i;
  const r = row(i);
  let best = 0;
  for (let j = 1; j <= i; j++) if (r[j] > r[best]) best = j;
  const o = $("overlay"), ctx = o.getContext("2d");
  ctx.clearRect(0, 0, o.width, o.height);
  ctx.strokeStyle = "#f08c00"; ctx.lineWidth = 2;
  ctx.strokeRect(x0 - 1, y0 + i * cell - 1, (i + 1) * cell + 2, cell + 2);
  ctx.strokeRect(x0 + best * cell - 1, y0 + i * cell - 1, cell + 2, cell + 2);
  const tok = (s) => { const e = document.createElement("span"); e.className = "tok"; e.textContent = s; return e; };
  $("rtitle").textContent = "";
  $("rtitle").append(`Query ${i} `, tok(`\u201c${label(D.tokens[i], 30)}\u201d`),
                     ` (layer ${LID[state.layer]}, head ${HID[state.head]})`);
  $("qstats").innerHTML = tokenStats(i);
  drawLines(i, r);
  fillReadout(i, r, best);
}

// The head view: the hovered query (with its neighbours) on the left, the
// keys it reads most on the right, one line per key (opacity: weight
// relative to the row's largest, width: weight).
function drawLines(i, r) {
  const c = $("lines"), ctx = c.getContext("2d"), lh = 17, top = 10;
  ctx.clearRect(0, 0, c.width, c.height);
  const keys = [...r.keys()].sort((a, b) => r[b] - r[a] || a - b).slice(0, 16).sort((a, b) => a - b);
  const left = [];
  for (let k = Math.max(0, i - 7); k <= Math.min(T - 1, i + 7) && left.length < 16; k++) left.push(k);
  ctx.font = "11.5px ui-monospace, \"DejaVu Sans Mono\", monospace"; ctx.textBaseline = "middle";
  const yl = (n) => top + n * lh + lh / 2;
  left.forEach((k, n) => {
    ctx.fillStyle = k === i ? "#f08c00" : "#1c2430"; ctx.textAlign = "right";
    ctx.fillText(`${k} ${label(D.tokens[k], 9)}`, 128, yl(n));
  });
  const most = Math.max(...keys.map((j) => r[j]), 1e-9);
  keys.forEach((j, n) => {
    ctx.fillStyle = "#1c2430"; ctx.textAlign = "left";
    ctx.fillText(`${j} ${label(D.tokens[j], 9)} ${r[j].toFixed(3)}`, 232, yl(n));
    ctx.strokeStyle = `rgba(36,88,211,${(0.08 + 0.92 * opacity(r[j] / most)).toFixed(3)})`;
    ctx.lineWidth = 1 + 4 * r[j];
    ctx.beginPath(); ctx.moveTo(134, yl(left.indexOf(i))); ctx.lineTo(226, yl(n)); ctx.stroke();
  });
  state.lines = keys.length;
}

function fillReadout(i, r, best) {
  const order = [...Array(i + 1).keys()];
  if (i >= 24) order.sort((a, b) => r[b] - r[a] || a - b);
  const box = $("readout");
  box.textContent = "";
  box.dataset.row = i;
  for (const j of order.slice(0, 100)) {
    const e = document.createElement("div");
    e.className = "entry" + (j === best ? " top" : "");
    e.dataset.j = j;
    const pos = document.createElement("span"); pos.className = "pos"; pos.textContent = j;
    const t = document.createElement("span"); t.className = "tok"; t.textContent = label(D.tokens[j], 24);
    const bar = document.createElement("span"); bar.className = "bar";
    const fill = document.createElement("i"); fill.style.width = (100 * r[j]).toFixed(1) + "%"; bar.append(fill);
    const num = document.createElement("span"); num.className = "num"; num.textContent = r[j].toFixed(4);
    e.append(pos, t, bar, num);
    box.append(e);
  }
  if (order.length > 100) {
    const more = document.createElement("div"); more.className = "hint";
    more.textContent = `${order.length - 100} smaller weights not listed`;
    box.append(more);
  }
}

function onMove(e) {
  const rect = $("matrix").getBoundingClientRect();
  const i = Math.floor((e.clientY - rect.top - y0) / cell), j = Math.floor((e.clientX - rect.left - x0) / cell);
  const tip = $("tip");
  if (!state.A || i < 0 || i >= T || j < 0 || j >= T) { tip.style.display = "none"; return; }
  if (i !== state.row) showRow(i);
  const w = j <= i ? row(i)[j].toFixed(4) : "masked";
  tip.textContent = `query ${i} ${label(D.tokens[i], 16)} \u2192 key ${j} ${label(D.tokens[j], 16)}: ${w}` +
    (D.z ? `\nkey ${j}: z ${fmt(D.z[j], 2)}` + (D.norm ? `, max norm ${fmt(D.norm[j], 1)}` : "") : "");
  tip.style.left = e.clientX + 14 + "px"; tip.style.top = e.clientY + 12 + "px"; tip.style.display = "block";
}
)JS"
    R"JS(
function drawModelView() {
  const n = D.thumb_size, bytes = bytesOf(D.thumbs), grid = $("model-grid");
  const s = Math.max(28, Math.min(96, Math.floor((window.innerWidth - 140) / H) - 8));
  grid.style.gridTemplateColumns = `2.4em repeat(${H}, ${s + 2}px)`;
  grid.append(document.createElement("span"));
  for (let h = 0; h < H; h++) { const t = document.createElement("span"); t.className = "lab"; t.textContent = "H" + HID[h]; grid.append(t); }
  for (let l = 0; l < L; l++) {
    const t = document.createElement("span"); t.className = "lab"; t.textContent = "L" + LID[l]; grid.append(t);
    for (let h = 0; h < H; h++) {
      const c = document.createElement("canvas");
      c.width = c.height = n; c.className = "thumb"; c.dataset.l = l; c.dataset.h = h;
      c.style.width = c.style.height = s + "px";
      c.title = `layer ${LID[l]}, head ${HID[h]} \u00b7 sink score ${fmt(D.sink[l][h], 3)}`;
      const img = new ImageData(n, n), base = (l * H + h) * n * n;
      for (let a = 0; a < n; a++) {
        for (let b = 0; b < n; b++) {
          const rgb = b <= a ? mix(Math.sqrt(bytes[base + a * n + b] / 255)) : [255, 255, 255];
          img.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * (a * n + b));
        }
      }
      c.getContext("2d").putImageData(img, 0, 0);
      c.addEventListener("click", () => { showTab("head"); select(l, h); });
      grid.append(c);
    }
  }
}

function showTab(which) {
  $("model-main").style.display = which === "model" ? "flex" : "none";
  $("head-main").style.display = which === "head" ? "flex" : "none";
  $("tab-model").classList.toggle("on", which === "model");
  $("tab-head").classList.toggle("on", which === "head");
}

function select(l, h) {
  state.layer = l; state.head = h;
  $("layer").value = String(l); $("head").value = String(h);
  document.querySelectorAll(".thumb.sel").forEach((e) => e.classList.remove("sel"));
  const t = document.querySelector(`.thumb[data-l="${l}"][data-h="${h}"]`);
  if (t) t.classList.add("sel");
  state.pending = decodeHead(l, h).then((A) => {
    if (state.layer !== l || state.head !== h) return;
    state.A = A;
    drawMatrix();
    summarize();
    if (state.row >= 0) showRow(state.row);
  }).catch((e) => { errors.push(String(e)); $("summary").textContent = "cannot decode this head: " + e; });
  return state.pending;
}

function setup() {
  $("meta").textContent = `${D.title} \u00b7 ${T} tokens \u00b7 ${L} layers \u00d7 ${H} heads` +
    (D.model_layers && L * H < D.model_layers * D.model_heads ? ` (of the model's ${D.model_layers} \u00d7 ${D.model_heads})` : "") +
    (D.truncated_rows > 0 ? ` \u00b7 ${D.truncated_rows} rows show their ${D.row_keys} largest weights (select fewer heads with --viewer-layers/--viewer-heads to see every weight)` : "");
  $("prompt").textContent = D.prompt;
  for (const [id, ids] of [["layer", LID], ["head", HID]]) {
    for (let k = 0; k < ids.length; k++) {
      const o = document.createElement("option"); o.value = String(k); o.textContent = String(ids[k]); $(id).append(o);
    }
    $(id).addEventListener("change", () => select(+$("layer").value, +$("head").value));
  }
  $("boost").addEventListener("change", () => { if (state.A) { drawMatrix(); if (state.row >= 0) showRow(state.row); } });
  $("tab-model").addEventListener("click", () => showTab("model"));
  $("tab-head").addEventListener("click", () => showTab("head"));
  $("matrix").addEventListener("mousemove", onMove);
  $("matrix").addEventListener("mouseleave", () => { $("tip").style.display = "none"; });
  document.addEventListener("keydown", (e) => {
    if (state.A && (e.key === "ArrowDown" || e.key === "ArrowUp")) {
      showRow(Math.min(T - 1, Math.max(0, state.row + (e.key === "ArrowDown" ? 1 : -1))));
      e.preventDefault();
    }
  });
  drawModelView();
  if (L * H > 1) showTab("model");
  return select(0, 0);
}

// FILE#test=l,h,i: select the head through the controls, move the mouse over
// row i (key 0) of the matrix, read the row back from the canvas and report
// what is drawn (for the headless-browser test). FILE#model shows the model view.
async function testHook(ready) {
  if (location.hash === "#model") { showTab("model"); return; }
  const m = /^#test=(\d+),(\d+),(\d+)$/.exec(location.hash);
  if (!m) return;
  await ready;
  showTab("head");
  $("layer").value = String(LID.indexOf(+m[1])); $("layer").dispatchEvent(new Event("change", { bubbles: true }));
  $("head").value = String(HID.indexOf(+m[2])); $("head").dispatchEvent(new Event("change", { bubbles: true }));
  await state.pending;
  const i = +m[3], c = $("matrix"), rect = c.getBoundingClientRect();
  c.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: rect.left + x0 + cell / 2,
                                                clientY: rect.top + y0 + (i + 0.5) * cell }));
  const line = c.getContext("2d").getImageData(x0, y0 + Math.floor((i + 0.5) * cell), size, 1).data;
  const drawn = [];
  let upper = 0;
  for (let j = 0; j < T; j++) {
    const red = line[4 * (j * cell + Math.floor(cell / 2))];
    if (j <= i) drawn.push((TRI[0] - red) / (TRI[0] - ACCENT[0])); else upper += red !== 255;
  }
  const thumbs = [...document.querySelectorAll(".thumb")];
  $("test-output").textContent = JSON.stringify({
    errors, layer: LID[state.layer], head: HID[state.head], row: state.row, cell,
    ready_ms: readyMs, reported_ms: performance.now(),
    weights: Array.from(row(i)), drawn, upper_drawn: upper,
    readout: [...document.querySelectorAll("#readout .entry")].map((e) => ({
      j: +e.dataset.j, num: e.querySelector(".num").textContent })),
    labels: state.labels, qstats: $("qstats").textContent, tip: $("tip").textContent,
    lines: state.lines, canvas: [c.width, c.height], thumbs: thumbs.length,
    thumbs_drawn: thumbs.filter((t) => t.getContext("2d").getImageData(0, 0, 1, 1).data[0] !== 255).length,
  });
}

// When the first head was drawn, in ms after the navigation started.
let readyMs = null;
const ready = setup();
ready.then(() => { readyMs = performance.now(); });
testHook(ready);
)JS";

}  // namespace attnscope::engine::internal
