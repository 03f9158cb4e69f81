// The viewer's page template (see viewer_html.h): HTML and CSS; the script is
// in viewer_script.cc. No network access of any kind.
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
header { padding:12px 24px 10px; background:#fff; border-bottom:1px solid var(--line); }
header h1 { margin:0; font-size:18px; font-weight:600; }
header h1 span { color:var(--muted); font-weight:400; }
.meta { color:var(--muted); font-size:13px; margin-top:2px; }
.prompt { margin-top:6px; font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace; white-space:pre-wrap;
          max-height:2.9em; overflow:hidden; color:#37404d; }
nav { display:flex; gap:4px; padding:10px 24px 0; }
nav button { font:inherit; border:1px solid var(--line); border-bottom:none; background:#e9ecf1;
             padding:5px 14px; border-radius:6px 6px 0 0; cursor:pointer; color:var(--muted); }
nav button.on { background:#fff; color:var(--ink); font-weight:600; }
main { display:flex; gap:18px; padding:0 24px 16px; align-items:flex-start; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:12px 14px; }
#matrix-card { flex:0 1 auto; min-width:0; overflow:auto; max-height:calc(100vh - 150px); }
#model-card { flex:1 1 auto; overflow:auto; max-height:calc(100vh - 150px); }
.controls { display:flex; gap:16px; align-items:center; margin-bottom:8px; flex-wrap:wrap; }
.controls label { font-weight:500; }
select { font:inherit; padding:2px 6px; border:1px solid #c5ccd6; border-radius:5px; background:#fff; }
.summary { color:var(--muted); font-size:12.5px; margin-bottom:6px; }
.summary b { color:var(--ink); font-weight:600; }
#side { flex:0 0 360px; display:flex; flex-direction:column; gap:14px; }
h2 { font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); margin:0 0 8px; }
.wrap { position:relative; }
#overlay { position:absolute; left:0; top:0; pointer-events:none; }
#tip { position:fixed; display:none; background:#1c2430; color:#fff; font-size:12px; padding:4px 8px;
       border-radius:4px; pointer-events:none; white-space:pre; z-index:5; }
.rtitle { margin-bottom:6px; }
.stats { font-size:12.5px; color:var(--muted); margin-bottom:8px; }
.stats b { color:var(--ink); font-weight:600; }
.stats .sink { color:#b00020; font-weight:700; }
.tok { font-family:ui-monospace,"DejaVu Sans Mono",monospace; }
#readout { max-height:300px; overflow-y:auto; }
.entry { display:grid; grid-template-columns:3.2em minmax(5em,9em) 1fr 4.2em; gap:8px; align-items:center;
         font-size:12.5px; padding:1px 2px; border-radius:3px; }
.entry .pos { color:var(--muted); text-align:right; }
.entry .tok { white-space:pre; overflow:hidden; text-overflow:ellipsis; }
.entry .bar { height:9px; background:var(--tri); border-radius:2px; overflow:hidden; }
.entry .bar i { display:block; height:100%; background:var(--accent); }
.entry .num { text-align:right; font-variant-numeric:tabular-nums; }
.entry.top { background:#fff4e0; }
.entry.top .num { font-weight:700; color:#b35c00; }
.hint { color:var(--muted); font-size:12.5px; }
.grid { display:grid; gap:6px; align-items:center; }
.grid .lab { color:var(--muted); font-size:11px; text-align:center; }
.thumb { cursor:pointer; border:1px solid var(--line); border-radius:3px; image-rendering:pixelated;
         display:block; }
.thumb:hover { border-color:var(--accent); }
.thumb.sel { border:2px solid var(--hl); }
#test-output { display:none; }
</style>
</head>
<body>
<header>
  <h1>attnscope <span>attention viewer</span></h1>
  <div class="meta" id="meta"></div>
  <div class="prompt" id="prompt"></div>
</header>
<nav><button id="tab-model">Model view</button><button id="tab-head" class="on">Head view</button></nav>
<main id="model-main" style="display:none">
  <div class="card" id="model-card">
    <div class="hint" style="margin-bottom:8px">Every head's pattern (rows are queries, columns keys;
      shade &radic;max weight of each block). Click a head to open it.</div>
    <div class="grid" id="model-grid"></div>
  </div>
</main>
<main id="head-main">
  <div class="card" id="matrix-card">
    <div class="controls">
      <label>Layer <select id="layer"></select></label>
      <label>Head <select id="head"></select></label>
      <label class="hint"><input type="checkbox" id="boost"> boost faint weights (&radic;w)</label>
    </div>
    <div class="summary" id="summary"></div>
    <div class="wrap"><canvas id="matrix"></canvas><canvas id="overlay"></canvas></div>
    <div class="hint">Rows are queries, columns are keys (numbers are positions); the upper triangle
      is empty (causal mask). Hover a row (or use &uarr; &darr;) to see what that token reads.</div>
  </div>
  <div id="side">
    <div class="card">
      <h2>What the query reads</h2>
      <div class="rtitle" id="rtitle">Hover a row of the matrix.</div>
      <div class="stats" id="qstats"></div>
      <canvas id="lines" width="360" height="300"></canvas>
    </div>
    <div class="card">
      <h2>Weights</h2>
      <div id="readout"></div>
    </div>
  </div>
</main>
<div id="tip"></div>
<pre id="test-output"></pre>
<script type="application/json" id="attnscope-data">__ATTNSCOPE_DATA__</script>
<script>
__ATTNSCOPE_SCRIPT__
</script>
</body>
</html>
)HTML";

}  // namespace attnscope::engine::internal
