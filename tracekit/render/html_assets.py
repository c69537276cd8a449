"""The inline CSS and JavaScript of the ``tracekit report`` page (:mod:`tracekit.render.html`).

Both are constants written into the page, so the report is one file that fetches nothing (its
Content-Security-Policy forbids any fetch). The script only reads ``data-*`` attributes the
renderer wrote and builds:

- the rank map of the world section: one cell per rank, coloured by its rank group (missing
  ranks hatched); clicking a cell looks the rank up;
- the rank finder: type a rank (or open the page with ``#rank=777``) and every group, divergence
  row and did-nothing row holding it is highlighted, with a one-line answer;
- copy buttons for the ``tracekit explain`` commands and the cap sweep's config line;
- in the cap sweep, the recommended cap's table row marked (``tr.rec``), and the row of the
  point under the pointer.

When the script has run, ``<body data-js="ready">``: the browser test checks it.
"""

CSS = """
:root{--fg:#1d2430;--muted:#5b6472;--line:#d8dde4;--bg:#fff;--soft:#f5f7fa;
--ag:#3b7dd8;--rs:#d9822b;--ar:#8e5bd0;--ok:#1f8a4c;--bad:#c2352b;--warn:#b7791f;--none:#6b7280}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
color:var(--fg);background:var(--bg)}
header{padding:14px 24px 10px;border-bottom:1px solid var(--line);background:var(--soft)}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:16px;margin:0 0 8px}
h3{font-size:14px;margin:14px 0 6px}
main{padding:4px 24px 24px;max-width:1400px}
section{padding:14px 0;border-bottom:1px solid var(--line);
content-visibility:auto;contain-intrinsic-size:auto 600px}
nav a{margin-right:12px;color:var(--muted);text-decoration:none;font-size:13px}
nav a:hover{text-decoration:underline}
.paths,.muted{color:var(--muted);font-size:13px}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;margin:4px 0 8px;font-size:13px}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.hit td,.group.hit>h3,p.hit,span.hit{background:#fff3bf}
.verdict{border-left:6px solid var(--none);padding:10px 14px;margin-top:14px;background:var(--soft);
border-bottom:none}
.verdict p.line{font-size:17px;font-weight:600;margin:2px 0 6px}
.verdict-agree{border-color:var(--ok)}.verdict-agree p.line{color:var(--ok)}
.verdict-diverge{border-color:var(--bad)}.verdict-diverge p.line{color:var(--bad)}
.verdict-incomplete{border-color:var(--warn)}.verdict-incomplete p.line{color:var(--warn)}
.stats span{display:inline-block;margin-right:18px}
dl.world{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:4px 0}
dl.world dt{color:var(--muted)}dl.world dd{margin:0}
#rank-map{display:flex;flex-wrap:wrap;gap:1px;max-width:833px;margin:8px 0}
#rank-map i{width:12px;height:12px;background:var(--line);cursor:pointer}
#rank-map.small i{width:5px;height:5px}
#rank-map i.missing{background:repeating-linear-gradient(45deg,#fff 0 2px,var(--bad) 2px 4px)}
#rank-map i.sel{outline:2px solid var(--fg)}
.swatch{display:inline-block;width:11px;height:11px;margin-right:6px;vertical-align:-1px;
background:var(--line)}
.c0{background:#4c78a8!important}.c1{background:#f58518!important}.c2{background:#54a24b!important}
.c3{background:#e45756!important}.c4{background:#72b7b2!important}.c5{background:#b279a2!important}
.c6{background:#eeca3b!important}.c7{background:#9d755d!important}
.finder{margin-top:8px;font-size:13px}
.finder input{width:90px;margin-left:6px;padding:2px 4px}
.finder output{margin-left:10px;font-weight:600}
details{margin:4px 0}summary{cursor:pointer;color:var(--muted)}
svg.sizes{display:block;margin:2px 0 12px;background:var(--soft);border:1px solid var(--line)}
svg.sizes text{font-size:11px;fill:var(--muted)}
svg.sweep{display:block;margin:2px 0 12px;background:var(--soft);border:1px solid var(--line)}
svg.sweep text{font-size:11px;fill:var(--muted)}svg.sweep .grid{stroke:var(--line)}
svg.sweep .line{fill:none;stroke:var(--ag);stroke-width:1.5}svg.sweep.peak .line{stroke:var(--rs)}
svg.sweep .pt{fill:var(--fg)}svg.sweep .pt.front{fill:var(--ok)}
svg.sweep .front{fill:none;stroke:var(--ok);stroke-width:1.5;stroke-dasharray:4 2}
svg.sweep line.mark{stroke-width:1.5;stroke-dasharray:3 3}svg.sweep line.recorded{stroke:var(--muted)}
svg.sweep line.recommended{stroke:var(--ok)}svg.sweep text.recommended{fill:var(--ok)}
table.sweep tr.rec td{background:#e6f4ea}
svg.sweep rect.measured{fill:var(--rs);stroke:var(--fg)}svg.sweep line.best{stroke:var(--ok)}svg.sweep text.best{fill:var(--ok)}
pre.config{display:inline-block;margin:4px 0;padding:4px 8px;background:var(--soft);border:1px solid var(--line)}
svg.sizes .AG{fill:var(--ag)}svg.sizes .RS{fill:var(--rs)}svg.sizes .AR{fill:var(--ar)}
.legend span{margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:0 20px}
button.copy{font-size:11px;margin-left:6px;padding:0 6px}
footer{padding:10px 24px;color:var(--muted);font-size:12px}
"""

JS = r"""
(function () {
  "use strict";
  function spans(text) {
    var out = [];
    (text || "").split(",").forEach(function (part) {
      var m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
      if (m) out.push([+m[1], m[2] === undefined ? +m[1] : +m[2]]);
    });
    return out;
  }
  function holds(sp, r) {
    for (var i = 0; i < sp.length; i++) if (r >= sp[i][0] && r <= sp[i][1]) return true;
    return false;
  }
  var items = Array.prototype.map.call(document.querySelectorAll("[data-ranks]"), function (el) {
    return {el: el, sp: spans(el.getAttribute("data-ranks"))};
  });
  var input = document.getElementById("rank-find");
  var answer = document.getElementById("rank-found");
  var map = document.getElementById("rank-map");
  function find() {
    var v = input.value.trim(), r = /^\d+$/.test(v) ? +v : null, where = [], hits = 0;
    items.forEach(function (it) {
      var on = r !== null && holds(it.sp, r);
      it.el.classList.toggle("hit", on);
      if (!on) return;
      hits++;
      var w = it.el.getAttribute("data-where");
      if (w && where.indexOf(w) < 0) where.push(w);
    });
    if (map) Array.prototype.forEach.call(map.children, function (c) {
      c.classList.toggle("sel", r !== null && +c.getAttribute("data-rank") === r);
    });
    answer.textContent = r === null ? "" :
      "rank " + r + ": " + (hits ? where.join("; ") : "not in this report");
    document.body.setAttribute("data-found", r === null ? "" : String(hits));
  }
  input.addEventListener("input", find);
  if (map) {
    var last = +map.getAttribute("data-last"), colour = [];
    document.querySelectorAll(".group[data-colour]").forEach(function (g) {
      var c = g.getAttribute("data-colour");
      spans(g.getAttribute("data-ranks")).forEach(function (s) {
        for (var r = s[0]; r <= Math.min(s[1], last); r++) colour[r] = c;
      });
    });
    var missing = spans(map.getAttribute("data-missing"));
    var frag = document.createDocumentFragment();
    for (var r = 0; r <= last; r++) {
      var cell = document.createElement("i");
      cell.setAttribute("data-rank", String(r));
      if (colour[r] !== undefined) cell.className = colour[r];
      else if (holds(missing, r)) cell.className = "missing";
      cell.title = "rank " + r;
      frag.appendChild(cell);
    }
    map.appendChild(frag);
    map.addEventListener("click", function (ev) {
      var r = ev.target.getAttribute("data-rank");
      if (r !== null) { input.value = r; find(); }
    });
  }
  document.querySelectorAll("button.copy").forEach(function (b) {
    b.hidden = false;
    b.addEventListener("click", function () {
      var text = b.getAttribute("data-copy");
      var done = function () { b.textContent = "copied"; };
      var failed = function () { b.textContent = "select the text to copy"; };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, failed);
      } else failed();
    });
  });
  var sweep = document.getElementById("sweep");
  if (sweep) {
    var rows = sweep.querySelectorAll("tr[data-cap]");
    var pick = function (cap, cls) {
      Array.prototype.forEach.call(rows, function (tr) {
        tr.classList.toggle(cls, tr.getAttribute("data-cap") === cap);
      });
    };
    var rec = sweep.querySelector("line.mark.recommended");
    if (rec) pick(rec.getAttribute("data-cap"), "rec");
    sweep.addEventListener("mouseover", function (ev) {
      var cap = ev.target.getAttribute && ev.target.getAttribute("data-cap");
      if (cap !== null && ev.target.tagName === "circle") pick(cap, "hit");
    });
  }
  var m = /rank=(\d+)/.exec(location.hash);
  if (m) { input.value = m[1]; find(); }
  document.body.setAttribute("data-js", "ready");
})();
"""
