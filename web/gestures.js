// Pointer gestures on the panels: zoom, pan, the scan cursor, ROIs, dragging the detector,
// and the hover readout with its calibrated coordinates.
import { $, S, detShape, interactive, mradPerPx, state, unitsOf } from './state.js';
import { call } from './worker_client.js';
import { clampRect } from './detector.js';
import { requestRender } from './render.js';
import { clampI, planeSize, round2, toSource } from './view_geometry.js';
import { fmtNum } from './format.js';
import { drawOverlays } from './overlays.js';
import { endLineMode, showProfile } from './line_profile.js';

// The wheel zooms about the pointer and a right or middle drag pans; a left drag moves the
// cursor or draws the ROI on the image, and drags the detector on the pattern.
export function bindPanelEvents(panel, el) {
  let drag = null;
  el.addEventListener('contextmenu', (e) => e.preventDefault());
  el.addEventListener('wheel', (e) => {
    e.preventDefault();
    if (!interactive()) return;
    const d = S[panel].display;
    const s = toSource(panel, e);
    const f = Math.exp(-e.deltaY * 0.0015);
    const [pr, pc] = d.pan ?? [s.h / 2, s.w / 2];
    d.zoom = Math.min(64, Math.max(0.25, d.zoom * f));
    // keep the point under the pointer fixed
    d.pan = [s.r - (s.r - pr) / f, s.c - (s.c - pc) / f];
    requestRender();
  }, { passive: false });
  el.addEventListener('mousedown', (e) => {
    if (!interactive()) return;
    el.focus({ preventScroll: true });
    const s = toSource(panel, e);
    if (e.button === 2 || e.button === 1) { drag = { mode: 'pan', s0: s, pan0: S[panel].display.pan ?? [s.h / 2, s.w / 2] }; return; }
    if (state.lineMode === panel) { drag = { mode: 'line', from: [s.r - 0.5, s.c - 0.5] }; state.line = { panel, from: drag.from, to: drag.from }; drawOverlays(); return; }
    if (panel === 'image') {
      if (state.roiMode === 'rect') { drag = { mode: 'roi', r0: s.r, c0: s.c }; return; }
      if (state.roiMode === 'circle') { drag = { mode: 'roi-circle', r0: s.r - 0.5, c0: s.c - 0.5 }; return; }
      drag = { mode: 'cursor' }; setCursor(s); return;
    }
    drag = pickDetectorHandle(s);
  });
  el.addEventListener('mousemove', (e) => {
    if (!interactive()) return;
    const s = toSource(panel, e);
    hover(panel, s);
    if (!drag) return;
    if (drag.mode === 'pan') {
      const dpr = window.devicePixelRatio || 1;
      drag.pan0 = [drag.pan0[0] - e.movementY * dpr / s.fit, drag.pan0[1] - e.movementX * dpr / s.fit];
      S[panel].display.pan = drag.pan0.slice();
      requestRender();
    } else if (drag.mode === 'cursor') setCursor(s);
    else if (drag.mode === 'roi') {
      const [rows, cols] = planeSize('image');
      const a = [Math.min(drag.r0, s.r), Math.max(drag.r0, s.r), Math.min(drag.c0, s.c), Math.max(drag.c0, s.c)];
      const r0 = clampI(Math.floor(a[0]), 0, rows - 1), c0 = clampI(Math.floor(a[2]), 0, cols - 1);
      S.image.roi = [r0, clampI(Math.ceil(a[1]), r0 + 1, rows), c0, clampI(Math.ceil(a[3]), c0 + 1, cols)];
      S.image.roiCircle = null;
      requestRender();
    } else if (drag.mode === 'roi-circle') {
      // Centre and radius in position indices (a position is inside when its distance ≤ r).
      const radius = Math.hypot(s.r - 0.5 - drag.r0, s.c - 0.5 - drag.c0);
      S.image.roiCircle = [round2(drag.r0), round2(drag.c0), round2(Math.max(0.5, radius))];
      S.image.roi = null;
      requestRender();
    } else if (drag.mode === 'line') {
      state.line = { panel, from: drag.from, to: [s.r - 0.5, s.c - 0.5] };
      drawOverlays();
    } else moveDetector(drag, s);
  });
  window.addEventListener('mouseup', () => {
    if (drag && drag.mode === 'line' && state.line) { endLineMode(); showProfile(state.line); }
    if (drag && drag.mode.startsWith('roi')) {
      state.roiMode = false;
      $('roi-draw').classList.remove('active');
      $('roi-circle').classList.remove('active');
    }
    drag = null;
  });
  el.addEventListener('mouseleave', () => { $(panel + '-readout').textContent = ''; });
}

function setCursor(s) {
  const [rows, cols] = planeSize('image');
  const r = clampI(Math.floor(s.r), 0, rows - 1), c = clampI(Math.floor(s.c), 0, cols - 1);
  if (r === S.image.cursor[0] && c === S.image.cursor[1]) return;
  S.image.cursor = [r, c];
  requestRender();
}

// Detector handles: in pixel-centre coordinates (mask contract: pixel (i, j) at (i, j)).
function pickDetectorHandle(s) {
  const im = S.image;
  const p = [s.r - 0.5, s.c - 0.5];
  const tol = 6 / s.fit;
  if (im.kind === 'rect' && im.rect) {
    const [r0, r1, c0, c1] = im.rect;
    const q = [s.r, s.c];
    const near = (a, b) => Math.abs(a - b) < tol;
    return { mode: 'rect', edges: { r0: near(q[0], r0), r1: near(q[0], r1), c0: near(q[1], c0), c1: near(q[1], c1) }, start: q, rect0: im.rect.slice() };
  }
  if (im.kind === 'point') return { mode: 'point' };
  if (!['bf', 'df', 'adf'].includes(im.kind)) return null;
  const d = Math.hypot(p[0] - im.center[0], p[1] - im.center[1]);
  if (im.kind === 'adf') {
    if (Math.abs(d - im.inner) < tol) return { mode: 'inner' };
    if (Math.abs(d - im.outer) < tol) return { mode: 'outer' };
  } else if (Math.abs(d - im.radius) < tol) return { mode: 'radius' };
  return { mode: 'centre', offset: [im.center[0] - p[0], im.center[1] - p[1]] };
}

function moveDetector(drag, s) {
  const im = S.image;
  const p = [s.r - 0.5, s.c - 0.5];
  const d = Math.hypot(p[0] - im.center[0], p[1] - im.center[1]);
  switch (drag.mode) {
    case 'centre': im.center = [round2(p[0] + drag.offset[0]), round2(p[1] + drag.offset[1])]; break;
    case 'radius': im.radius = round2(Math.max(0.5, d)); break;
    case 'inner': im.inner = round2(Math.max(0, Math.min(d, im.outer - 0.5))); break;
    case 'outer': im.outer = round2(Math.max(d, im.inner + 0.5)); break;
    case 'point': {
      const [kr, kc] = detShape();
      im.point = [clampI(Math.round(p[0]), 0, kr - 1), clampI(Math.round(p[1]), 0, kc - 1)];
      break;
    }
    case 'rect': {
      const dr = s.r - drag.start[0], dc = s.c - drag.start[1];
      const e = drag.edges;
      const any = e.r0 || e.r1 || e.c0 || e.c1;
      const [r0, r1, c0, c1] = drag.rect0;
      im.rect = [r0 + (e.r0 || !any ? dr : 0), r1 + (e.r1 || !any ? dr : 0), c0 + (e.c0 || !any ? dc : 0), c1 + (e.c1 || !any ? dc : 0)];
      clampRect();
      break;
    }
  }
  requestRender();
}

let hoverBusy = false;

async function hover(panel, s) {
  const [h, w] = planeSize(panel);
  const r = Math.floor(s.r), c = Math.floor(s.c);
  const out = $(panel + '-readout');
  if (!state.current || r < 0 || c < 0 || r >= h || c >= w) { out.textContent = ''; return; }
  if (hoverBusy || state.renderState.inflight) return;
  hoverBusy = true;
  try {
    const v = await call('valueAt', { panel, r, c });
    out.textContent = `(${r}, ${c}) = ${fmtValue(panel, v)}${calibText(panel, r, c)}`;
  } catch (e) { out.textContent = ''; } finally { hoverBusy = false; }
}

function fmtValue(panel, v) {
  const u = unitsOf(panel);
  return u === '°' ? `${fmtNum(v)}°` : `${fmtNum(v)} ${u}`;
}

// Scan positions in the scan step's units; detector pixels as angles from the beam centre
// (the fitted BF disk's centre) when the detector is calibrated in mrad.
function calibText(panel, r, c) {
  const cal = state.current.info.calibration || {};
  if (panel === 'image') {
    return cal.scan_step ? `  [${fmtNum(r * cal.scan_step)}, ${fmtNum(c * cal.scan_step)}] ${cal.scan_units || ''}` : '';
  }
  const mrad = mradPerPx();
  const [cr, cc] = state.fit ? state.fit.center : [0, 0];
  const dr = r - cr, dc = c - cc;
  if (mrad) return `  θ = (${fmtNum(dr * mrad)}, ${fmtNum(dc * mrad)}) mrad, |θ| = ${fmtNum(Math.hypot(dr, dc) * mrad)} mrad from the beam centre`;
  return state.fit ? `  ${fmtNum(Math.hypot(dr, dc))} px from the beam centre` : '';
}
