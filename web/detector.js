// The virtual detector: presets from the fitted BF disk, reset to the fit, the rectangle kept
// on the detector, and the context the geometry fields (geometry.js) work in.
import { $, S, detShape, mradPerPx, state } from './state.js';
import { requestRender } from './render.js';
import { round2 } from './view_geometry.js';
import { syncDisplayControls } from './display_controls.js';
import { insideRadius } from './geometry.js';
import { clearLine } from './line_profile.js';

const DIVERGING = new Set(['dpc', 'idpc']);

// The view of an acquisition just opened: the fitted disk (a guess when no fit was found),
// the cursor mid-scan, no ROI, the file's scan rotation, zoom 1; the preset made again.
export function applyDefaults(r) {
  const [rows, cols] = r.info.shape;
  const [kr, kc] = detShape();
  let [fr, fc, rad] = r.bfFit;
  if (!(rad > 0)) { fr = (kr - 1) / 2; fc = (kc - 1) / 2; rad = Math.min(kr, kc) / 6; }
  state.fit = { center: [round2(fr), round2(fc)], radius: round2(rad) };
  S.image.cursor = [Math.floor(rows / 2), Math.floor(cols / 2)];
  clearLine();
  S.image.roi = null;
  S.image.roiCircle = null;
  S.image.rect = null;
  S.image.point = null;
  const cal = r.info.calibration || {};
  // The file's scan rotation pre-fills the DPC rotation.
  S.image.rotation = Number.isFinite(cal.scan_rotation_deg) ? cal.scan_rotation_deg : 0;
  S.image.display.zoom = 1; S.image.display.pan = null;
  S.pattern.display.zoom = 1; S.pattern.display.pan = null;
  setPreset(state.preset);
}

// Presets from the fitted BF disk (centre c, radius r), never from a dragged one: BF r,
// ABF r/2..r, ADF 1.2r..2.5r, HAADF 3r..the largest radius about c on the detector.
export function setPreset(p) {
  state.preset = p;
  $('image-kind').value = p;
  const im = S.image;
  const f = state.fit || { center: im.center, radius: im.radius > 0 ? im.radius : 1 };
  const r = f.radius > 0 ? f.radius : 1;
  const fromFit = () => { im.center = f.center.slice(); };
  const annulus = (a, b) => { fromFit(); im.kind = 'adf'; im.inner = round2(a); im.outer = round2(Math.max(b, a + 1)); };
  switch (p) {
    case 'bf': fromFit(); im.kind = 'bf'; im.radius = f.radius; break;
    case 'disk': im.kind = 'bf'; break;
    case 'abf': annulus(r / 2, r); break;
    case 'adf': annulus(1.2 * r, 2.5 * r); break;
    case 'haadf': {
      const edge = state.current ? insideRadius(f.center, detShape()) : 4 * r;
      annulus(Math.min(3 * r, Math.max(0, edge - 1)), edge);
      break;
    }
    case 'annulus': im.kind = 'adf'; im.inner = im.inner ?? round2(r); im.outer = im.outer ?? round2(2 * r); break;
    case 'rect': {
      im.kind = 'rect';
      const [c0, c1] = im.center;
      im.rect = im.rect ?? [Math.max(0, Math.floor(c0 - r)), Math.ceil(c0 + r) + 1, Math.max(0, Math.floor(c1 - r)), Math.ceil(c1 + r) + 1];
      clampRect();
      break;
    }
    case 'point': im.kind = 'point'; im.point = im.point ?? [Math.round(im.center[0]), Math.round(im.center[1])]; break;
    case 'df': im.kind = 'df'; break;
    case 'total': im.kind = 'total'; break;
    case 'com0': case 'com1': im.kind = 'com'; im.axis = +p.slice(3); break;
    case 'commag': im.kind = 'commag'; break;
    case 'comdir': im.kind = 'comdir'; break;
    case 'dpc0': case 'dpc1': im.kind = 'dpc'; im.axis = +p.slice(3); break;
    case 'idpc': im.kind = 'idpc'; break;
    default: throw new Error(`unknown preset '${p}'`);
  }
  const d = S.image.display;
  if (DIVERGING.has(im.kind)) { d.cmap = 'RdBu_r'; d.limits = { mode: 'symmetric', lo: 0.5, hi: 99.5 }; }
  else if (d.limits.mode === 'symmetric') { d.cmap = 'inferno'; d.limits = { mode: 'percentile', lo: 0.5, hi: 99.5 }; }
  syncDisplayControls();
}

// The detector back on the fitted disk: a preset made from the fit is made again, a free
// disk or annulus is centred on it (the disk takes its radius, the annulus r..2r).
export function resetToFit() {
  if (!state.fit) return;
  const im = S.image;
  if (['bf', 'abf', 'adf', 'haadf'].includes(state.preset)) setPreset(state.preset);
  else {
    im.center = state.fit.center.slice();
    im.radius = state.fit.radius;
    if (state.preset === 'annulus') { im.inner = state.fit.radius; im.outer = round2(2 * state.fit.radius); }
  }
  requestRender();
}

// The rectangle detector kept on the detector, at least one pixel each way.
export function clampRect() {
  if (!state.current || !S.image.rect) return;
  const [kr, kc] = detShape();
  let [r0, r1, c0, c1] = S.image.rect.map(Math.round);
  r0 = Math.max(0, Math.min(r0, kr - 1)); r1 = Math.max(r0 + 1, Math.min(r1, kr));
  c0 = Math.max(0, Math.min(c0, kc - 1)); c1 = Math.max(c0 + 1, Math.min(c1, kc));
  S.image.rect = [r0, r1, c0, c1];
}

// What the geometry fields (geometry.js) read, and what they call when typed into.
export function geometryContext() {
  return {
    open: !!state.current, kind: S.image.kind, preset: state.preset, image: S.image, fit: state.fit,
    det: state.current ? detShape() : null, mradPerPx: state.current ? mradPerPx() : null,
    fitWarning: state.current ? state.current.bfFitWarning : null,
    onChange: () => { clampRect(); requestRender(); },
    onReset: resetToFit,
  };
}

// A session streamed from its files keeps the ring sums about the fitted BF centre (decision
// 0036): a disk, dark field or annulus about that centre is summed from them at once when its
// radii fall between rings, which whole pixels do; any other detector takes one pass over the
// files. So about that centre the radii snap to whole pixels (the load profile says so);
// true when one changed.
export function snapToRings(im) {
  const rings = state.current && state.current.profile && state.current.profile.streamed_ring_sums;
  if (!rings || !im.center || !['bf', 'df', 'adf'].includes(im.kind)) return false;
  if (im.center[0] !== rings.center[0] || im.center[1] !== rings.center[1]) return false;
  const before = `${im.radius} ${im.inner} ${im.outer}`;
  if (im.kind === 'adf') {
    im.inner = Math.max(0, Math.round(im.inner));
    im.outer = Math.max(im.inner + 1, Math.round(im.outer));
  } else {
    im.radius = Math.max(1, Math.round(im.radius));
  }
  const changed = before !== `${im.radius} ${im.inner} ${im.outer}`;
  return changed;
}
