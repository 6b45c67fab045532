// `window.stem4d`: the automation API that tests, benchmarks and scripts drive the page with.
import { $, S, state } from './state.js';
import { call, callsMade, cancelWork } from './worker_client.js';
import { showPresent, withPresent } from './canvases.js';
import { openFiles } from './open.js';
import { applyPatch, renderNow, viewState } from './render.js';
import { figureTitle, saveFigure } from './export_files.js';
import { drawOverlays } from './overlays.js';
import { showProfile } from './line_profile.js';
import { closeCompare } from './compare.js';

let lastCompute = null;

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
    if (!state.current) throw new Error('no acquisition is open: call stem4d.open first');
    return call('product', { params: normaliseParams(params) });
  },
  // Several products of one correction, in order: a streamed acquisition computes those
  // its first look does not give in one pass over the files together.
  async products(list) {
    if (!state.current) throw new Error('no acquisition is open: call stem4d.open first');
    return call('products', { params: list.map(normaliseParams) });
  },
  // Stop the requests sent so far (a streamed product's pass over the files) at their next
  // block, as the page's Cancel does outside a load: they fail with "cancelled while …".
  cancel: () => cancelWork(),
  // The parity matrix of the open acquisition (every product on the CPU reference and on
  // this WebGPU adapter, judged by the contract's one judge), as `stem4d parity` prints it.
  async parity({ maskBadPixels = false } = {}) {
    if (!state.current) throw new Error('no acquisition is open: call stem4d.open first');
    return call('parity', { maskBadPixels });
  },
  // The contract's one judge: `got` ({shape, dtype, data}) against `reference` for a product
  // of `kind`, the reference our CPU's (`against: 'cpu'`) or another float64 implementation
  // such as numpy (`'independent'`, the default). Resolves to {pass, maxError, failure}.
  judge: (kind, got, reference, { against = 'independent' } = {}) =>
    call('judge', { kind, got, reference, against }),
  adapter: () => state.adapterInfo,
  // A line profile of a panel's exact values from `from` to `to` ([row, col] pixel indices),
  // drawn and plotted as the "line" tool does: resolves to {distance, values, units}.
  async lineProfile(panel, from, to) {
    if (!state.current) throw new Error('no acquisition is open: call stem4d.open first');
    state.line = { panel, from, to };
    drawOverlays();
    const p = await showProfile(state.line);
    if (!p) throw new Error($('error').hidden ? 'the profile was not taken' : $('error-text').textContent);
    return { distance: p.distance, values: p.values, units: p.units };
  },
  async profile() { return withPresent(await call('profile')); },
  // What the page shows now: the files open (null when empty), whether a load runs, the
  // error and notice on the page, and the fitted BF disk with its warning.
  status: () => ({
    open: state.current ? state.current.info.files.map((f) => f.name) : null,
    loading: state.loading !== null,
    error: $('error').hidden ? null : $('error-text').textContent,
    notice: $('notice').hidden ? null : $('notice-text').textContent,
    fit: state.fit && { ...state.fit, warning: state.current && state.current.bfFitWarning },
    // The compare grid's acquisitions beside the viewed one: the files of each.
    compared: state.compared.map((c) => c.info.files.map((f) => f.name)),
  }),
  // The compare grid's acquisition k (its order in status().compared): the exact value of
  // its image at scan position (r, c), its image statistics (as stats('image')), and its
  // image's exact product as .npy bytes.
  comparedValueAt: (k, r, c) => call('comparedValueAt', { index: k, r, c }),
  comparedStats: (k) => call('comparedStats', { index: k }),
  comparedNpy: (k) => call('comparedNpy', { index: k }),
  closeCompare: () => closeCompare(),
  // How frames reach the screen (see attachCanvases), and a way to choose it: resolves when
  // the view is drawn that way.
  present: () => state.presentInfo && { ...state.presentInfo },
  async setPresent(mode) {
    state.presentInfo = await call('setPresent', { mode });
    showPresent();
    await renderNow();
    return { ...state.presentInfo };
  },
  // UI state for tests and scripts: read, patch (deep-merged) and wait for the redraw.
  view: () => JSON.parse(JSON.stringify({ preset: state.preset, ...S })),
  async setView(patch) {
    applyPatch(patch);
    return renderNow();
  },
  // Benchmarks: apply a patch without drawing; resolves to the ms until the GPU is done.
  async computeView(patch) {
    applyPatch(patch);
    if (state.renderState.inflight) await renderNow();
    lastCompute = await call('compute', { state: viewState() });
    return lastCompute.ms;
  },
  // The last computeView's split: {ms, submit_ms} (ms until the work was submitted), and
  // {gpu} while passes are timed.
  lastCompute: () => lastCompute,
  // Benchmarks: time each GPU pass of what follows (resolves to whether the adapter can).
  timePasses: (on) => call('timePasses', { on }),
  rendered: () => renderNow(),
  lastRenderMs: () => state.renderState.lastMs,
  lastRender: () => ({ ms: state.renderState.lastMs, drawn: state.renderState.lastDrawn, gpu: state.renderState.lastGpu }),
  // Counts so far: {calls} made to the engine, {renders} finished.
  activity: () => ({ calls: callsMade(), renders: state.rendersDone }),
  stats: (panel) => call('stats', { panel }),
  valueAt: (panel, r, c) => call('valueAt', { panel, r, c }),
  png: (panel) => call('png', { panel }),
  // The figure export as the dialog makes it (options as its fields): resolves to the PNG Blob.
  async figure({ panel = 'image', width = 1200, title, metadata = true } = {}) {
    if (!state.current) throw new Error('no acquisition is open');
    $('figure-panel').value = panel;
    $('figure-width').value = width;
    $('figure-title').value = title ?? figureTitle(panel);
    $('figure-meta').checked = metadata;
    return saveFigure();
  },
  lastFigure: () => state.lastFigure,
};
