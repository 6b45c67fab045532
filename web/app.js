// The page: panels, controls and the `window.stem4d` automation API. All science runs in the
// Worker's wasm engine; this file only turns user gestures into view states and requests.
import { fmtNum, fmtBytes, fmtLength, fmtEnergy, niceLength, SCALES, barTicks } from './format.js';
import { buildGeometry, syncGeometry, insideRadius } from './geometry.js';
import { renderProvenance } from './provenance.js';
import { composeFigure } from './figure.js';

const $ = (id) => document.getElementById(id);
const DIVERGING = new Set(['dpc', 'idpc']);
const PANELS = ['image', 'pattern'];

let worker = null;
let nextId = 1;
const pending = new Map();
let adapterInfo = null;
// How frames reach the screen: {mode: 'surface'|'readback', chosen, surface_ms, readback_ms}.
let presentInfo = null;
let colormaps = null;
let workerReady = null;
// The acquisition open now: {info, profile, bfFit, bfFitWarning, files, options, logical}, or
// null (the page is empty). While a load runs, `loading` holds its files; the panels then
// take no gestures, and a failed load leaves either the previous acquisition (still open in
// the Worker) or an empty page, never a mix of the two.
let current = null;
let loading = null;
let lastFiles = null;
let lastOptions = {};
// The fitted BF disk {center: [r, c], radius} presets and "reset" start from.
let fit = null;
// At most one render in flight (requestRender); a new Worker starts from a fresh one.
const freshRenderState = () => ({ inflight: false, dirty: false, lastMs: null, lastDrawn: null, lastGpu: null, lastError: null, waiters: [] });
let renderState = freshRenderState();
let statsTimer = null;
// Renders finished; with the calls made (the ids handed out) benchmarks check that an idle
// page asks nothing of the engine (stem4d.activity()).
let rendersDone = 0;
// The files the scan-shape fields were typed for (a key of names and sizes), or null when
// they were typed before any open: they then apply to the next one.
let scanShapeFor = null;
let lastScanShapeError = false;

const freshDisplay = (log, hi) => ({ cmap: 'inferno', scale: log ? 'log' : 'linear', limits: { mode: 'percentile', lo: 0.5, hi }, zoom: 1, pan: null });
const S = {
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
let preset = 'bf';

// ---------------------------------------------------------------- worker plumbing
function startWorker() {
  worker = new Worker('./worker.js', { type: 'module' });
  workerReady = new Promise((resolve) => {
    worker.onmessage = (ev) => {
      const m = ev.data;
      if (m.type === 'ready') {
        if (m.error) {
          adapterInfo = { error: m.error };
          showError('WebGPU is not available here (' + m.error + '). stem4d needs Chrome or Edge 113+ with a GPU; '
            + 'on Linux start Chrome with --enable-unsafe-webgpu --enable-features=Vulkan, or enable '
            + 'chrome://flags/#enable-unsafe-webgpu, then reload.');
          $('adapter').textContent = 'no WebGPU';
        } else {
          adapterInfo = m.adapter;
          colormaps = m.colormaps;
          $('adapter').textContent = m.adapter.name + (m.adapter.software ? ' (software adapter: correct, not fast)' : '');
          $('adapter').className = m.adapter.software ? 'muted warn' : 'muted';
        }
        resolve();
      } else if (m.type === 'progress') {
        showProgress(m.stage, m.done, m.total);
      } else if (m.type === 'reply') {
        const p = pending.get(m.id);
        pending.delete(m.id);
        if (!p) return;
        if ('error' in m) p.reject(new Error(m.error)); else p.resolve(m.result);
      }
    };
  });
  worker.onerror = (e) => showError('The viewer worker failed: ' + (e.message || e), true);
}

let lastCompute = null;

function call(op, args = {}, transfer = []) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, op, ...args }, transfer);
  });
}

function failPending(why) {
  for (const p of pending.values()) p.reject(new Error(why));
  pending.clear();
}

// A transferred canvas cannot be transferred again: a new Worker gets fresh elements. Each
// panel has a WebGPU canvas and a 2D one; which shows the frames is measured here
// (calibratePresent: display/present.rs says why) unless the URL asks (?present=surface|readback).
async function attachCanvases() {
  for (const panel of PANELS) {
    const old = $(panel + '-canvas');
    const fresh = old.cloneNode(false);
    old.replaceWith(fresh);
    bindPanelEvents(panel, fresh);
    const oldPlain = $(panel + '-plain');
    const plain = oldPlain.cloneNode(false);
    oldPlain.replaceWith(plain);
    const off = fresh.transferControlToOffscreen(), offPlain = plain.transferControlToOffscreen();
    await call('attach', { panel, canvas: off, plain: offPlain }, [off, offPlain]);
  }
  try {
    presentInfo = await call('calibratePresent', { sizes: canvasSizes() });
  } catch (e) {
    // The WebGPU canvases still work (the Worker keeps presenting them): the page says why.
    presentInfo = { mode: 'surface', chosen: 'default', error: e.message };
    showError('Frames are presented the default way: ' + e.message);
  }
  const asked = new URLSearchParams(location.search).get('present');
  if (asked) {
    try {
      presentInfo = await call('setPresent', { mode: asked });
    } catch (e) {
      showError(`The page address's present=${asked} is refused (${e.message}); frames are presented the ${presentInfo.mode} way`);
    }
  }
  showPresent();
  // The staging ring of file uploads is made while the page waits for files, not in the
  // first load. Not awaited: an open made meanwhile queues behind it in the Worker.
  call('prepareUploads').catch(() => {});
}

// The canvas of each panel that frames are presented on is shown; the other is transparent.
function showPresent() {
  const readback = presentInfo && presentInfo.mode === 'readback';
  for (const panel of PANELS) {
    $(panel + '-canvas').classList.toggle('unused', readback);
    $(panel + '-plain').classList.toggle('unused', !readback);
  }
}

// The load profile with how this page presents its frames.
const withPresent = (profile) => ({ ...profile, present: presentInfo });

async function restartWorker() {
  if (worker) worker.terminate();
  failPending('the viewer was restarted');
  renderState = freshRenderState();
  startWorker();
  await workerReady;
  if (adapterInfo && !adapterInfo.error) await attachCanvases();
}

// ---------------------------------------------------------------- messages
function showError(text, recoverable = false) {
  $('error-text').textContent = text;
  $('error').hidden = false;
  const retry = recoverable || /lost|scan-shape|scan shape|out of GPU memory|does not fit|bin the detector|cancelled/i.test(text);
  $('recover').hidden = !(retry && lastFiles && lastFiles.length);
  $('recover').textContent = /lost/i.test(text) ? 'Recover' : 'Open again';
  if (/scan-shape|scan shape/i.test(text)) $('scan-rows').focus();
  else if (/scan crop/i.test(text)) $('crop').focus();
}
function clearError() { $('error').hidden = true; }
// What happened that is not an error (a setting applied, a cancelled chooser).
function showNotice(text) {
  $('notice-text').textContent = text;
  $('notice').hidden = false;
}
function clearNotice() { $('notice').hidden = true; }

const STAGE_NAMES = {
  'read, decode, upload': 'reading, decoding and uploading frames',
};
function showProgress(stage, done, total) {
  $('progress').hidden = false;
  const frac = total > 0 ? done / total : 0;
  $('progress-fill').style.width = (100 * frac).toFixed(1) + '%';
  const logical = loading && loading.logical;
  const bytes = total > 0 && logical ? ' · ' + fmtBytes(frac * logical) + ' of ' + fmtBytes(logical) : '';
  const count = total > 0 ? `: ${done} / ${total} frames` : '…';
  $('progress-text').textContent = `${STAGE_NAMES[stage] || stage}${count}${bytes}`;
}
function hideProgress() { $('progress').hidden = true; }

// ---------------------------------------------------------------- opening
const filesKey = (files) => Array.from(files || [], (f) => `${f.name}:${f.size}`).sort().join('|');
const names = (files) => Array.from(files || [], (f) => f.name).join(', ');

// The scan shape typed in the header, if it belongs to `files` (see scanShapeFor). Fields
// typed for other files are cleared, and the page says so.
function scanShapeFieldsFor(files) {
  const r = parseInt($('scan-rows').value, 10), c = parseInt($('scan-cols').value, 10);
  if (!(r > 0 && c > 0)) return null;
  if (scanShapeFor !== null && scanShapeFor !== filesKey(files)) {
    $('scan-rows').value = ''; $('scan-cols').value = '';
    showNotice(`The scan shape ${r} × ${c} was typed for other files; ${names(files)} open with the shape they store.`);
    scanShapeFor = null;
    return null;
  }
  return [r, c];
}

function readOptions(files) {
  const o = {};
  const shape = scanShapeFieldsFor(files);
  if (shape) o.scanShape = shape;
  const bin = parseInt($('bin').value, 10);
  if (bin > 1) o.bin = bin;
  const crop = $('crop').value.trim();
  if (crop) {
    const m = crop.match(/^(\d+)\s*:\s*(\d+)\s*,\s*(\d+)\s*:\s*(\d+)$/);
    if (!m) throw new Error(`scan crop "${crop}": write rows and columns as r0:r1,c0:c1 (half-open)`);
    o.crop = m.slice(1).map(Number);
  }
  if ($('bad-pixels').checked) o.maskBadPixels = true;
  return o;
}

// Open from the page's controls: a malformed option or a failed open is shown on the page,
// not thrown.
function openFromUi(files, base = {}) {
  files = Array.from(files || []);
  let opts;
  try { opts = { ...base, ...readOptions(files) }; } catch (e) { showError(e.message); return Promise.resolve(); }
  return openFiles(files, opts).catch(() => {});
}

// Open `files`. Until the Worker has read their metadata the acquisition open now stays
// open there (Viewer::open sets it aside only when the new one is about to load): a failed
// open leaves it usable, a failed load leaves an empty page, and either is said.
async function openFiles(files, options = {}) {
  files = Array.from(files || []);
  try {
    await workerReady;
    if (adapterInfo && adapterInfo.error) throw new Error('WebGPU is not available: ' + adapterInfo.error);
    if (!files.length && !options.synthetic) throw new Error('no files given: choose or drop the files of one acquisition');
  } catch (e) {
    showError(e.message);
    throw e;
  }
  lastFiles = files;
  lastOptions = options;
  clearError();
  const previous = current;
  const what = options.synthetic ? `synthetic ${options.synthetic.join('×')}` : names(files);
  loading = { files, options, logical: 0, what };
  document.body.classList.add('loading');
  showProgress('reading metadata', 0, 0);
  let r;
  try {
    r = await call('open', { files, options });
  } catch (e) {
    loading = null;
    document.body.classList.remove('loading');
    hideProgress();
    lastScanShapeError = /scan-shape|scan shape/i.test(e.message);
    await afterFailedOpen(previous, `Opening ${what} failed: ${e.message}`);
    throw e;
  }
  lastScanShapeError = false;
  if (options.scanShape) scanShapeFor = filesKey(files);
  loading.logical = r.info.logical_bytes;
  showProgress('drawing the first image', 0, 0);
  current = { ...r, files, options, logical: r.info.logical_bytes };
  loading = null;
  applyDefaults(r);
  showOpened();
  try {
    await renderNow();
  } finally {
    document.body.classList.remove('loading');
    hideProgress();
  }
  // The totals, CoM moments and ring sums follow the first image; the profile shown then
  // has their times. Calls made meanwhile queue behind them in the Worker.
  const opened = current;
  call('prepare').then(() => call('profile')).then((p) => {
    if (current !== opened) return;
    current.profile = p;
    showProfile();
  }).catch((e) => { if (current === opened) showError(e.message); });
  return r.info;
}

// After a failed open: the acquisition open before is still there when the Worker kept it
// (the failure came before the new load began), else the page is empty.
async function afterFailedOpen(previous, message) {
  let kept = false;
  try { kept = previous !== null && await call('isOpen'); } catch (e) { kept = false; }
  if (kept) {
    current = previous;
    showError(`${message}. ${names(previous.files) || 'The acquisition'} is still open.`, true);
    await renderNow().catch(() => {});
  } else {
    showEmpty();
    showError(previous ? `${message}. Nothing is open now: the previous acquisition was released when loading began.` : message, true);
  }
}

// The empty page: nothing open, no stale image, readouts, limits or exports.
function showEmpty() {
  current = null;
  fit = null;
  document.body.classList.add('empty');
  $('drop-hint').hidden = false;
  $('drop-hint').textContent = 'Drop an acquisition here (Arina master + data files, EMD, HDF5 stack, EMPAD raw + xml), or a folder. Files never leave this computer.';
  $('calibration').hidden = true;
  $('profile').textContent = '';
  for (const panel of PANELS) {
    $(panel + '-readout').textContent = '';
    delete lastStats[panel];
    clearDisplayBox(panel);
  }
  drawOverlays();
  syncGeometry(geometryContext());
  syncEnabled();
}

function showOpened() {
  document.body.classList.remove('empty');
  const info = current.info;
  $('drop-hint').textContent = info.files.map((f) => f.name).join(', ') + ' — ' + info.shape.join(' × ') + ' ' + info.dtype
    + (current.profile.bin > 1 ? ` (bin ${current.profile.bin})` : '') + (current.profile.mask_bad_pixels ? ', bad pixels masked' : '');
  showCalibration();
  showProfile();
  fitFrames();
  syncEnabled();
}

function showProfile() {
  if (!current) return;
  renderProvenance($('profile'), withPresent(current.profile), current.info, current.bfFitWarning);
}

// Energy, camera length, pixel sizes, scan step and convergence angle, each with its source.
function showCalibration() {
  const cal = (current && current.info.calibration) || {};
  const src = cal.sources || {};
  const parts = [];
  const add = (key, label, text) => { if (text) parts.push({ key, text: `${label} ${text}`, title: src[key] || '' }); };
  add('energy_ev', 'E', cal.energy_ev != null && fmtEnergy(cal.energy_ev));
  add('camera_length_m', 'CL', cal.camera_length_m != null && fmtLength(cal.camera_length_m));
  add('detector_distance_m', 'detector distance', cal.camera_length_m == null && cal.detector_distance_m != null && fmtLength(cal.detector_distance_m));
  add('detector_pixel_size_m', 'det. pixel', cal.detector_pixel_size_m != null && fmtLength(cal.detector_pixel_size_m));
  add('detector_step', 'det. step', cal.detector_step != null && `${fmtNum(cal.detector_step)} ${cal.detector_units || ''}/px`);
  add('scan_step', 'scan step', cal.scan_step != null && `${fmtNum(cal.scan_step)} ${cal.scan_units || ''}`);
  add('convergence_semiangle_mrad', 'α', cal.convergence_semiangle_mrad != null && `${fmtNum(cal.convergence_semiangle_mrad)} mrad`);
  add('scan_rotation_deg', 'scan rotation', cal.scan_rotation_deg != null && `${fmtNum(cal.scan_rotation_deg)}°`);
  const box = $('calibration');
  box.replaceChildren(...(parts.length ? parts : [{ text: 'no calibration in the files: pixels only' }]).map((p, i) => {
    const s = document.createElement('span');
    s.textContent = (i ? ' · ' : 'calibration: ') + p.text;
    if (p.key) s.dataset.key = p.key;
    s.title = p.title ? 'from ' + p.title : 'pixels: the files hold no calibration';
    return s;
  }));
  box.hidden = false;
}

function detShape() {
  const [, , kr, kc] = current.info.shape;
  const b = current.profile.bin || 1;
  return [Math.ceil(kr / b), Math.ceil(kc / b)];
}

// Detector step in mrad per (binned) pixel, or null when the files give none.
function mradPerPx() {
  const cal = (current && current.info.calibration) || {};
  if (!cal.detector_step || cal.detector_units !== 'mrad') return null;
  return cal.detector_step * ((current.profile && current.profile.bin) || 1);
}

function applyDefaults(r) {
  const [rows, cols] = r.info.shape;
  const [kr, kc] = detShape();
  let [fr, fc, rad] = r.bfFit;
  if (!(rad > 0)) { fr = (kr - 1) / 2; fc = (kc - 1) / 2; rad = Math.min(kr, kc) / 6; }
  fit = { center: [round2(fr), round2(fc)], radius: round2(rad) };
  S.image.cursor = [Math.floor(rows / 2), Math.floor(cols / 2)];
  S.image.roi = null;
  S.image.roiCircle = null;
  S.image.rect = null;
  S.image.point = null;
  const cal = r.info.calibration || {};
  // The file's scan rotation pre-fills the DPC rotation.
  S.image.rotation = Number.isFinite(cal.scan_rotation_deg) ? cal.scan_rotation_deg : 0;
  S.image.display.zoom = 1; S.image.display.pan = null;
  S.pattern.display.zoom = 1; S.pattern.display.pan = null;
  setPreset(preset);
}
const round2 = (x) => Math.round(x * 100) / 100;

// Presets from the fitted BF disk (centre c, radius r), never from a dragged one: BF r,
// ABF r/2..r, ADF 1.2r..2.5r, HAADF 3r..the largest radius about c on the detector.
function setPreset(p) {
  preset = p;
  $('image-kind').value = p;
  const im = S.image;
  const f = fit || { center: im.center, radius: im.radius > 0 ? im.radius : 1 };
  const r = f.radius > 0 ? f.radius : 1;
  const fromFit = () => { im.center = f.center.slice(); };
  const annulus = (a, b) => { fromFit(); im.kind = 'adf'; im.inner = round2(a); im.outer = round2(Math.max(b, a + 1)); };
  switch (p) {
    case 'bf': fromFit(); im.kind = 'bf'; im.radius = f.radius; break;
    case 'disk': im.kind = 'bf'; break;
    case 'abf': annulus(r / 2, r); break;
    case 'adf': annulus(1.2 * r, 2.5 * r); break;
    case 'haadf': {
      const edge = current ? insideRadius(f.center, detShape()) : 4 * r;
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
function resetToFit() {
  if (!fit) return;
  const im = S.image;
  if (['bf', 'abf', 'adf', 'haadf'].includes(preset)) setPreset(preset);
  else {
    im.center = fit.center.slice();
    im.radius = fit.radius;
    if (preset === 'annulus') { im.inner = fit.radius; im.outer = round2(2 * fit.radius); }
  }
  requestRender();
}

function clampRect() {
  if (!current || !S.image.rect) return;
  const [kr, kc] = detShape();
  let [r0, r1, c0, c1] = S.image.rect.map(Math.round);
  r0 = Math.max(0, Math.min(r0, kr - 1)); r1 = Math.max(r0 + 1, Math.min(r1, kr));
  c0 = Math.max(0, Math.min(c0, kc - 1)); c1 = Math.max(c0 + 1, Math.min(c1, kc));
  S.image.rect = [r0, r1, c0, c1];
}

// ---------------------------------------------------------------- rendering
// Deep-merge a view patch (`stem4d.setView`) into the UI state. `display.log` (saved views
// and scripts of before `scale`) is taken as the scale it names.
function applyPatch(patch) {
  if (patch.preset) setPreset(patch.preset);
  for (const k of PANELS) {
    if (!patch[k]) continue;
    const { display, ...rest } = patch[k];
    Object.assign(S[k], rest);
    if (display) mergeDisplay(S[k].display, display);
  }
  syncDisplayControls();
}
function mergeDisplay(d, patch) {
  const { log, ...rest } = patch;
  Object.assign(d, rest);
  if (log !== undefined && rest.scale === undefined) d.scale = log ? 'log' : (d.scale === 'log' ? 'linear' : d.scale);
}

function viewState() {
  const im = S.image;
  // The cursor and the detector are drawn on the overlays (drawCursor, drawDetector): moving
  // the cursor redraws the pattern canvas only, dragging a detector the image canvas only.
  const keep = { kind: im.kind, axis: im.axis, rotation: im.rotation, flip: im.flip, cursor: im.cursor, cursorMarker: false, detectorMarker: false, roi: im.roi, roiCircle: im.roiCircle, display: im.display };
  if (['bf', 'df', 'adf'].includes(im.kind)) keep.center = im.center;
  if (['bf', 'df'].includes(im.kind)) keep.radius = im.radius;
  if (im.kind === 'adf') { keep.inner = im.inner; keep.outer = im.outer; }
  if (im.kind === 'rect') keep.rect = im.rect;
  if (im.kind === 'point') keep.point = im.point;
  return { image: keep, pattern: S.pattern };
}

function canvasSize(panel) {
  const el = $(panel + '-canvas');
  const dpr = window.devicePixelRatio || 1;
  return [Math.max(1, Math.round(el.clientWidth * dpr)), Math.max(1, Math.round(el.clientHeight * dpr))];
}

const canvasSizes = () => ({ image: canvasSize('image'), pattern: canvasSize('pattern') });

// Each panel's frame takes its plane's aspect and the largest size its stage allows, so the
// image fills its canvas without a band (the engine letterboxes only when zoomed or panned).
function fitFrames() {
  for (const panel of PANELS) {
    const frame = $(panel + '-canvas').parentElement;
    const stage = frame.parentElement;
    const W = stage.clientWidth, H = stage.clientHeight;
    if (!current || !(W > 0 && H > 0)) { frame.style.width = W + 'px'; frame.style.height = H + 'px'; continue; }
    const [h, w] = planeSize(panel);
    const s = Math.min(W / w, H / h);
    frame.style.width = Math.max(1, Math.floor(w * s)) + 'px';
    frame.style.height = Math.max(1, Math.floor(h * s)) + 'px';
  }
}

// At most one render in flight; gestures in between collapse into the next one.
function requestRender() {
  if (!current || loading) return;
  const drawing = current;
  drawOverlays();
  syncGeometry(geometryContext());
  if (renderState.inflight) { renderState.dirty = true; return; }
  renderState.inflight = true;
  renderState.dirty = false;
  call('render', { state: viewState(), sizes: canvasSizes() }).then((r) => {
    renderState.lastMs = r.ms;
    renderState.lastDrawn = r.drawn;
    renderState.lastGpu = r.gpu;
    renderState.lastError = null;
    rendersDone++;
  }).catch((e) => {
    renderState.lastError = e;
    // A render of an acquisition that was replaced or failed meanwhile is not this page's error.
    if (current === drawing) showError(e.message);
  }).finally(() => {
    renderState.inflight = false;
    if (renderState.dirty && current) requestRender();
    else {
      // Callers awaiting the redraw learn whether the view they asked for was drawn.
      const w = renderState.waiters; renderState.waiters = [];
      const err = renderState.lastError;
      w.forEach(({ resolve, reject }) => (err ? reject(err) : resolve()));
      clearTimeout(statsTimer);
      statsTimer = setTimeout(refreshStats, 120);
    }
    drawOverlays();
  });
}
function renderNow() {
  if (!current || loading) return Promise.resolve();
  return new Promise((resolve, reject) => { renderState.waiters.push({ resolve, reject }); requestRender(); });
}

const lastStats = {};
async function refreshStats() {
  if (!current || renderState.inflight) return;
  const opened = current;
  for (const panel of PANELS) {
    try {
      const st = await call('stats', { panel });
      if (current !== opened) return;
      lastStats[panel] = st;
      drawHistogram(panel);
    } catch (e) { /* a newer render supersedes */ }
  }
}

const shownOf = (panel) => SCALES[S[panel].display.scale] || SCALES.linear;

// What a panel's values are measured in.
function unitsOf(panel) {
  if (!current) return '';
  const counts = current.info.dtype === 'float32' ? 'intensity' : 'counts';
  if (panel === 'pattern') return S.pattern.source === 'mean' ? counts + ' per position' : counts;
  switch (S.image.kind) {
    case 'com': case 'dpc': case 'commag': return 'det. px';
    case 'comdir': return '°';
    case 'idpc': return 'det. px · scan px';
    default: return counts;
  }
}

function clearDisplayBox(panel) {
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
function drawHistogram(panel) {
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
  const t = colormaps.tables[Math.max(0, colormaps.names.indexOf(d.cmap))];
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

// ---------------------------------------------------------------- geometry (mirrors display.wgsl)
function planeSize(panel) {
  if (!current) return [1, 1];
  return panel === 'image' ? [current.info.shape[0], current.info.shape[1]] : detShape();
}
function toSource(panel, ev) {
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

// The page takes no gestures while nothing is open or while a load runs.
const interactive = () => current !== null && loading === null;

function bindPanelEvents(panel, el) {
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
    if (panel === 'image') {
      if (roiMode === 'rect') { drag = { mode: 'roi', r0: s.r, c0: s.c }; return; }
      if (roiMode === 'circle') { drag = { mode: 'roi-circle', r0: s.r - 0.5, c0: s.c - 0.5 }; return; }
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
    } else moveDetector(drag, s);
  });
  window.addEventListener('mouseup', () => {
    if (drag && drag.mode.startsWith('roi')) {
      roiMode = false;
      $('roi-draw').classList.remove('active');
      $('roi-circle').classList.remove('active');
    }
    drag = null;
  });
  el.addEventListener('mouseleave', () => { $(panel + '-readout').textContent = ''; });
}
const clampI = (v, a, b) => Math.max(a, Math.min(b, v));

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
  if (!current || r < 0 || c < 0 || r >= h || c >= w) { out.textContent = ''; return; }
  if (hoverBusy || renderState.inflight) return;
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
  const cal = current.info.calibration || {};
  if (panel === 'image') {
    return cal.scan_step ? `  [${fmtNum(r * cal.scan_step)}, ${fmtNum(c * cal.scan_step)}] ${cal.scan_units || ''}` : '';
  }
  const mrad = mradPerPx();
  const [cr, cc] = fit ? fit.center : [0, 0];
  const dr = r - cr, dc = c - cc;
  if (mrad) return `  θ = (${fmtNum(dr * mrad)}, ${fmtNum(dc * mrad)}) mrad, |θ| = ${fmtNum(Math.hypot(dr, dc) * mrad)} mrad from the beam centre`;
  return fit ? `  ${fmtNum(Math.hypot(dr, dc))} px from the beam centre` : '';
}

// A panel's source coordinates (pixel (i, j) covers [i, i+1) × [j, j+1)) on its canvas, as
// wgsl/display.wgsl maps them; drawing is clipped to the plane.
function canvasMap(g, panel, cw, ch) {
  const [h, w] = planeSize(panel);
  const d = S[panel].display;
  const scale = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  const X = (c) => (c - pc) * scale + cw / 2, Y = (r) => (r - pr) * scale + ch / 2;
  g.beginPath(); g.rect(X(0), Y(0), w * scale, h * scale); g.clip();
  return { h, w, fit: scale, X, Y };
}

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
  const cal = current.info.calibration || {};
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
function drawOverlays() {
  for (const panel of PANELS) {
    const el = $(panel + '-overlay');
    const [cw, ch] = canvasSize(panel);
    el.width = cw; el.height = ch;
    const g = el.getContext('2d');
    g.clearRect(0, 0, cw, ch);
    if (!current) continue;
    if (panel === 'image') drawCursor(g, cw, ch);
    else drawDetector(g, cw, ch);
    drawScaleBar(g, panel, cw, ch);
  }
}

// ---------------------------------------------------------------- controls
let roiMode = false;
const MODE_LABELS = { percentile: ['lo %', 'hi %'], absolute: ['lo', 'hi'], symmetric: ['lo %', 'hi %'] };
function buildDisplayControls() {
  for (const box of document.querySelectorAll('.display')) {
    const panel = box.dataset.panel;
    box.innerHTML = `
      <select class="cmap" title="colour map" aria-label="${panel} colour map">${colormaps.names.map((n) => `<option>${n}</option>`).join('')}</select>
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
      if (mode === 'absolute' && current) {
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
    if (!st || !current) return;
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

function syncDisplayControls() {
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

function geometryContext() {
  return {
    open: !!current, kind: S.image.kind, preset, image: S.image, fit,
    det: current ? detShape() : null, mradPerPx: current ? mradPerPx() : null,
    fitWarning: current ? current.bfFitWarning : null,
    onChange: () => { clampRect(); requestRender(); },
    onReset: resetToFit,
  };
}

// Controls that need an acquisition are disabled, with the reason, while none is open.
function syncEnabled() {
  const none = !current;
  for (const id of ['export-figure', 'export-image-png', 'export-pattern-png', 'export-npy', 'save-state', 'load-state-button', 'roi-draw', 'roi-circle', 'roi-clear']) {
    const el = $(id);
    el.disabled = none;
    if (none) el.dataset.why = 'open an acquisition first'; else delete el.dataset.why;
  }
}

function download(name, bytes, type) {
  const url = URL.createObjectURL(bytes instanceof Blob ? bytes : new Blob([bytes], { type }));
  const a = document.createElement('a');
  a.href = url; a.download = name; a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
const baseName = () => (current && current.info.files.length ? current.info.files[0].name.replace(/\.[^.]*$/, '') : 'stem4d');

// An export's failure is said on the page, never lost.
const exporting = (fn) => async () => {
  if (!current) { showError('Nothing to export: open an acquisition first.'); return; }
  try { await fn(); } catch (e) { showError('Export failed: ' + e.message); }
};

// Bin, masking or crop changed with an acquisition open: the resident copy is rebuilt from
// the same files, and the page says what that costs.
function reapplySettings(what) {
  if (!current || loading || current.options.synthetic) return;
  const files = current.files;
  showNotice(`${what}: re-reading ${names(files)} (${fmtBytes(current.info.logical_bytes)}) to rebuild the GPU copy.`);
  openFromUi(files);
}

function bindControls() {
  const pick = (input) => {
    input.addEventListener('change', () => {
      // The input's FileList is live: clearing the input (so the same files can be chosen
      // again) empties it, so it is copied first.
      const files = Array.from(input.files || []);
      input.value = '';
      if (files.length) { clearNotice(); openFromUi(files); }
    });
    input.addEventListener('cancel', () => showNotice('No files were chosen; nothing changed.'));
  };
  pick($('file-input'));
  pick($('folder-input'));
  $('open-files').onclick = () => $('file-input').click();
  $('open-folder').onclick = () => $('folder-input').click();
  $('load-state-button').onclick = () => $('load-state').click();
  $('image-kind').onchange = (e) => { setPreset(e.target.value); requestRender(); };
  $('rotation').onchange = (e) => { const v = parseFloat(e.target.value); if (Number.isFinite(v)) { S.image.rotation = v; requestRender(); } };
  $('flip').onchange = (e) => { S.image.flip = e.target.checked; requestRender(); };
  $('pattern-source').onchange = (e) => { S.pattern.source = e.target.value; requestRender(); };
  for (const id of ['scan-rows', 'scan-cols']) {
    $(id).addEventListener('input', () => { scanShapeFor = lastScanShapeError && lastFiles ? filesKey(lastFiles) : null; });
    $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter' && lastScanShapeError && lastFiles) openFromUi(lastFiles); });
  }
  $('bin').onchange = (e) => reapplySettings(`detector bin ${e.target.value}`);
  $('bad-pixels').onchange = (e) => reapplySettings(e.target.checked ? 'bad-pixel masking on' : 'bad-pixel masking off');
  $('crop').onchange = (e) => reapplySettings(e.target.value.trim() ? `scan crop ${e.target.value.trim()}` : 'scan crop removed');
  const roiButton = (mode, id, other) => {
    $(id).onclick = () => {
      roiMode = roiMode === mode ? false : mode;
      $(id).classList.toggle('active', roiMode === mode);
      $(other).classList.remove('active');
    };
  };
  roiButton('rect', 'roi-draw', 'roi-circle');
  roiButton('circle', 'roi-circle', 'roi-draw');
  $('roi-clear').onclick = () => { S.image.roi = null; S.image.roiCircle = null; requestRender(); };
  $('cancel').onclick = async () => {
    const what = loading ? loading.what : 'the acquisition';
    hideProgress();
    loading = null;
    document.body.classList.remove('loading');
    await restartWorker();
    showEmpty();
    showError(`Loading ${what} was cancelled. Nothing is open now; open or drop files to go on.`, true);
  };
  $('error-close').onclick = clearError;
  $('notice-close').onclick = clearNotice;
  $('recover').onclick = async () => {
    clearError();
    if (/lost/i.test($('error-text').textContent)) await restartWorker();
    openFromUi(lastFiles, { ...lastOptions, scanShape: undefined });
  };
  $('export-image-png').onclick = exporting(async () => download(baseName() + '-image.png', await call('png', { panel: 'image' }), 'image/png'));
  $('export-pattern-png').onclick = exporting(async () => download(baseName() + '-pattern.png', await call('png', { panel: 'pattern' }), 'image/png'));
  $('export-npy').onclick = exporting(async () => download(`${baseName()}-${S.image.kind}.npy`, await call('npy'), 'application/octet-stream'));
  $('save-state').onclick = exporting(async () => {
    const state = { stem4d_view: 1, files: current.info.files.map((f) => f.name), source_sha256: current.info.source_sha256,
      options: current.options, preset, view: S };
    download(baseName() + '-view.json', JSON.stringify(state, null, 1), 'application/json');
  });
  $('export-figure').onclick = exporting(async () => openFigureDialog());
  $('figure-form').addEventListener('submit', (e) => {
    if (e.submitter && e.submitter.value === 'save') { e.preventDefault(); $('figure-dialog').close(); exporting(saveFigure)(); }
  });
  $('load-state').addEventListener('change', async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (f) { try { await restoreView(JSON.parse(await f.text())); } catch (err) { showError('Cannot load the view file ' + f.name + ': ' + err.message); } }
  });
  $('shortcuts-button').onclick = () => $('shortcuts').showModal();
  document.addEventListener('keydown', onKey);
  // Drag and drop, folders included.
  document.addEventListener('dragover', (e) => { e.preventDefault(); document.body.classList.add('dragging'); });
  document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
  document.addEventListener('drop', async (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    const files = await droppedFiles(e.dataTransfer);
    if (files.length) openFromUi(files);
  });
  const resized = () => { fitFrames(); if (current) requestRender(); else drawOverlays(); };
  for (const panel of PANELS) new ResizeObserver(resized).observe($(panel + '-canvas').parentElement.parentElement);
}

// Keys: arrows move the scan cursor while a panel (or nothing in particular) has focus, never
// while a field or menu has it; letters are the shortcuts listed in the '?' dialog.
function onKey(e) {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (document.querySelector('dialog[open]')) return;
  const panelOf = (el) => (el && el.closest && el.closest('.panel') ? el.closest('.panel').id.replace('-panel', '') : null);
  const onPanel = t === document.body || (t && t.tagName === 'CANVAS');
  const step = e.shiftKey ? 10 : 1;
  const mv = { ArrowUp: [-step, 0], ArrowDown: [step, 0], ArrowLeft: [0, -step], ArrowRight: [0, step] }[e.key];
  if (mv) {
    if (!onPanel || !interactive()) return;
    e.preventDefault();
    const [rows, cols] = planeSize('image');
    S.image.cursor = [clampI(S.image.cursor[0] + mv[0], 0, rows - 1), clampI(S.image.cursor[1] + mv[1], 0, cols - 1)];
    requestRender();
    return;
  }
  if (t && t.tagName === 'BUTTON' && (e.key === ' ' || e.key === 'Enter')) return;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  const presetKeys = { b: 'bf', a: 'abf', d: 'adf', h: 'haadf', m: 'commag', w: 'comdir' };
  if (key === '?') { e.preventDefault(); $('shortcuts').showModal(); return; }
  if (key === 'o') { e.preventDefault(); $('file-input').click(); return; }
  if (!interactive()) return;
  if (presetKeys[key]) { e.preventDefault(); setPreset(presetKeys[key]); requestRender(); return; }
  if (key === 'l') {
    e.preventDefault();
    const panel = panelOf(t) || 'image';
    const d = S[panel].display;
    d.scale = d.scale === 'log' ? 'linear' : 'log';
    syncDisplayControls(); requestRender();
    return;
  }
  if (key === 'f') {
    e.preventDefault();
    for (const p of PANELS) { S[p].display.zoom = 1; S[p].display.pan = null; }
    fitFrames(); requestRender();
    return;
  }
  if (key === 'r') { e.preventDefault(); resetToFit(); }
}

function restoreView(state) {
  if (state.stem4d_view !== 1 || !state.view) throw new Error('not a stem4d view file');
  if (!current) throw new Error('open the acquisition first');
  if (state.source_sha256 !== current.info.source_sha256) {
    throw new Error(`it was saved for ${state.files.join(', ')}, not the files open now`);
  }
  const { display: di, ...image } = state.view.image;
  const { display: dp, ...pattern } = state.view.pattern;
  Object.assign(S.image, image);
  Object.assign(S.pattern, pattern);
  if (di) mergeDisplay(S.image.display, di);
  if (dp) mergeDisplay(S.pattern.display, dp);
  preset = state.preset || preset;
  $('image-kind').value = preset;
  syncDisplayControls();
  return renderNow();
}

async function droppedFiles(dt) {
  const entries = Array.from(dt.items || []).map((i) => i.webkitGetAsEntry && i.webkitGetAsEntry()).filter(Boolean);
  if (!entries.length) return Array.from(dt.files || []);
  const out = [];
  const walk = async (entry) => {
    if (entry.isFile) out.push(await new Promise((res, rej) => entry.file(res, rej)));
    else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walk(e);
      }
    }
  };
  for (const e of entries) await walk(e);
  return out;
}

// ---------------------------------------------------------------- figure export
function figureTitle(panel) {
  const kind = panel === 'image' ? $('image-kind').selectedOptions[0].textContent : $('pattern-source').selectedOptions[0].textContent;
  return `${baseName()} — ${kind}`;
}
function openFigureDialog() {
  $('figure-title').value = figureTitle($('figure-panel').value);
  $('figure-panel').onchange = (e) => { $('figure-title').value = figureTitle(e.target.value); };
  $('figure-dialog').showModal();
}

// The figure's metadata lines: files, shape, detector, calibration, masking.
function figureMetadata(panel) {
  const info = current.info, p = current.profile, cal = info.calibration || {};
  const im = S.image;
  const det = im.kind === 'bf' || im.kind === 'df' ? `disk r ${fmtNum(im.radius)} px at (${im.center.map(fmtNum).join(', ')})`
    : im.kind === 'adf' ? `annulus ${fmtNum(im.inner)}–${fmtNum(im.outer)} px at (${im.center.map(fmtNum).join(', ')})`
      : im.kind === 'rect' ? `rectangle [${im.rect.join(', ')})` : im.kind === 'point' ? `point (${im.point.join(', ')})` : 'whole frame';
  const mrad = mradPerPx();
  const lines = [
    `${info.files.map((f) => f.name).join(', ')}`,
    `${info.shape.join(' × ')} ${info.dtype}${p.bin > 1 ? `, bin ${p.bin}` : ''}${p.mask_bad_pixels ? ', bad pixels masked' : ''}`,
  ];
  if (panel === 'image') lines.push(`detector: ${det}${mrad && im.kind === 'adf' ? ` (${fmtNum(im.inner * mrad)}–${fmtNum(im.outer * mrad)} mrad)` : mrad && im.radius && im.kind === 'bf' ? ` (${fmtNum(im.radius * mrad)} mrad)` : ''}`
    + (['dpc', 'idpc', 'commag', 'comdir'].includes(im.kind) ? `, rotation ${fmtNum(im.rotation)}°${im.flip ? ', flipped' : ''}` : ''));
  else lines.push(`pattern: ${S.pattern.source}${S.pattern.source === 'cursor' ? ` at (${im.cursor.join(', ')})` : ''}`);
  const c = [cal.energy_ev != null && fmtEnergy(cal.energy_ev), cal.camera_length_m != null && 'CL ' + fmtLength(cal.camera_length_m),
    cal.scan_step != null && `scan step ${fmtNum(cal.scan_step)} ${cal.scan_units || ''}`,
    cal.convergence_semiangle_mrad != null && `α ${fmtNum(cal.convergence_semiangle_mrad)} mrad`].filter(Boolean);
  if (c.length) lines.push(c.join(', '));
  return lines;
}

async function saveFigure() {
  const panel = $('figure-panel').value;
  const width = clampI(parseInt($('figure-width').value, 10) || 1200, 200, 8000);
  const png = await call('png', { panel });
  const st = lastStats[panel] || await call('stats', { panel });
  const cal = current.info.calibration || {};
  const blob = await composeFigure({
    png, width, title: $('figure-title').value,
    metadata: $('figure-meta').checked ? figureMetadata(panel) : [],
    stats: st, units: unitsOf(panel), scale: S[panel].display.scale,
    table: colormaps.tables[Math.max(0, colormaps.names.indexOf(S[panel].display.cmap))],
    wheel: panel === 'image' && S.image.kind === 'comdir',
    step: panel === 'image' ? cal.scan_step : mradPerPx(), stepUnits: panel === 'image' ? cal.scan_units : 'mrad',
  });
  lastFigure = { width, bytes: blob.size };
  download(`${baseName()}-${panel === 'image' ? S.image.kind : S.pattern.source}-figure.png`, blob, 'image/png');
  return blob;
}
let lastFigure = null;

// ---------------------------------------------------------------- automation API
function normaliseParams(params) {
  const p = { ...params };
  if (p.mask && ArrayBuffer.isView(p.mask)) {
    p.mask = p.mask instanceof Uint8Array || p.mask instanceof Uint8ClampedArray
      ? Array.from(p.mask, (v) => v !== 0) : Array.from(p.mask);
  }
  return p;
}

window.stem4d = {
  version: '0.1.0',
  open: (files, options = {}) => openFiles(files, options),
  async product(params) {
    if (!current) throw new Error('no acquisition is open: call stem4d.open first');
    return call('product', { params: normaliseParams(params) });
  },
  adapter: () => adapterInfo,
  async profile() { return withPresent(await call('profile')); },
  // What the page shows now: the files open (null when empty), whether a load runs, the
  // error and notice on the page, and the fitted BF disk with its warning.
  status: () => ({
    open: current ? current.info.files.map((f) => f.name) : null,
    loading: loading !== null,
    error: $('error').hidden ? null : $('error-text').textContent,
    notice: $('notice').hidden ? null : $('notice-text').textContent,
    fit: fit && { ...fit, warning: current && current.bfFitWarning },
  }),
  // How frames reach the screen (see attachCanvases), and a way to choose it: resolves when
  // the view is drawn that way.
  present: () => presentInfo && { ...presentInfo },
  async setPresent(mode) {
    presentInfo = await call('setPresent', { mode });
    showPresent();
    await renderNow();
    return { ...presentInfo };
  },
  // UI state for tests and scripts: read, patch (deep-merged) and wait for the redraw.
  view: () => JSON.parse(JSON.stringify({ preset, ...S })),
  async setView(patch) {
    applyPatch(patch);
    return renderNow();
  },
  // Benchmarks: apply a patch without drawing; resolves to the ms until the GPU is done.
  async computeView(patch) {
    applyPatch(patch);
    if (renderState.inflight) await renderNow();
    lastCompute = await call('compute', { state: viewState() });
    return lastCompute.ms;
  },
  // The last computeView's split: {ms, submit_ms} (ms until the work was submitted), and
  // {gpu} while passes are timed.
  lastCompute: () => lastCompute,
  // Benchmarks: time each GPU pass of what follows (resolves to whether the adapter can).
  timePasses: (on) => call('timePasses', { on }),
  rendered: () => renderNow(),
  lastRenderMs: () => renderState.lastMs,
  lastRender: () => ({ ms: renderState.lastMs, drawn: renderState.lastDrawn, gpu: renderState.lastGpu }),
  // Counts so far: {calls} made to the engine, {renders} finished.
  activity: () => ({ calls: nextId - 1, renders: rendersDone }),
  stats: (panel) => call('stats', { panel }),
  valueAt: (panel, r, c) => call('valueAt', { panel, r, c }),
  png: (panel) => call('png', { panel }),
  // The figure export as the dialog makes it (options as its fields): resolves to the PNG Blob.
  async figure({ panel = 'image', width = 1200, title, metadata = true } = {}) {
    if (!current) throw new Error('no acquisition is open');
    $('figure-panel').value = panel;
    $('figure-width').value = width;
    $('figure-title').value = title ?? figureTitle(panel);
    $('figure-meta').checked = metadata;
    return saveFigure();
  },
  lastFigure: () => lastFigure,
};

(async function main() {
  startWorker();
  bindControls();
  syncEnabled();
  buildGeometry($('geometry'), geometryContext);
  syncGeometry(geometryContext());
  await workerReady;
  if (adapterInfo && !adapterInfo.error) {
    await attachCanvases();
    buildDisplayControls();
  }
  fitFrames();
  window.dispatchEvent(new Event('stem4d-ready'));
  window.stem4dReady = true;
})();
