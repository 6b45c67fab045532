// Opening an acquisition: the files chosen or dropped, the options of the header (scan shape,
// crop, bin, GPU memory, bad pixels), the open itself and what a failed one leaves.
import { $, state } from './state.js';
import { call } from './worker_client.js';
import { clearError, hideProgress, showError, showNotice, showProgress } from './messages.js';
import { showEmpty, showOpened, showProfile } from './acquisition_view.js';
import { applyDefaults } from './detector.js';
import { renderNow } from './render.js';
import { fmtBytes } from './format.js';
import { allOpenFiles, clearCompared, groupsOf, openCompareSet } from './compare.js';

// A key of the files' names and sizes, and their names as the page lists them.
export const filesKey = (files) => Array.from(files || [], (f) => `${f.name}:${f.size}`).sort().join('|');
const names = (files) => Array.from(files || [], (f) => f.name).join(', ');

// The scan shape typed in the header, if it belongs to `files` (see scanShapeFor). Fields
// typed for other files are cleared, and the page says so.
function scanShapeFieldsFor(files) {
  const r = parseInt($('scan-rows').value, 10), c = parseInt($('scan-cols').value, 10);
  if (!(r > 0 && c > 0)) return null;
  if (state.scanShapeFor !== null && state.scanShapeFor !== filesKey(files)) {
    $('scan-rows').value = ''; $('scan-cols').value = '';
    showNotice(`The scan shape ${r} × ${c} was typed for other files; ${names(files)} open with the shape they store.`);
    state.scanShapeFor = null;
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
  const budget = Number($('memory-budget').value);
  if (budget > 0) o.memoryBudget = budget;
  return o;
}

// Open from the page's controls: a malformed option or a failed open is shown on the page,
// not thrown.
export const openFromUi = (files, base = {}) => withUiOptions(files, base, openFiles);

// Files chosen or dropped (or re-read with a compare grid open): those that hold several
// acquisitions open as a compare grid (compare.js); one acquisition opens as ever.
export const openChosen = (files, base = {}) => withUiOptions(files, base, openGrouped);

// `open(files, options)` with the header's options over `base`; a malformed option or a
// failed open is shown on the page, not thrown.
function withUiOptions(files, base, open) {
  files = Array.from(files || []);
  let opts;
  try { opts = { ...base, ...readOptions(files) }; } catch (e) { showError(e.message); return Promise.resolve(); }
  return open(files, opts).catch(() => {});
}

async function openGrouped(files, opts) {
  if (files.length > 1) {
    // The page is loading from the moment the files are given: no gesture (or script
    // waiting for the load) slips in while they are grouped.
    state.loading = { files, options: opts, logical: 0, what: names(files) };
    let groups = null;
    try {
      await state.workerReady;
      groups = await groupsOf(files);
    } catch (e) {
      groups = null;
    } finally {
      state.loading = null;
    }
    if (groups && groups.acquisitions.length > 1) return openCompareSet(files, groups, opts);
  }
  return openFiles(files, opts);
}

// Open `files`. Until the Worker has read their metadata the acquisition open now stays
// open there (Viewer::open sets it aside only when the new one is about to load): a failed
// open leaves it usable, a failed load leaves an empty page, and either is said.
export async function openFiles(files, options = {}) {
  files = Array.from(files || []);
  try {
    await state.workerReady;
    if (state.adapterInfo && state.adapterInfo.error) throw new Error('WebGPU is not available: ' + state.adapterInfo.error);
    if (!files.length && !options.synthetic) throw new Error('no files given: choose or drop the files of one acquisition');
  } catch (e) {
    showError(e.message);
    throw e;
  }
  state.lastFiles = files;
  state.lastOptions = options;
  clearError();
  const previous = state.current;
  const what = options.synthetic ? `synthetic ${options.synthetic.join('×')}` : names(files);
  state.loading = { files, options, logical: 0, what };
  document.body.classList.add('loading');
  showProgress('reading metadata', 0, 0);
  let r;
  try {
    r = await call('open', { files, options });
  } catch (e) {
    state.loading = null;
    document.body.classList.remove('loading');
    hideProgress();
    state.lastScanShapeError = /scan-shape|scan shape/i.test(e.message);
    await afterFailedOpen(previous, `Opening ${what} failed: ${e.message}`);
    throw e;
  }
  state.lastScanShapeError = false;
  if (options.scanShape) state.scanShapeFor = filesKey(files);
  state.loading.logical = r.info.logical_bytes;
  showProgress('drawing the first image', 0, 0);
  state.current = { ...r, files, options, logical: r.info.logical_bytes };
  state.loading = null;
  if (options.savedSettings && r.info.saved_session) followSavedSettings(r);
  // The Worker let the compare grid go with the acquisition it was opened beside.
  clearCompared();
  applyDefaults(r);
  showOpened();
  // A file given that the acquisition does not read is said, never silently dropped (the
  // CLI refuses it; a folder may hold other files, so the page opens what it can).
  const unused = r.info.unused_files || [];
  if (unused.length) showNotice(`Left out: ${unused.join(', ')}. No link, companion or description in the acquisition names ${unused.length > 1 ? 'them' : 'it'}.`);
  try {
    await renderNow();
  } finally {
    document.body.classList.remove('loading');
    hideProgress();
  }
  // The totals, CoM moments and ring sums follow the first image; the profile shown then
  // has their times. Calls made meanwhile queue behind them in the Worker.
  const opened = state.current;
  call('prepare').then(() => call('profile')).then((p) => {
    if (state.current !== opened) return;
    state.current.profile = p;
    showProfile();
  }).catch((e) => { if (state.current === opened) showError(e.message); });
  return r.info;
}

// A prepared file opened with the settings it was saved with: the header's controls show
// them (later re-reads take them from there), and the page says so.
function followSavedSettings(r) {
  const bin = String(r.profile.bin || 1), masked = !!r.profile.mask_bad_pixels;
  const changed = $('bin').value !== bin || $('bad-pixels').checked !== masked;
  $('bin').value = bin;
  $('bad-pixels').checked = masked;
  if (changed) showNotice(`${r.info.files[0].name} opened with the settings it was saved with: bin ${bin}, bad pixels ${masked ? 'masked' : 'not masked'}.`);
}

// After a failed open: the acquisition open before is still there when the Worker kept it
// (the failure came before the new load began), else the page is empty.
async function afterFailedOpen(previous, message) {
  let kept = false;
  try { kept = previous !== null && await call('isOpen'); } catch (e) { kept = false; }
  if (kept) {
    state.current = previous;
    showError(`${message}. ${names(previous.files) || 'The acquisition'} is still open.`, true);
    await renderNow().catch(() => {});
  } else {
    showEmpty();
    showError(previous ? `${message}. Nothing is open now: the previous acquisition was released when loading began.` : message, true);
  }
}

// Bin, masking or crop changed with an acquisition open: the resident copy is rebuilt from
// the same files, and the page says what that costs.
export function reapplySettings(what) {
  if (!state.current || state.loading || state.current.options.synthetic) return;
  const files = allOpenFiles();
  showNotice(`${what}: re-reading ${names(files)} (${fmtBytes(state.current.info.logical_bytes)}) to rebuild the GPU copy.`);
  (state.compared.length ? openChosen : openFromUi)(files);
}

// A memory plan picked in the load profile: the open acquisition is read again along it.
export function pickPlan(kind) {
  if (!state.current || state.loading || state.current.options.synthetic) return;
  const files = allOpenFiles();
  showNotice(`memory plan ${kind}: re-reading ${names(files)} (${fmtBytes(state.current.info.logical_bytes)}) along it.`);
  (state.compared.length ? openChosen : openFromUi)(files, { memoryPlan: kind });
}

// The files of a drop, with those of dropped folders.
export async function droppedFiles(dt) {
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
