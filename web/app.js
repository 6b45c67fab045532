// The page: panels, controls and the `window.stem4d` automation API. All science runs in the
// Worker's wasm engine; this file only turns user gestures into view states and requests.

const $ = (id) => document.getElementById(id);
const DIVERGING = new Set(['dpc', 'idpc']);

let worker = null;
let nextId = 1;
const pending = new Map();
let adapterInfo = null;
// How frames reach the screen: {mode: 'surface'|'readback', chosen, surface_ms, readback_ms}.
let presentInfo = null;
let colormaps = null;
let workerReady = null;
let current = null; // {info, profile, bfFit, files, options}
let lastFiles = null;
let lastOptions = {};
// At most one render in flight (requestRender); a new Worker starts from a fresh one.
const freshRenderState = () => ({ inflight: false, dirty: false, lastMs: null, lastDrawn: null, lastGpu: null, lastError: null, waiters: [] });
let renderState = freshRenderState();
let statsTimer = null;
// Renders finished; with the calls made (the ids handed out) benchmarks check that an idle
// page asks nothing of the engine (stem4d.activity()).
let rendersDone = 0;

const S = {
  image: {
    kind: 'bf', axis: 0, center: [0, 0], radius: 1, inner: null, outer: null, rect: null, point: null,
    rotation: 0, flip: false, cursor: [0, 0], roi: null, roiCircle: null,
    display: { cmap: 'inferno', log: false, limits: { mode: 'percentile', lo: 0.5, hi: 99.5 }, zoom: 1, pan: null },
  },
  pattern: {
    source: 'cursor',
    display: { cmap: 'inferno', log: true, limits: { mode: 'percentile', lo: 0.5, hi: 99.9 }, zoom: 1, pan: null },
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
  for (const panel of ['image', 'pattern']) {
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
  for (const panel of ['image', 'pattern']) {
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
  const retry = recoverable || /lost|scan-shape|scan shape|out of GPU memory|does not fit|bin the detector/i.test(text);
  $('recover').hidden = !(retry && lastFiles);
  $('recover').textContent = /lost/i.test(text) ? 'Recover' : 'Open again';
  if (/scan-shape|scan shape/i.test(text)) $('scan-rows').focus();
  if (/scan crop/i.test(text)) $('crop').focus();
}
function clearError() { $('error').hidden = true; }

function showProgress(stage, done, total) {
  $('progress').hidden = false;
  const frac = total > 0 ? done / total : 0;
  $('progress-fill').style.width = (100 * frac).toFixed(1) + '%';
  const bytes = current && current.logical ? ' · ' + fmtBytes(frac * current.logical) + ' of ' + fmtBytes(current.logical) : '';
  $('progress-text').textContent = `${stage}: ${done} / ${total} frames${bytes}`;
}
function fmtBytes(b) {
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (b >= 1000 && i < u.length - 1) { b /= 1000; i++; }
  return b.toFixed(i ? 2 : 0) + ' ' + u[i];
}

// ---------------------------------------------------------------- opening
function readOptions() {
  const o = {};
  const r = parseInt($('scan-rows').value, 10), c = parseInt($('scan-cols').value, 10);
  if (r > 0 && c > 0) o.scanShape = [r, c];
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

// Open from the page's controls: a malformed option is shown on the page, not thrown.
function openFromUi(files, base = {}) {
  let opts;
  try { opts = { ...base, ...readOptions() }; } catch (e) { showError(e.message); return; }
  openFiles(files, opts).catch(() => {});
}

async function openFiles(files, options = {}) {
  await workerReady;
  if (adapterInfo && adapterInfo.error) throw new Error('WebGPU is not available: ' + adapterInfo.error);
  files = Array.from(files);
  if (!files.length && !options.synthetic) throw new Error('no files given');
  lastFiles = files;
  lastOptions = options;
  clearError();
  current = { logical: 0 };
  $('progress').hidden = false;
  showProgress('reading metadata', 0, 0);
  let r;
  try {
    r = await call('open', { files, options });
  } catch (e) {
    $('progress').hidden = true;
    showError(e.message);
    throw e;
  }
  $('progress').hidden = true;
  current = { ...r, files, options, logical: r.info.logical_bytes };
  applyDefaults(r);
  $('profile').textContent = JSON.stringify(withPresent(r.profile), null, 1);
  $('drop-hint').textContent = r.info.files.map((f) => f.name).join(', ') + ' — ' + r.info.shape.join(' × ') + ' ' + r.info.dtype;
  await renderNow();
  // The totals, CoM moments and ring sums follow the first image; the profile shown then
  // has their times. Calls made meanwhile queue behind them in the Worker.
  const opened = current;
  call('prepare').then(() => call('profile')).then((p) => {
    if (current !== opened) return;
    current.profile = p;
    $('profile').textContent = JSON.stringify(withPresent(p), null, 1);
  }).catch((e) => { if (current === opened) showError(e.message); });
  return r.info;
}

function detShape() {
  const [, , kr, kc] = current.info.shape;
  const b = current.profile.bin || 1;
  return [Math.ceil(kr / b), Math.ceil(kc / b)];
}

function applyDefaults(r) {
  const [rows, cols] = r.info.shape;
  const [kr, kc] = detShape();
  let [fr, fc, rad] = r.bfFit;
  if (!(rad > 0)) { fr = (kr - 1) / 2; fc = (kc - 1) / 2; rad = Math.min(kr, kc) / 6; }
  S.image.center = [round2(fr), round2(fc)];
  S.image.radius = round2(rad);
  S.image.cursor = [Math.floor(rows / 2), Math.floor(cols / 2)];
  S.image.roi = null;
  S.image.roiCircle = null;
  S.image.display.zoom = 1; S.image.display.pan = null;
  S.pattern.display.zoom = 1; S.pattern.display.pan = null;
  setPreset(preset);
}
const round2 = (x) => Math.round(x * 100) / 100;

// Presets from the fitted BF disk (radius r): BF r, ABF r/2..r, ADF 1.2r..2.5r, HAADF 3r..edge.
function setPreset(p) {
  preset = p;
  $('image-kind').value = p;
  const im = S.image;
  const r = im.radius > 0 ? im.radius : 1;
  const edge = current ? Math.max(...detShape()) : 4 * r;
  const annulus = (a, b) => { im.kind = 'adf'; im.inner = round2(a); im.outer = round2(Math.max(b, a + 1)); };
  switch (p) {
    case 'bf': case 'disk': im.kind = 'bf'; break;
    case 'abf': annulus(r / 2, r); break;
    case 'adf': annulus(1.2 * r, 2.5 * r); break;
    case 'haadf': annulus(Math.min(3 * r, edge / 2 - 1), edge); break;
    case 'annulus': annulus(im.inner ?? r, im.outer ?? 2 * r); break;
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
    case 'dpc0': case 'dpc1': im.kind = 'dpc'; im.axis = +p.slice(3); break;
    case 'idpc': im.kind = 'idpc'; break;
  }
  const d = S.image.display;
  if (DIVERGING.has(im.kind)) { d.cmap = 'RdBu_r'; d.limits = { mode: 'symmetric', lo: 0.5, hi: 99.5 }; }
  else if (d.limits.mode === 'symmetric') { d.cmap = 'inferno'; d.limits = { mode: 'percentile', lo: 0.5, hi: 99.5 }; }
  syncDisplayControls();
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
// Deep-merge a view patch (`stem4d.setView`) into the UI state.
function applyPatch(patch) {
  if (patch.preset) setPreset(patch.preset);
  for (const k of ['image', 'pattern']) {
    if (!patch[k]) continue;
    const { display, ...rest } = patch[k];
    Object.assign(S[k], rest);
    if (display) Object.assign(S[k].display, display);
  }
  syncDisplayControls();
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

// At most one render in flight; gestures in between collapse into the next one.
function requestRender() {
  if (!current) return;
  drawOverlays();
  if (renderState.inflight) { renderState.dirty = true; return; }
  renderState.inflight = true;
  renderState.dirty = false;
  call('render', { state: viewState(), sizes: canvasSizes() }).then((r) => {
    renderState.lastMs = r.ms;
    renderState.lastDrawn = r.drawn;
    renderState.lastGpu = r.gpu;
    renderState.lastError = null;
    rendersDone++;
    clearError();
  }).catch((e) => { renderState.lastError = e; showError(e.message); }).finally(() => {
    renderState.inflight = false;
    if (renderState.dirty) requestRender();
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
  if (!current) return Promise.resolve();
  return new Promise((resolve, reject) => { renderState.waiters.push({ resolve, reject }); requestRender(); });
}

const lastStats = {};
async function refreshStats() {
  if (!current || renderState.inflight) return;
  for (const panel of ['image', 'pattern']) {
    try {
      lastStats[panel] = await call('stats', { panel });
      drawHistogram(panel);
    } catch (e) { /* a newer render supersedes */ }
  }
}

function drawHistogram(panel) {
  const st = lastStats[panel];
  const box = document.querySelector(`.display[data-panel=${panel}]`);
  const hist = box.querySelector('canvas.hist'), cbar = box.querySelector('canvas.cbar');
  if (!st || !hist) return;
  const g = hist.getContext('2d');
  hist.width = 256; hist.height = 40;
  g.clearRect(0, 0, 256, 40);
  const max = Math.max(1, ...st.hist.map((h) => Math.log1p(h)));
  const span = st.max - st.min || 1;
  g.fillStyle = '#a1a1aa';
  st.hist.forEach((h, i) => { const y = 40 * Math.log1p(h) / max; g.fillRect(i, 40 - y, 1, y); });
  g.fillStyle = '#22d3ee';
  for (const v of [st.lo, st.hi]) g.fillRect(Math.round(256 * (v - st.min) / span), 0, 1, 40);
  const d = S[panel].display;
  const t = colormaps.tables[colormaps.names.indexOf(d.cmap)];
  cbar.width = 256; cbar.height = 12;
  const c = cbar.getContext('2d');
  t.forEach(([r, gg, b], i) => { c.fillStyle = `rgb(${r},${gg},${b})`; c.fillRect(i, 0, 1, 12); });
  box.querySelector('.range').textContent = `${fmtNum(st.lo)} … ${fmtNum(st.hi)}${d.log ? ' (log10)' : ''}`;
}
const fmtNum = (v) => (Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0)) ? v.toExponential(3) : (+v.toPrecision(5)).toString();

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
  const fit = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  return { r: (y - ch / 2) / fit + pr, c: (x - cw / 2) / fit + pc, fit, h, w };
}

function bindPanelEvents(panel, el) {
  let drag = null;
  el.addEventListener('contextmenu', (e) => e.preventDefault());
  el.addEventListener('wheel', (e) => {
    e.preventDefault();
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
    if (!current) return;
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
  const d = Math.hypot(p[0] - im.center[0], p[1] - im.center[1]);
  if (im.kind === 'adf') {
    if (Math.abs(d - im.inner) < tol) return { mode: 'inner' };
    if (Math.abs(d - im.outer) < tol) return { mode: 'outer' };
  } else if (['bf', 'df'].includes(im.kind) && Math.abs(d - im.radius) < tol) return { mode: 'radius' };
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
    out.textContent = `(${r}, ${c}) = ${fmtNum(v)}${calibText(panel, r, c)}`;
  } catch (e) { out.textContent = ''; } finally { hoverBusy = false; }
}
function calibText(panel, r, c) {
  const cal = current.info.calibration || {};
  const step = panel === 'image' ? cal.scan_step : cal.detector_step && cal.detector_step * (current.profile.bin || 1);
  const units = panel === 'image' ? cal.scan_units : cal.detector_units;
  return step ? `  [${fmtNum(r * step)}, ${fmtNum(c * step)}] ${units || ''}` : '';
}

// A panel's source coordinates (pixel (i, j) covers [i, i+1) × [j, j+1)) on its canvas, as
// wgsl/display.wgsl maps them; drawing is clipped to the plane.
function canvasMap(g, panel, cw, ch) {
  const [h, w] = planeSize(panel);
  const d = S[panel].display;
  const fit = Math.min(cw / w, ch / h) * d.zoom;
  const [pr, pc] = d.pan ?? [h / 2, w / 2];
  const X = (c) => (c - pc) * fit + cw / 2, Y = (r) => (r - pr) * fit + ch / 2;
  g.beginPath(); g.rect(X(0), Y(0), w * fit, h * fit); g.clip();
  return { h, w, fit, X, Y };
}

// The cursor on the image overlay, as display.wgsl draws it with its `cursor_on`: the
// pixel's outline and a cross through its centre, beyond 1.5 pixels from it, in the plane.
function drawCursor(g, cw, ch) {
  const px = (v) => Math.floor(v) + 0.5;  // a 1-pixel line on a pixel, not across two
  const [r, c] = S.image.cursor;
  g.save();
  const { h, w, fit, X, Y } = canvasMap(g, 'image', cw, ch);
  g.strokeStyle = 'rgb(26, 230, 255)'; g.lineWidth = 1;
  g.beginPath();
  const xc = px(X(c + 0.5)), yc = px(Y(r + 0.5)), gap = 1.5 * fit;
  g.moveTo(X(0), yc); g.lineTo(xc - gap, yc); g.moveTo(xc + gap, yc); g.lineTo(X(w), yc);
  g.moveTo(xc, Y(0)); g.lineTo(xc, yc - gap); g.moveTo(xc, yc + gap); g.lineTo(xc, Y(h));
  g.stroke();
  // The outline straddles the pixel's edges, a device pixel each side.
  g.lineWidth = 2;
  g.strokeRect(Math.round(X(c)), Math.round(Y(r)), Math.round(fit), Math.round(fit));
  g.restore();
}

// The detector's outline on the pattern, where wgsl/display.wgsl would draw it (masks
// measure from pixel centres, a rectangle is half-open), a device pixel each side of it.
// Drawn here, dragging the detector presents the image canvas alone.
function drawDetector(g, cw, ch) {
  const im = S.image;
  g.save();
  const { fit, X, Y } = canvasMap(g, 'pattern', cw, ch);
  g.strokeStyle = 'rgb(0, 255, 153)'; g.lineWidth = 2;
  g.beginPath();
  const ring = (radius) => {
    const [r, c] = im.center;
    g.moveTo(X(c + 0.5) + radius * fit, Y(r + 0.5));
    g.arc(X(c + 0.5), Y(r + 0.5), Math.max(0, radius * fit), 0, 2 * Math.PI);
  };
  if ((im.kind === 'bf' || im.kind === 'df') && im.center && im.radius != null) ring(im.radius);
  else if (im.kind === 'adf' && im.center && im.inner != null && im.outer != null) { ring(im.inner); ring(im.outer); }
  else if (im.kind === 'rect' && im.rect) {
    const [r0, r1, c0, c1] = im.rect;
    g.rect(X(c0), Y(r0), (c1 - c0) * fit, (r1 - r0) * fit);
  } else if (im.kind === 'point' && im.point) {
    const [r, c] = im.point;
    const [x, y] = [X(c + 0.5), Y(r + 0.5)], arm = 2.5 * fit;
    g.moveTo(x - arm, y); g.lineTo(x + arm, y); g.moveTo(x, y - arm); g.lineTo(x, y + arm);
  }
  g.stroke();
  g.restore();
}

// The cursor, the detector and scale bars from calibration, drawn over the GPU canvases.
function drawOverlays() {
  for (const panel of ['image', 'pattern']) {
    const el = $(panel + '-overlay');
    const [cw, ch] = canvasSize(panel);
    el.width = cw; el.height = ch;
    const g = el.getContext('2d');
    g.clearRect(0, 0, cw, ch);
    if (!current) continue;
    if (panel === 'image') drawCursor(g, cw, ch);
    else drawDetector(g, cw, ch);
    const cal = current.info.calibration || {};
    const step = panel === 'image' ? cal.scan_step : cal.detector_step && cal.detector_step * (current.profile.bin || 1);
    const units = panel === 'image' ? cal.scan_units : cal.detector_units;
    if (!step) continue;
    const [h, w] = planeSize(panel);
    const fit = Math.min(cw / w, ch / h) * S[panel].display.zoom;
    const target = (cw / 5) / fit * step;
    const mag = Math.pow(10, Math.floor(Math.log10(target)));
    const nice = [1, 2, 5, 10].map((k) => k * mag).filter((v) => v <= target).pop() || mag;
    const px = nice / step * fit;
    g.fillStyle = 'white'; g.strokeStyle = 'black';
    g.fillRect(cw - px - 16, ch - 20, px, 5);
    g.font = `${12 * (window.devicePixelRatio || 1)}px sans-serif`;
    g.fillText(`${fmtNum(nice)} ${units || ''}`, cw - px - 16, ch - 26);
  }
}

// ---------------------------------------------------------------- controls
let roiMode = false;
function buildDisplayControls() {
  for (const box of document.querySelectorAll('.display')) {
    const panel = box.dataset.panel;
    box.innerHTML = `
      <select class="cmap">${colormaps.names.map((n) => `<option>${n}</option>`).join('')}</select>
      <label><input type="checkbox" class="log"> log</label>
      <select class="mode"><option value="percentile">percentile</option><option value="absolute">absolute</option><option value="symmetric">symmetric ±</option></select>
      <input class="lo" type="number" step="any" size="6"> <input class="hi" type="number" step="any" size="6">
      <canvas class="hist"></canvas><canvas class="cbar"></canvas><span class="range muted"></span>`;
    const d = () => S[panel].display;
    box.querySelector('.cmap').onchange = (e) => { d().cmap = e.target.value; requestRender(); };
    box.querySelector('.log').onchange = (e) => { d().log = e.target.checked; requestRender(); };
    box.querySelector('.mode').onchange = (e) => {
      const mode = e.target.value;
      const st = lastStats[panel];
      d().limits = mode === 'absolute' && st ? { mode, lo: st.lo, hi: st.hi } : { mode, lo: 0.5, hi: 99.5 };
      syncDisplayControls(); requestRender();
    };
    for (const k of ['lo', 'hi']) {
      box.querySelector('.' + k).onchange = (e) => {
        const v = parseFloat(e.target.value);
        if (Number.isFinite(v)) { d().limits[k] = v; requestRender(); }
      };
    }
  }
  syncDisplayControls();
}
function syncDisplayControls() {
  for (const box of document.querySelectorAll('.display')) {
    const d = S[box.dataset.panel].display;
    if (!box.querySelector('.cmap')) continue;
    box.querySelector('.cmap').value = d.cmap;
    box.querySelector('.log').checked = d.log;
    box.querySelector('.mode').value = d.limits.mode;
    box.querySelector('.lo').value = d.limits.lo;
    box.querySelector('.hi').value = d.limits.hi;
  }
  $('rotation').value = S.image.rotation;
  $('flip').checked = S.image.flip;
  $('pattern-source').value = S.pattern.source;
}

function download(name, bytes, type) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  const a = document.createElement('a');
  a.href = url; a.download = name; a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
const baseName = () => (current && current.info.files.length ? current.info.files[0].name.replace(/\.[^.]*$/, '') : 'stem4d');

function bindControls() {
  const pick = (input) => input.addEventListener('change', () => {
    if (input.files.length) openFromUi(input.files);
    input.value = '';
  });
  pick($('file-input'));
  pick($('folder-input'));
  $('image-kind').onchange = (e) => { setPreset(e.target.value); requestRender(); };
  $('rotation').onchange = (e) => { const v = parseFloat(e.target.value); if (Number.isFinite(v)) { S.image.rotation = v; requestRender(); } };
  $('flip').onchange = (e) => { S.image.flip = e.target.checked; requestRender(); };
  $('pattern-source').onchange = (e) => { S.pattern.source = e.target.value; requestRender(); };
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
    $('progress').hidden = true;
    await restartWorker();
    current = null;
    showError('Loading was cancelled.', true);
  };
  $('error-close').onclick = clearError;
  $('recover').onclick = async () => {
    clearError();
    if (/lost/i.test($('error-text').textContent)) await restartWorker();
    openFromUi(lastFiles, lastOptions);
  };
  $('export-image-png').onclick = async () => download(baseName() + '-image.png', await call('png', { panel: 'image' }), 'image/png');
  $('export-pattern-png').onclick = async () => download(baseName() + '-pattern.png', await call('png', { panel: 'pattern' }), 'image/png');
  $('export-npy').onclick = async () => {
    try { download(`${baseName()}-${S.image.kind}.npy`, await call('npy'), 'application/octet-stream'); } catch (e) { showError(e.message); }
  };
  $('save-state').onclick = () => {
    if (!current) return;
    const state = { stem4d_view: 1, files: current.info.files.map((f) => f.name), source_sha256: current.info.source_sha256,
      options: current.options, preset, view: S };
    download(baseName() + '-view.json', JSON.stringify(state, null, 1), 'application/json');
  };
  $('load-state').addEventListener('change', async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (f) { try { restoreView(JSON.parse(await f.text())); } catch (err) { showError('Cannot load the view file ' + f.name + ': ' + err.message); } }
  });
  document.addEventListener('keydown', (e) => {
    if (!current || e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
    const step = e.shiftKey ? 10 : 1;
    const mv = { ArrowUp: [-step, 0], ArrowDown: [step, 0], ArrowLeft: [0, -step], ArrowRight: [0, step] }[e.key];
    if (!mv) return;
    e.preventDefault();
    const [rows, cols] = planeSize('image');
    S.image.cursor = [clampI(S.image.cursor[0] + mv[0], 0, rows - 1), clampI(S.image.cursor[1] + mv[1], 0, cols - 1)];
    requestRender();
  });
  // Drag and drop, folders included.
  document.addEventListener('dragover', (e) => { e.preventDefault(); document.body.classList.add('dragging'); });
  document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
  document.addEventListener('drop', async (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    const files = await droppedFiles(e.dataTransfer);
    if (files.length) openFromUi(files);
  });
  new ResizeObserver(() => requestRender()).observe($('image-canvas').parentElement);
}

function restoreView(state) {
  if (state.stem4d_view !== 1 || !state.view) throw new Error('not a stem4d view file');
  if (!current) throw new Error('open the acquisition first');
  if (state.source_sha256 !== current.info.source_sha256) {
    throw new Error(`it was saved for ${state.files.join(', ')}, not the files open now`);
  }
  Object.assign(S.image, state.view.image);
  Object.assign(S.pattern, state.view.pattern);
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
};

(async function main() {
  startWorker();
  bindControls();
  await workerReady;
  if (adapterInfo && !adapterInfo.error) {
    await attachCanvases();
    buildDisplayControls();
  }
  window.dispatchEvent(new Event('stem4d-ready'));
  window.stem4dReady = true;
})();
