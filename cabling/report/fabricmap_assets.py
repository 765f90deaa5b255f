"""The style sheet and script the fabric map page carries inline (kept here so the package needs no
data files)."""

CSS = r"""
body{font:13px/1.35 system-ui,sans-serif;margin:0;color:#222}
header{display:flex;gap:16px;align-items:center;padding:6px 12px;border-bottom:1px solid #ccc;flex-wrap:wrap}
h1{font-size:16px;margin:0}h2{font-size:14px;margin:10px 12px 4px}
#summary{color:#555}#summary b{color:#c00}
form{display:flex;gap:4px}input{width:220px;padding:3px}
main{display:flex;height:72vh;border-bottom:1px solid #ccc}
#map{flex:1;background:#fbfbfb;cursor:grab;user-select:none}
#info{width:330px;overflow:auto;padding:8px 12px;border-left:1px solid #ccc;background:#fff}
#info h3{margin:4px 0;font-size:14px}#info li{font-family:monospace;font-size:12px}
.grp rect{fill:#eef3fa;stroke:#9ab;stroke-width:1}
.grp.bad rect{stroke:#d62728;stroke-width:2.5}
.grp text{font-size:11px;fill:#345}
.tier{font-size:14px;fill:#777;font-weight:600}
.dev{fill:#1f77b4}.dev.host{fill:#2ca02c}.dev.bad{fill:#d62728}
.dev.hit{stroke:#000;stroke-width:2}
.edge{stroke:#8aa;opacity:.55}.edge.bad{stroke:#d62728;opacity:.8}
.elabel{font-size:10px;fill:#456}
.fault{stroke:#d62728;stroke-width:2.2}.fault.dash{stroke-dasharray:6 4}
.hl{stroke:#ff7f0e;stroke-width:5;opacity:.9}.hl.dash{stroke-dasharray:8 5}
.dlabel{font-size:9px;fill:#333;display:none}.dlabel.bad{display:block;fill:#c00;font-weight:600;font-size:11px}
svg.close .dlabel{display:block}
.hllabel{font-size:12px;fill:#b35000;font-weight:600}
table{border-collapse:collapse;margin:0 12px 20px}td,th{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
tbody tr{cursor:pointer}tbody tr:hover{background:#fff3e0}tbody tr.sel{background:#ffe0b2}tbody tr.child td:nth-child(3){padding-left:1.2em;color:#555}
.error{color:#c00}.warning{color:#b36b00}
"""

JS = r"""
(function(){
"use strict";
const D = JSON.parse(document.getElementById('data').textContent);
const NS = 'http://www.w3.org/2000/svg';
const svg = document.getElementById('map');
const info = document.getElementById('info');
const el = (tag, attrs, parent, text) => {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
};
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const W = D.size[0], H = D.size[1];
// Text keeps a readable size when the whole fabric is on the screen.
const FONT = Math.min(Math.max(11, W / 140), 22);
document.head.appendChild(document.createElement('style')).textContent =
  '.grp text{font-size:' + FONT + 'px}.tier{font-size:' + FONT * 1.3 + 'px}.dlabel.bad{font-size:' + Math.max(11, FONT * 0.8) + 'px}.elabel{font-size:' + FONT * 0.8 + 'px}.hllabel{font-size:' + FONT + 'px}';
const layers = {};
for (const name of ['edges', 'groups', 'devs', 'faults', 'labels', 'hl']) layers[name] = el('g', {id: name}, svg);
// Tier names at the left of each row.
const tierY = {};
for (const g of D.groups) tierY[g[1]] = Math.min(tierY[g[1]] === undefined ? 1e9 : tierY[g[1]], g[3]);
for (const t in tierY) el('text', {x: -20, y: tierY[t] + FONT, 'text-anchor': 'end', class: 'tier'}, layers.labels, D.tiers[t]);
// Groups and their members.
const gCenter = D.groups.map(g => [g[2] + g[4] / 2, g[3] + g[5] / 2]);
D.groups.forEach((g, i) => {
  const box = el('g', {class: 'grp' + (g[7] ? ' bad' : ''), 'data-group': i}, layers.groups);
  el('rect', {x: g[2], y: g[3], width: g[4], height: g[5], rx: 4}, box);
  // A label longer than its box is cut (the tooltip has it whole), so neighbours never overlap.
  let label = g[0] + ' (' + g[6] + ')';
  const fit = Math.floor((g[4] + 12) / (FONT * 0.58));
  if (label.length > fit) label = label.slice(0, Math.max(fit - 1, 3)) + '\u2026';
  el('text', {x: g[2] + 2, y: g[3] - 4}, box, label);
  el('title', {}, box, g[0] + ': ' + g[6] + ' device(s)' + (g[7] ? ', ' + g[7] + ' faulty' : ''));
});
const devEls = D.devices.map((d, i) => {
  const r = el('rect', {x: d[3] - 4, y: d[4] - 4, width: 8, height: 8, class: 'dev ' + (d[1] ? 'switch' : 'host') + (d[5] ? ' bad' : ''), 'data-name': d[0], 'data-i': i}, layers.devs);
  el('title', {}, r, d[0] + (d[7] !== null ? ' (rail ' + d[7] + ')' : '') + (d[8] ? ' rack ' + d[8] : ''));
  el('text', {x: d[3] + 6, y: d[4] - 5, class: 'dlabel' + (d[5] ? ' bad' : ''), 'data-name': d[0]}, layers.labels, d[0]);
  return r;
});
// One line per pair of groups, as thick as its cable count is large.
const badPairs = new Set();
const gOf = ep => ep[0] >= 0 ? D.devices[ep[0]][2] : -1;
for (const f of D.findings) for (const [a, b] of cablesOf(f)) badPairs.add(Math.min(gOf(a), gOf(b)) + ',' + Math.max(gOf(a), gOf(b)));
for (const [a, b, n] of D.edges) {
  const ga = D.groups[a], gb = D.groups[b];
  const up = ga[3] < gb[3] ? ga : gb, down = up === ga ? gb : ga;
  const x1 = up[2] + up[4] / 2, y1 = up[3] + up[5], x2 = down[2] + down[4] / 2, y2 = down[3];
  const line = el('line', {x1, y1, x2, y2, class: 'edge' + (badPairs.has(a + ',' + b) ? ' bad' : ''), 'stroke-width': Math.min(1 + Math.log2(n), 9)}, layers.edges);
  el('title', {}, line, ga[0] + ' - ' + gb[0] + ': ' + n + ' cable(s)');
  if (D.edges.length <= 400) el('text', {x: (x1 + x2) / 2 + 3, y: (y1 + y2) / 2, class: 'elabel'}, layers.edges, n);
}
// Each finding's cable between the devices it names (moved: the wrong one solid, the right one dashed).
function cablesOf(f) {
  const e = f[5], out = [];
  if (f[0] === 'moved' && e.length === 3) { out.push([e[0], e[1], false], [e[0], e[2], true]); }
  else if (f[0] === 'swapped' && e.length === 4) { out.push([e[0], e[3], false], [e[2], e[1], false]); }
  else if (e.length >= 2) { for (let k = 0; k + 1 < e.length; k += 2) out.push([e[k], e[k + 1], f[0] === 'missing' || f[0] === 'down']); }
  else if (e.length === 1) out.push([e[0], e[0], false]);
  return out;
}
function pos(ep) { return ep[0] >= 0 ? [D.devices[ep[0]][3], D.devices[ep[0]][4]] : null; }
D.findings.forEach((f, i) => {
  for (const [a, b, dash] of cablesOf(f)) {
    const pa = pos(a) || pos(b), pb = pos(b) || pos(a);
    if (!pa) continue;
    const l = el('line', {x1: pa[0], y1: pa[1], x2: pb[0], y2: pb[1] + (pa === pb ? 30 : 0), class: 'fault' + (dash ? ' dash' : ''), 'data-finding': i}, layers.faults);
    el('title', {}, l, f[2] + '\nfix: ' + f[3]);
  }
});
// Zoom and pan on the viewBox.
let vb = [0, 0, W, H];
function apply() {
  svg.setAttribute('viewBox', vb.join(' '));
  const scale = svg.clientWidth / vb[2];
  svg.classList.toggle('close', scale > 1.6);
  report();
}
function fit() { const m = 60; vb = [-m - 60, -m / 2, W + 2 * m + 60, H + m]; const r = svg.clientHeight / svg.clientWidth; if (vb[3] / vb[2] < r) { const h = vb[2] * r; vb[1] -= (h - vb[3]) / 2; vb[3] = h; } else { const w = vb[3] / r; vb[0] -= (w - vb[2]) / 2; vb[2] = w; } apply(); }
function zoom(f, cx, cy) {
  if (cx === undefined) { cx = vb[0] + vb[2] / 2; cy = vb[1] + vb[3] / 2; }
  vb = [cx - (cx - vb[0]) * f, cy - (cy - vb[1]) * f, vb[2] * f, vb[3] * f]; apply();
}
function focus(points, minW) {
  const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const r = svg.clientHeight / svg.clientWidth;
  const w = Math.max(x1 - x0 + 160, (y1 - y0 + 160) / r, minW || 300);
  vb = [(x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - w * r / 2, w, w * r]; apply();
}
function toMap(ev) { const b = svg.getBoundingClientRect(); return [vb[0] + (ev.clientX - b.left) / b.width * vb[2], vb[1] + (ev.clientY - b.top) / b.height * vb[3]]; }
svg.addEventListener('wheel', ev => { ev.preventDefault(); const p = toMap(ev); zoom(ev.deltaY > 0 ? 1.2 : 1 / 1.2, p[0], p[1]); }, {passive: false});
let drag = null;
svg.addEventListener('mousedown', ev => { drag = [ev.clientX, ev.clientY, vb[0], vb[1]]; svg.style.cursor = 'grabbing'; });
window.addEventListener('mouseup', () => { drag = null; svg.style.cursor = ''; });
window.addEventListener('mousemove', ev => {
  if (!drag) return; const b = svg.getBoundingClientRect();
  vb[0] = drag[2] - (ev.clientX - drag[0]) / b.width * vb[2]; vb[1] = drag[3] - (ev.clientY - drag[1]) / b.height * vb[3]; apply();
});
document.getElementById('fit').onclick = fit;
document.getElementById('zin').onclick = () => zoom(1 / 1.5);
document.getElementById('zout').onclick = () => zoom(1.5);
// Search: a host, a switch or a GUID (with or without 0x); shows the device and its cables.
let byIndex = null;
function cablesOfDevice(i) {
  if (!byIndex) { byIndex = {}; for (const l of D.links) { (byIndex[l[0]] = byIndex[l[0]] || []).push(l); if (l[2] !== l[0]) (byIndex[l[2]] = byIndex[l[2]] || []).push(l); } }
  return byIndex[i] || [];
}
function clearHl() { layers.hl.textContent = ''; for (const r of svg.querySelectorAll('.dev.hit')) r.classList.remove('hit'); for (const r of document.querySelectorAll('tr.sel')) r.classList.remove('sel'); }
function find(q) {
  q = q.trim().toLowerCase().replace(/^0x/, '');
  if (!q) return false;
  let hit = D.devices.findIndex(d => d[0].toLowerCase() === q);
  if (hit < 0) hit = D.devices.findIndex(d => d[6] && d[6].split(' ').some(g => g.replace(/^0x/, '') === q));
  if (hit < 0) hit = D.devices.findIndex(d => d[0].toLowerCase().includes(q));
  clearHl();
  if (hit < 0) { info.innerHTML = '<h3>not found</h3><p>No host, switch or GUID matches <code>' + esc(q) + '</code>.</p>'; report(); return false; }
  const d = D.devices[hit];
  devEls[hit].classList.add('hit');
  const cables = cablesOfDevice(hit);
  const name = i => i >= 0 ? D.devices[i][0] : '?';
  const lines = cables.slice(0, 300).map(l => l[0] === hit ? esc(l[1]) + ' &rarr; ' + esc(name(l[2]) + ':' + l[3]) : esc(l[3]) + ' &rarr; ' + esc(name(l[0]) + ':' + l[1]));
  const fs = D.findings.map((f, i) => [f, i]).filter(([f]) => f[5].some(e => e[0] === hit));
  info.innerHTML = '<h3 id="found">' + esc(d[0]) + '</h3><p>' + esc(d[9]) + ' in ' + esc(D.groups[d[2]][0]) +
    (d[7] !== null ? ', rail ' + d[7] : '') + (d[8] ? ', rack ' + esc(d[8]) : '') + (d[6] ? '<br>GUID ' + esc(d[6]) : '') + '</p>' +
    (fs.length ? '<p class="error">' + fs.length + ' finding(s): ' + fs.map(([f, i]) => '#' + (i + 1) + ' ' + esc(f[0])).join(', ') + '</p>' : '') +
    '<p>' + cables.length + ' cable(s):</p><ul>' + lines.map(s => '<li>' + s + '</li>').join('') + '</ul>';
  const p = [d[3], d[4]];
  for (const l of cables.slice(0, 64)) { const o = l[0] === hit ? l[2] : l[0]; if (o >= 0) el('line', {x1: p[0], y1: p[1], x2: D.devices[o][3], y2: D.devices[o][4], class: 'hl'}, layers.hl); }
  focus([p], 420);
  return true;
}
document.getElementById('find').onsubmit = ev => { ev.preventDefault(); find(document.getElementById('q').value); };
// Findings table: a click shows that finding's cable.
const tbody = document.querySelector('#findings tbody');
// What a root cause explains (its switches, their cables), for show().
function under(i) {
  const out = [];
  D.findings.forEach((g, j) => { if (g[6] === i) { out.push(j); out.push(...under(j)); } });
  return out;
}
function show(i) {
  const f = D.findings[i]; if (!f) return;
  clearHl();
  const row = tbody.children[i]; if (row) row.classList.add('sel');
  const pts = [];
  let k = 0;
  const kids = under(i);
  const drawn = cablesOf(f).concat(...kids.map(j => cablesOf(D.findings[j])));
  for (const [a, b, dash] of drawn) {
    const pa = pos(a) || pos(b), pb = pos(b) || pos(a);
    if (!pa) continue;
    el('line', {x1: pa[0], y1: pa[1], x2: pb[0], y2: pb[1], class: 'hl' + (dash ? ' dash' : '')}, layers.hl);
    // Port names stacked, one line per cable, so two cables at one device stay readable.
    el('text', {x: pa[0] + 8, y: pa[1] - 10 - k * FONT * 1.2, class: 'hllabel'}, layers.hl, a[1]);
    if (pb !== pa) el('text', {x: pb[0] + 8, y: pb[1] + 18 + k * FONT * 1.2, class: 'hllabel'}, layers.hl, b[1]);
    k++;
    pts.push(pa, pb);
    for (const e of [a, b]) if (e[0] >= 0) devEls[e[0]].classList.add('hit');
  }
  info.innerHTML = '<h3 id="cable">#' + (i + 1) + ' ' + esc(f[0]) + '</h3><p>' + esc(f[2]) + '</p><p><b>fix:</b> ' + esc(f[3]) + '</p>' +
    '<p>ports: ' + f[5].map(e => '<code>' + esc(e[1]) + '</code>').join(', ') + '</p><p>' + esc(f[4]) + '</p>' +
    (kids.length ? '<p id="under">then ' + kids.length + ' under it:</p><ul>' + kids.slice(0, 300).map(j => '<li>#' + (j + 1) + ' ' + esc(D.findings[j][0]) + ': ' + esc(D.findings[j][3] || D.findings[j][2]) + '</li>').join('') + '</ul>' : '') +
    (pts.length ? '' : '<p>(these devices are not in the manifest)</p>');
  if (pts.length) focus(pts, 360);
}
D.findings.forEach((f, i) => {
  const tr = document.createElement('tr');
  if (f[6] >= 0) tr.className = 'child';
  tr.innerHTML = '<td>' + (i + 1) + '</td><td class="' + esc(f[1]) + '">' + esc(f[1]) + '</td><td>' + (f[6] >= 0 ? '\u2514 ' : '') + esc(f[0]) + '</td><td>' + esc(f[2]) + '</td><td>' + esc(f[3]) + '</td><td>' + esc(f[4]) + '</td>';
  tr.onclick = () => { show(i); svg.scrollIntoView({block: 'nearest'}); };
  tbody.appendChild(tr);
});
const kinds = {};
for (const f of D.findings) kinds[f[0]] = (kinds[f[0]] || 0) + 1;
const badDevs = D.devices.filter(d => d[5]).map(d => d[0]);
document.getElementById('summary').innerHTML = D.devices.length + ' devices in ' + D.groups.length + ' groups, ' + D.links.length + ' cables; ' +
  (D.findings.length ? '<b>' + D.findings.length + ' finding(s)</b>: ' + Object.entries(kinds).map(([k, n]) => n + ' ' + esc(k)).join(', ') +
  '; faulty: ' + badDevs.slice(0, 6).map(esc).join(', ') + (badDevs.length > 6 ? '...' : '') : 'no findings');
// What a person sees now: which faulty devices are inside the window (for tests, and for screen readers).
function report() {
  const vw = window.innerWidth, vh = window.innerHeight, seen = [];
  for (const r of svg.querySelectorAll('.dev.bad')) {
    const b = r.getBoundingClientRect();
    if (b.width > 0 && b.right > 0 && b.bottom > 0 && b.left < vw && b.top < vh) seen.push(r.getAttribute('data-name'));
  }
  document.body.setAttribute('data-visible-faults', seen.join(','));
}
fit();
// A link to the page can carry a search or a finding: map.html#q=gpu042 or map.html#finding=3
const h = new URLSearchParams(location.hash.slice(1));
if (h.get('q')) { document.getElementById('q').value = h.get('q'); find(h.get('q')); }
if (h.get('finding')) show(parseInt(h.get('finding'), 10) - 1);
window.addEventListener('resize', apply);
document.body.setAttribute('data-ready', '1');
})();
"""
