// The view as the engine takes it (viewState; patches from stem4d.setView) and the render
// loop: at most one render in flight, then the panels' statistics. It imports detector.js and
// display_controls.js, which import it back: across that cycle names are used only in calls.
import { PANELS, S, lastStats, state } from './state.js';
import { call } from './worker_client.js';
import { showError, showNotice } from './messages.js';
import { geometryContext, setPreset, snapToRings } from './detector.js';
import { canvasSizes } from './view_geometry.js';
import { drawOverlays } from './overlays.js';
import { drawHistogram, syncDisplayControls } from './display_controls.js';
import { syncGeometry } from './geometry.js';
import { refreshComparedReadouts } from './compare.js';

// The panels' statistics are asked for once renders settle (120 ms after the last one).
let statsTimer = null;

// Deep-merge a view patch (`stem4d.setView`) into the UI state. `display.log` (saved views
// and scripts of before `scale`) is taken as the scale it names.
export function applyPatch(patch) {
  if (patch.preset) setPreset(patch.preset);
  for (const k of PANELS) {
    if (!patch[k]) continue;
    const { display, ...rest } = patch[k];
    Object.assign(S[k], rest);
    if (display) mergeDisplay(S[k].display, display);
  }
  syncDisplayControls();
}

export function mergeDisplay(d, patch) {
  const { log, ...rest } = patch;
  Object.assign(d, rest);
  if (log !== undefined && rest.scale === undefined) d.scale = log ? 'log' : (d.scale === 'log' ? 'linear' : d.scale);
}

export function viewState() {
  const im = S.image;
  snapToRings(im);
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

// At most one render in flight; gestures in between collapse into the next one.
export function requestRender() {
  if (!state.current || state.loading) return;
  const drawing = state.current;
  snapToRings(S.image);
  drawOverlays();
  syncGeometry(geometryContext());
  if (state.renderState.inflight) { state.renderState.dirty = true; return; }
  state.renderState.inflight = true;
  state.renderState.dirty = false;
  call('render', { state: viewState(), sizes: canvasSizes() }).then((r) => {
    state.renderState.lastMs = r.ms;
    state.renderState.lastDrawn = r.drawn;
    state.renderState.lastGpu = r.gpu;
    state.renderState.lastError = null;
    state.rendersDone++;
  }).catch((e) => {
    state.renderState.lastError = e;
    // A render of an acquisition that was replaced or failed meanwhile is not this page's error.
    if (state.current !== drawing) return;
    if (/^cancelled while/.test(e.message)) {
      // The view asked for meanwhile is not drawn either: that would start the pass again.
      state.renderState.dirty = false;
      showNotice('The pass over the files was cancelled; the images shown are those before it.');
    } else showError(e.message);
  }).finally(() => {
    state.renderState.inflight = false;
    if (state.renderState.dirty && state.current) requestRender();
    else {
      // Callers awaiting the redraw learn whether the view they asked for was drawn.
      const w = state.renderState.waiters; state.renderState.waiters = [];
      const err = state.renderState.lastError;
      w.forEach(({ resolve, reject }) => (err ? reject(err) : resolve()));
      clearTimeout(statsTimer);
      statsTimer = setTimeout(refreshStats, 120);
    }
    drawOverlays();
  });
}

export function renderNow() {
  if (!state.current || state.loading) return Promise.resolve();
  return new Promise((resolve, reject) => { state.renderState.waiters.push({ resolve, reject }); requestRender(); });
}

async function refreshStats() {
  if (!state.current || state.renderState.inflight) return;
  const opened = state.current;
  for (const panel of PANELS) {
    try {
      const st = await call('stats', { panel });
      if (state.current !== opened) return;
      lastStats[panel] = st;
      drawHistogram(panel);
    } catch (e) { /* a newer render supersedes */ }
  }
  if (state.current === opened) await refreshComparedReadouts();
}
