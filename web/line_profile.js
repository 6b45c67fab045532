// Line profiles (issue #33): the "line" button of a panel, then a drag on it, draws a line;
// the engine samples that panel's exact values along it one pixel apart (bilinear between
// pixels, display/line_profile.rs), plotted against the calibrated distance in a floating
// box, and saved as CSV.
import { $, state, interactive } from './state.js';
import { call } from './worker_client.js';
import { showError } from './messages.js';
import { fmtNum, niceTicks } from './format.js';
import { drawOverlays } from './overlays.js';

const BUTTONS = { image: 'line-image', pattern: 'line-pattern' };

// Arm (or disarm) drawing a line on `panel`; the other panel's button is released.
export function toggleLineMode(panel) {
  if (!interactive()) return;
  state.lineMode = state.lineMode === panel ? false : panel;
  for (const [p, id] of Object.entries(BUTTONS)) $(id).classList.toggle('active', state.lineMode === p);
}

export function endLineMode() {
  state.lineMode = false;
  for (const id of Object.values(BUTTONS)) $(id).classList.remove('active');
}

// The profile of `line` ({panel, from, to}: pixel indices [row, col]) asked of the engine,
// plotted and kept for the CSV. A failure is said; the line stays drawn.
export async function showProfile(line) {
  const opened = state.current;
  try {
    const p = await call('lineProfile', { panel: line.panel, from: line.from, to: line.to });
    if (state.current !== opened) return null;
    state.profile = { ...line, ...p };
    plot(state.profile);
    const [a, b] = [line.from, line.to].map((q) => `(${fmtNum(Math.round(q[0] * 100) / 100)}, ${fmtNum(Math.round(q[1] * 100) / 100)})`);
    $('profile-caption').textContent = `${line.panel === 'image' ? 'image' : 'pattern'} from ${a} to ${b}: `
      + `${p.values.length} samples over ${fmtNum(+p.distance[p.distance.length - 1].toPrecision(4))} ${p.units}`;
    if (!$('profile-dialog').open) $('profile-dialog').show();
    return state.profile;
  } catch (e) {
    if (state.current === opened) showError(`The line profile could not be taken: ${String(e.message || e)}`);
    return null;
  }
}

// The profile as CSV: a header naming the units, then one sample a line.
export function profileCsv(p) {
  const head = `distance_${p.units},value\n`;
  return head + p.distance.map((d, i) => `${d},${p.values[i]}`).join('\n') + '\n';
}

function plot(p) {
  const c = $('profile-plot');
  const dpr = window.devicePixelRatio || 1;
  const [w, h] = [c.clientWidth || 480, c.clientHeight || 220];
  c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const finite = p.values.filter(Number.isFinite);
  const [lo, hi] = finite.length ? [Math.min(...finite), Math.max(...finite)] : [0, 1];
  const span = hi > lo ? hi - lo : Math.abs(hi) || 1;
  const [y0, y1] = hi > lo ? [lo, hi] : [lo - span / 2, hi + span / 2];
  const dmax = p.distance[p.distance.length - 1] || 1;
  const m = { l: 64, r: 12, t: 10, b: 34 };
  const X = (d) => m.l + (d / dmax) * (w - m.l - m.r);
  const Y = (v) => h - m.b - ((v - y0) / (y1 - y0)) * (h - m.t - m.b);
  g.strokeStyle = '#71717a'; g.fillStyle = '#d4d4d8'; g.lineWidth = 1; g.font = '11px sans-serif';
  g.beginPath(); g.moveTo(m.l, m.t); g.lineTo(m.l, h - m.b); g.lineTo(w - m.r, h - m.b); g.stroke();
  g.textAlign = 'center';
  for (const t of niceTicks(0, dmax, 5)) { g.fillText(fmtNum(+t.toPrecision(6)), X(t), h - m.b + 14); }
  g.fillText(`distance (${p.units})`, (m.l + w - m.r) / 2, h - 4);
  g.textAlign = 'right';
  for (const t of niceTicks(y0, y1, 4)) { g.fillText(fmtNum(+t.toPrecision(6)), m.l - 4, Y(t) + 4); }
  g.strokeStyle = 'rgb(26, 230, 255)'; g.lineWidth = 1.5;
  g.beginPath();
  let pen = false;
  p.values.forEach((v, i) => {
    if (!Number.isFinite(v)) { pen = false; return; }
    if (pen) g.lineTo(X(p.distance[i]), Y(v)); else g.moveTo(X(p.distance[i]), Y(v));
    pen = true;
  });
  g.stroke();
}

// The line on its panel's overlay (called by drawOverlays with that panel's mapping).
export function drawLine(g, X, Y) {
  const l = state.line;
  g.save();
  g.strokeStyle = 'rgb(255, 214, 10)'; g.lineWidth = 2;
  g.beginPath();
  g.moveTo(X(l.from[1] + 0.5), Y(l.from[0] + 0.5));
  g.lineTo(X(l.to[1] + 0.5), Y(l.to[0] + 0.5));
  g.stroke();
  g.fillStyle = 'rgb(255, 214, 10)';
  g.beginPath(); g.arc(X(l.from[1] + 0.5), Y(l.from[0] + 0.5), 3, 0, 2 * Math.PI); g.fill();
  g.restore();
}

// A new acquisition, or the box closed: no line is drawn.
export function clearLine() {
  state.line = null;
  state.profile = null;
  endLineMode();
  if ($('profile-dialog').open) $('profile-dialog').close();
  drawOverlays();
}
