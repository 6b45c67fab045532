// The page's shared state: the acquisition open now, the load under way, the view (S) and
// what the Worker said, in one place that every module reads and writes; with queries on it.

export const $ = (id) => document.getElementById(id);
export const PANELS = ['image', 'pattern'];

// At most one render in flight (requestRender); a new Worker starts from a fresh one.
export const freshRenderState = () => ({ inflight: false, dirty: false, lastMs: null, lastDrawn: null, lastGpu: null, lastError: null, waiters: [] });

// Shared mutable state: ES module bindings cannot be assigned from importers, so it lives in
// this one object.
export const state = {
  adapterInfo: null,
  // How frames reach the screen: {mode: 'surface'|'readback', chosen, surface_ms, readback_ms}.
  presentInfo: null,
  colormaps: null,
  workerReady: null,
  // The acquisition open now: {info, profile, bfFit, bfFitWarning, files, options, logical}, or
  // null (the page is empty). While a load runs, `loading` holds its files; the panels then
  // take no gestures, and a failed load leaves either the previous acquisition (still open in
  // the Worker) or an empty page, never a mix of the two.
  current: null,
  loading: null,
  // Set by Cancel while a prepared file is being saved (export_files.js).
  savingCancelled: false,
  lastFiles: null,
  lastOptions: {},
  // The fitted BF disk {center: [r, c], radius} presets and "reset" start from.
  fit: null,
  renderState: freshRenderState(),
  // Renders finished; with the calls made (the ids handed out) benchmarks check that an idle
  // page asks nothing of the engine (stem4d.activity()).
  rendersDone: 0,
  // The files the scan-shape fields were typed for (a key of names and sizes), or null when
  // they were typed before any open: they then apply to the next one.
  scanShapeFor: null,
  lastScanShapeError: false,
  preset: 'bf',
  // The ROI being drawn on the image: false, 'rect' or 'circle'.
  roiMode: false,
  // The last figure saved: {width, bytes}.
  lastFigure: null,
  // A rotation search under way, and the last one found: {theta, flip, curlEnergy, annulus}.
  findingRotation: false,
  lastRotation: null,
  // Line profiles: the panel a drag draws a line on (or false), the line drawn
  // ({panel, from, to} in pixel indices) and its profile ({distance, values, units, …}).
  lineMode: false,
  line: null,
  profile: null,
  // The compare grid's other acquisitions ({index, info, profile, files, fig, canvas,
  // overlay, readout}; compare.js), in the Worker's order.
  compared: [],
};

const freshDisplay = (log, hi) => ({ cmap: 'inferno', scale: log ? 'log' : 'linear', limits: { mode: 'percentile', lo: 0.5, hi }, zoom: 1, pan: null });
// The view: what each panel shows and how (sent to the engine as viewState()).
export const S = {
  image: {
    kind: 'bf', axis: 0, center: [0, 0], radius: 1, inner: null, outer: null, rect: null, point: null,
    rotation: 0, flip: false, cursor: [0, 0], roi: null, roiCircle: null,
    display: freshDisplay(false, 99.5),
  },
  pattern: {
    source: 'cursor',
    display: freshDisplay(true, 99.9),
  },
};
// Each panel's statistics from the last render (histogram, limits applied).
export const lastStats = {};

export function detShape() {
  const [, , kr, kc] = state.current.info.shape;
  const b = state.current.profile.bin || 1;
  return [Math.ceil(kr / b), Math.ceil(kc / b)];
}

// Detector step in mrad per (binned) pixel, or null when the files give none.
export function mradPerPx() {
  const cal = (state.current && state.current.info.calibration) || {};
  if (!cal.detector_step || cal.detector_units !== 'mrad') return null;
  return cal.detector_step * ((state.current.profile && state.current.profile.bin) || 1);
}

// What a panel's values are measured in.
export function unitsOf(panel) {
  if (!state.current) return '';
  const counts = state.current.info.dtype === 'float32' ? 'intensity' : 'counts';
  if (panel === 'pattern') return S.pattern.source === 'mean' ? counts + ' per position' : counts;
  switch (S.image.kind) {
    case 'com': case 'dpc': case 'commag': return 'det. px';
    case 'comdir': return '°';
    case 'idpc': return 'det. px · scan px';
    default: return counts;
  }
}

// The page takes no gestures while nothing is open or while a load runs.
export const interactive = () => state.current !== null && state.loading === null;
