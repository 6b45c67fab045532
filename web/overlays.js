// What is drawn over the GPU canvases: the scan cursor, the detector's outline and scale bars.
import { $, PANELS, S, mradPerPx, state } from './state.js';
import { canvasMap, canvasSize, planeSize } from './view_geometry.js';
import { fmtNum, niceLength } from './format.js';
import { drawLine } from './line_profile.js';
import { drawComparedCursors } from './compare.js';

// The cursor on the image overlay, as display.wgsl draws it with its `cursor_on`: the
// pixel's outline and a cross through its centre, beyond 1.5 pixels from it, in the plane.
function drawCursor(g, cw, ch) {
  const px = (v) => Math.floor(v) + 0.5;  // a 1-pixel line on a pixel, not across two
  const [r, c] = S.image.cursor;
  g.save();
  const { h, w, fit: f, X, Y } = canvasMap(g, 'image', cw, ch);
  g.strokeStyle = 'rgb(26, 230, 255)'; g.lineWidth = 1;
  g.beginPath();
  const xc = px(X(c + 0.5)), yc = px(Y(r + 0.5)), gap = 1.5 * f;
  g.moveTo(X(0), yc); g.lineTo(xc - gap, yc); g.moveTo(xc + gap, yc); g.lineTo(X(w), yc);
  g.moveTo(xc, Y(0)); g.lineTo(xc, yc - gap); g.moveTo(xc, yc + gap); g.lineTo(xc, Y(h));
  g.stroke();
  // The outline straddles the pixel's edges, a device pixel each side.
  g.lineWidth = 2;
  g.strokeRect(Math.round(X(c)), Math.round(Y(r)), Math.round(f), Math.round(f));
  g.restore();
}

// The detector's outline on the pattern, where wgsl/display.wgsl would draw it (masks
// measure from pixel centres, a rectangle is half-open), a device pixel each side of it.
// Drawn here, dragging the detector presents the image canvas alone.
function drawDetector(g, cw, ch) {
  const im = S.image;
  g.save();
  const { fit: f, X, Y } = canvasMap(g, 'pattern', cw, ch);
  g.strokeStyle = 'rgb(0, 255, 153)'; g.lineWidth = 2;
  g.beginPath();
  const ring = (radius) => {
    const [r, c] = im.center;
    g.moveTo(X(c + 0.5) + radius * f, Y(r + 0.5));
    g.arc(X(c + 0.5), Y(r + 0.5), Math.max(0, radius * f), 0, 2 * Math.PI);
  };
  if ((im.kind === 'bf' || im.kind === 'df') && im.center && im.radius != null) ring(im.radius);
  else if (im.kind === 'adf' && im.center && im.inner != null && im.outer != null) { ring(im.inner); ring(im.outer); }
  else if (im.kind === 'rect' && im.rect) {
    const [r0, r1, c0, c1] = im.rect;
    g.rect(X(c0), Y(r0), (c1 - c0) * f, (r1 - r0) * f);
  } else if (im.kind === 'point' && im.point) {
    const [r, c] = im.point;
    const [x, y] = [X(c + 0.5), Y(r + 0.5)], arm = 2.5 * f;
    g.moveTo(x - arm, y); g.lineTo(x + arm, y); g.moveTo(x, y - arm); g.lineTo(x, y + arm);
  }
  g.stroke();
  g.restore();
}

// A scale bar from the calibration, at the bottom right of the plane's visible part (never in
// the band outside it), about a fifth of that width.
function drawScaleBar(g, panel, cw, ch) {
  const cal = state.current.info.calibration || {};
  const step = panel === 'image' ? cal.scan_step : mradPerPx();
  const units = panel === 'image' ? cal.scan_units : 'mrad';
  if (!step) return;
  const [h, w] = planeSize(panel);
  const d = S[panel].display;
  const scale = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  const left = Math.max(0, (0 - pc) * scale + cw / 2), right = Math.min(cw, (w - pc) * scale + cw / 2);
  const bottom = Math.min(ch, (h - pr) * scale + ch / 2), top = Math.max(0, (0 - pr) * scale + ch / 2);
  if (right - left < 40 || bottom - top < 30) return;
  const nice = niceLength((right - left) / 5 / scale * step);
  const px = nice / step * scale;
  const dpr = window.devicePixelRatio || 1;
  const m = 8 * dpr;
  const x = right - m - px, y = bottom - m - 5 * dpr;
  g.fillStyle = 'rgba(0,0,0,0.45)';
  g.fillRect(x - 4 * dpr, y - 18 * dpr, px + 8 * dpr, 27 * dpr);
  g.fillStyle = 'white';
  g.fillRect(x, y, px, 5 * dpr);
  g.font = `${12 * dpr}px sans-serif`;
  g.fillText(`${fmtNum(nice)} ${units || ''}`, x, y - 5 * dpr);
}

// The cursor, the detector and scale bars, drawn over the GPU canvases.
export function drawOverlays() {
  for (const panel of PANELS) {
    const el = $(panel + '-overlay');
    const [cw, ch] = canvasSize(panel);
    el.width = cw; el.height = ch;
    const g = el.getContext('2d');
    g.clearRect(0, 0, cw, ch);
    if (!state.current) continue;
    if (panel === 'image') drawCursor(g, cw, ch);
    else drawDetector(g, cw, ch);
    if (state.line && state.line.panel === panel) {
      g.save();
      const { X, Y } = canvasMap(g, panel, cw, ch);
      drawLine(g, X, Y);
      g.restore();
    }
    drawScaleBar(g, panel, cw, ch);
  }
  drawComparedCursors();
}
