// Each panel's display controls: colour map, scale, limits, the histogram (its limit markers
// can be dragged) and the colour bar in the panel's units.
import { $, S, lastStats, state, unitsOf } from './state.js';
import { call } from './worker_client.js';
import { requestRender } from './render.js';
import { fmtNum, SCALES, barTicks } from './format.js';

const shownOf = (panel) => SCALES[S[panel].display.scale] || SCALES.linear;

export function clearDisplayBox(panel) {
  const box = document.querySelector(`.display[data-panel=${panel}]`);
  for (const sel of ['canvas.hist', 'canvas.cbar']) {
    const c = box.querySelector(sel);
    if (c) c.getContext('2d').clearRect(0, 0, c.width, c.height);
  }
  const note = box.querySelector('.note');
  if (note) note.textContent = '';
}

// The histogram of the shown values (the limits' markers can be dragged) and the colour bar
// with ticks in the panel's units.
export function drawHistogram(panel) {
  const st = lastStats[panel];
  const box = document.querySelector(`.display[data-panel=${panel}]`);
  const hist = box.querySelector('canvas.hist');
  if (!st || !hist) return;
  const sh = st.shown || st;
  const g = hist.getContext('2d');
  const W = hist.width = 256, H = hist.height = 40;
  g.clearRect(0, 0, W, H);
  const bins = st.hist || [];
  const max = Math.max(1, ...bins.map((h) => Math.log1p(h)));
  g.fillStyle = '#a1a1aa';
  bins.forEach((h, i) => { const y = H * Math.log1p(h) / max; const x = Math.floor(i * W / bins.length); g.fillRect(x, H - y, Math.max(1, Math.ceil(W / bins.length)), y); });
  const span = sh.max - sh.min || 1;
  g.fillStyle = '#22d3ee';
  for (const v of [sh.lo, sh.hi]) {
    const x = Math.round((W - 1) * (v - sh.min) / span);
    g.fillRect(Math.max(0, Math.min(W - 2, x - 1)), 0, 2, H);
  }
  drawColourBar(panel, st);
  const d = S[panel].display;
  box.querySelector('.range').textContent = `${fmtNum(st.lo)} … ${fmtNum(st.hi)} ${unitsOf(panel)}${d.scale !== 'linear' ? ` (${d.scale} scale)` : ''}`;
  box.querySelector('.note').textContent = st.note || '';
  // Absolute limits the engine could not take as typed are shown as it applied them.
  if (d.limits.mode === 'absolute') syncDisplayControls();
}

function drawColourBar(panel, st) {
  const box = document.querySelector(`.display[data-panel=${panel}]`);
  const cbar = box.querySelector('canvas.cbar');
  const d = S[panel].display;
  const W = cbar.width = 280, H = cbar.height = 30;
  const c = cbar.getContext('2d');
  c.clearRect(0, 0, W, H);
  c.font = '10px sans-serif';
  if (panel === 'image' && S.image.kind === 'comdir') {
    // The colour wheel: hue is the direction, brightness the magnitude (limits of |DPC|).
    drawWheel(c, 18, 15, 14);
    c.fillStyle = '#e4e4e7';
    c.fillText('hue: direction (0° = +row)', 40, 12);
    c.fillText(`value: |DPC| ${fmtNum(st.lo)}…${fmtNum(st.hi)} px`, 40, 25);
    return;
  }
  // The bar, its ticks below it, and the units to its right.
  const barH = 12, x0 = 4, x1 = 176;
  const t = state.colormaps.tables[Math.max(0, state.colormaps.names.indexOf(d.cmap))];
  for (let x = x0; x < x1; x++) {
    const [r, g, b] = t[Math.min(255, Math.floor(256 * (x - x0) / (x1 - x0)))];
    c.fillStyle = `rgb(${r},${g},${b})`; c.fillRect(x, 0, 1, barH);
  }
  // Ticks at round values in the panel's units, placed through the display transform.
  const [fwd] = shownOf(panel);
  const sh = { lo: fwd(st.lo), hi: fwd(st.hi) };
  const pos = (v) => x0 + (x1 - x0) * (fwd(v) - sh.lo) / ((sh.hi - sh.lo) || 1);
  c.fillStyle = '#e4e4e7'; c.strokeStyle = '#e4e4e7'; c.textBaseline = 'top';
  for (const v of barTicks(st.lo, st.hi, d.scale)) {
    const x = Math.round(pos(v)) + 0.5;
    if (x < x0 - 0.5 || x > x1 + 0.5) continue;
    c.beginPath(); c.moveTo(x, barH); c.lineTo(x, barH + 4); c.stroke();
    const label = fmtNum(v);
    const w = c.measureText(label).width;
    c.fillText(label, Math.max(0, Math.min(x1 + 8 - w, x - w / 2)), barH + 5);
  }
  c.textBaseline = 'middle';
  c.fillText(unitsOf(panel) + (d.scale !== 'linear' ? `, ${d.scale}` : ''), x1 + 8, barH / 2, W - x1 - 8);
}

// A hue wheel of radius `rad` at (cx, cy) as the comdir view colours directions: angle 0 along
// +row (down the screen), increasing towards +col (right).
function drawWheel(g, cx, cy, rad) {
  for (let a = 0; a < 360; a += 2) {
    const t0 = (a - 1) * Math.PI / 180, t1 = (a + 1.5) * Math.PI / 180;
    g.beginPath(); g.moveTo(cx, cy);
    // Screen angle of direction θ (row down, col right): x = sin θ, y = cos θ.
    g.arc(cx, cy, rad, Math.PI / 2 - t1, Math.PI / 2 - t0);
    g.closePath();
    g.fillStyle = `hsl(${a}, 100%, 50%)`; g.fill();
  }
}

const MODE_LABELS = { percentile: ['lo %', 'hi %'], absolute: ['lo', 'hi'], symmetric: ['lo %', 'hi %'] };

export function buildDisplayControls() {
  for (const box of document.querySelectorAll('.display')) {
    const panel = box.dataset.panel;
    box.innerHTML = `
      <select class="cmap" title="colour map" aria-label="${panel} colour map">${state.colormaps.names.map((n) => `<option>${n}</option>`).join('')}</select>
      <select class="scale" title="display scale (L toggles log)" aria-label="${panel} scale"><option value="linear">linear</option><option value="log">log</option><option value="sqrt">sqrt</option></select>
      <select class="mode" title="how the display limits are chosen: percentiles of the values, absolute values (in the panel's units), or ± symmetric about zero" aria-label="${panel} limits mode"><option value="percentile">percentile</option><option value="absolute">absolute</option><option value="symmetric">symmetric ±</option></select>
      <label class="lim"><span class="lo-label">lo %</span> <input class="lo" type="number" step="any" title="lower display limit" aria-label="${panel} lower limit"></label>
      <label class="lim"><span class="hi-label">hi %</span> <input class="hi" type="number" step="any" title="upper display limit" aria-label="${panel} upper limit"></label>
      <canvas class="hist" title="histogram of the shown values; drag a cyan marker to set an absolute limit" tabindex="-1"></canvas>
      <canvas class="cbar" title="colour bar with the panel's units"></canvas><span class="range muted"></span><span class="note warn" role="status"></span>`;
    const d = () => S[panel].display;
    box.querySelector('.cmap').onchange = (e) => { d().cmap = e.target.value; requestRender(); };
    box.querySelector('.scale').onchange = (e) => { d().scale = e.target.value; requestRender(); };
    box.querySelector('.mode').onchange = async (e) => {
      const mode = e.target.value;
      let st = lastStats[panel];
      if (mode === 'absolute' && state.current) {
        try { st = lastStats[panel] = await call('stats', { panel }); } catch (err) { /* keep the last */ }
      }
      const hiPct = panel === 'pattern' ? 99.9 : 99.5;
      // The fields take numbers of the new mode's meaning (never a percentile read as a value).
      d().limits = mode === 'absolute' && st ? { mode, lo: st.lo, hi: st.hi } : { mode, lo: 0.5, hi: hiPct };
      syncDisplayControls(); requestRender();
    };
    for (const k of ['lo', 'hi']) {
      box.querySelector('.' + k).onchange = (e) => {
        const v = parseFloat(e.target.value);
        const lim = { ...d().limits, [k]: v };
        const note = box.querySelector('.note');
        if (!Number.isFinite(v)) { note.textContent = `${k} must be a number`; syncDisplayControls(); return; }
        if (!(lim.lo < lim.hi)) { note.textContent = `lo must be below hi (${fmtNum(lim.lo)} ≥ ${fmtNum(lim.hi)}): not applied`; syncDisplayControls(); return; }
        if (lim.mode !== 'absolute' && (v < 0 || v > 100)) { note.textContent = `percentiles lie in 0…100: ${fmtNum(v)} not applied`; syncDisplayControls(); return; }
        note.textContent = '';
        d().limits = lim; requestRender();
      };
    }
    bindHistogramDrag(panel, box.querySelector('canvas.hist'));
  }
  syncDisplayControls();
}

// Dragging a limit marker on the histogram sets absolute limits at the value under it.
function bindHistogramDrag(panel, hist) {
  let which = null;
  const valueAt = (e) => {
    const st = lastStats[panel];
    const sh = st.shown || st;
    const rect = hist.getBoundingClientRect();
    const f = Math.max(0, Math.min(1, (e.clientX - rect.left) / rect.width));
    return shownOf(panel)[1](sh.min + f * (sh.max - sh.min));
  };
  hist.addEventListener('mousedown', (e) => {
    const st = lastStats[panel];
    if (!st || !state.current) return;
    const sh = st.shown || st;
    const rect = hist.getBoundingClientRect();
    const x = (e.clientX - rect.left) / rect.width;
    const at = (v) => (v - sh.min) / ((sh.max - sh.min) || 1);
    which = Math.abs(x - at(sh.lo)) <= Math.abs(x - at(sh.hi)) ? 'lo' : 'hi';
    e.preventDefault();
  });
  window.addEventListener('mousemove', (e) => {
    if (!which) return;
    const st = lastStats[panel];
    const d = S[panel].display;
    const v = valueAt(e);
    const lim = d.limits.mode === 'absolute' ? { ...d.limits } : { mode: 'absolute', lo: st.lo, hi: st.hi };
    lim[which] = v;
    if (!(lim.lo < lim.hi)) return;
    d.limits = lim;
    syncDisplayControls();
    requestRender();
  });
  window.addEventListener('mouseup', () => { which = null; });
}

export function syncDisplayControls() {
  for (const box of document.querySelectorAll('.display')) {
    const d = S[box.dataset.panel].display;
    if (!box.querySelector('.cmap')) continue;
    box.querySelector('.cmap').value = d.cmap;
    box.querySelector('.scale').value = d.scale;
    box.querySelector('.mode').value = d.limits.mode;
    const [lo, hi] = MODE_LABELS[d.limits.mode];
    box.querySelector('.lo-label').textContent = lo;
    box.querySelector('.hi-label').textContent = hi;
    const show = (v) => (Number.isFinite(v) ? +(+v).toPrecision(6) : '');
    if (document.activeElement !== box.querySelector('.lo')) box.querySelector('.lo').value = show(d.limits.lo);
    if (document.activeElement !== box.querySelector('.hi')) box.querySelector('.hi').value = show(d.limits.hi);
  }
  $('rotation').value = S.image.rotation;
  $('flip').checked = S.image.flip;
  $('pattern-source').value = S.pattern.source;
}
