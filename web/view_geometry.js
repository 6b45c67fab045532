// Where each panel's plane lies on its canvas, as wgsl/display.wgsl maps it: frame sizes,
// pointer → source coordinates, source → canvas; with the rounding and clamping they use.
import { $, PANELS, S, detShape, state } from './state.js';
import { comparedSizes, fitCompared } from './compare.js';

export const round2 = (x) => Math.round(x * 100) / 100;

export const clampI = (v, a, b) => Math.max(a, Math.min(b, v));

export function canvasSize(panel) {
  const el = $(panel + '-canvas');
  const dpr = window.devicePixelRatio || 1;
  return [Math.max(1, Math.round(el.clientWidth * dpr)), Math.max(1, Math.round(el.clientHeight * dpr))];
}

export const canvasSizes = () => ({ image: canvasSize('image'), pattern: canvasSize('pattern'), ...comparedSizes() });

// Each panel's frame takes its plane's aspect and the largest size its stage allows, so the
// image fills its canvas without a band (the engine letterboxes only when zoomed or panned).
export function fitFrames() {
  for (const panel of PANELS) {
    const frame = $(panel + '-canvas').parentElement;
    const stage = frame.parentElement;
    const W = stage.clientWidth, H = stage.clientHeight;
    if (!state.current || !(W > 0 && H > 0)) { frame.style.width = W + 'px'; frame.style.height = H + 'px'; continue; }
    const [h, w] = planeSize(panel);
    const s = Math.min(W / w, H / h);
    frame.style.width = Math.max(1, Math.floor(w * s)) + 'px';
    frame.style.height = Math.max(1, Math.floor(h * s)) + 'px';
  }
  fitCompared();
}

export function planeSize(panel) {
  if (!state.current) return [1, 1];
  return panel === 'image' ? [state.current.info.shape[0], state.current.info.shape[1]] : detShape();
}

export function toSource(panel, ev) {
  const el = ev.target;
  const dpr = window.devicePixelRatio || 1;
  const rect = el.getBoundingClientRect();
  const x = (ev.clientX - rect.left) * dpr, y = (ev.clientY - rect.top) * dpr;
  const cw = rect.width * dpr, ch = rect.height * dpr;
  const [h, w] = planeSize(panel);
  const d = S[panel].display;
  const fitScale = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  return { r: (y - ch / 2) / fitScale + pr, c: (x - cw / 2) / fitScale + pc, fit: fitScale, h, w };
}

// A panel's source coordinates (pixel (i, j) covers [i, i+1) × [j, j+1)) on its canvas, as
// wgsl/display.wgsl maps them; drawing is clipped to the plane.
export function canvasMap(g, panel, cw, ch) {
  const [h, w] = planeSize(panel);
  const d = S[panel].display;
  const scale = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  const X = (c) => (c - pc) * scale + cw / 2, Y = (r) => (r - pr) * scale + ch / 2;
  g.beginPath(); g.rect(X(0), Y(0), w * scale, h * scale); g.clip();
  return { h, w, fit: scale, X, Y };
}
