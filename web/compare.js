// The compare grid: files that hold several acquisitions (chosen, dropped or a folder) open
// together. The first is viewed as ever (image and pattern); each other shows its virtual
// image beside it with the same detector, the same display mapping (kind, scale, limits rule,
// colour map) and the cursor linked at the same scan position. The Worker draws every panel
// of a view in one GPU submission (Viewer::render); an acquisition of another detector shape
// is refused by name.
import { $, S, interactive, state } from './state.js';
import { call } from './worker_client.js';
import { hideProgress, showError, showNotice } from './messages.js';
import { openFiles } from './open.js';
import { renderNow, requestRender } from './render.js';
import { clampI } from './view_geometry.js';
import { fmtNum } from './format.js';

// Panels beside the viewed acquisition: more would be too small to read on a laptop.
export const MAX_COMPARED = 8;

// The acquisitions of `files` as the engine's grouping finds them (formats/grouping.rs):
// {acquisitions: [[index…]…], left_out: [index…]}.
export const groupsOf = (files) => call('groupFiles', { names: files.map((f) => f.name) });

// Open the acquisitions `groups` finds among `files`: the first as the viewed one, the others
// into the grid. One that fails or is refused is said by name; the others stay.
export async function openCompareSet(files, groups, options) {
  const sets = groups.acquisitions.map((g) => g.map((i) => files[i]));
  if (sets.length > MAX_COMPARED + 1) {
    showError(`These files hold ${sets.length} acquisitions; the compare grid shows at most ${MAX_COMPARED + 1}. Choose fewer files or a smaller folder.`);
    return;
  }
  await openFiles(sets[0], options);
  const viewed = state.current;
  const refused = [];
  for (const set of sets.slice(1)) {
    if (state.current !== viewed) return;
    const what = set.map((f) => f.name).join(', ');
    state.loading = { files: set, options, logical: 0, what };
    document.body.classList.add('loading');
    try {
      const r = await call('openCompared', { files: set, options });
      if (state.current !== viewed) return;
      addPanel({ ...r, files: set });
    } catch (e) {
      if (state.current !== viewed) return;
      refused.push(`${set[0].name}: ${e.message}`);
    } finally {
      if (state.loading && state.loading.files === set) {
        state.loading = null;
        document.body.classList.remove('loading');
        hideProgress();
      }
    }
  }
  const left = groups.left_out.map((i) => files[i].name);
  if (refused.length) showError(`Not compared: ${refused.join(' · ')}`);
  if (left.length) showNotice(`Left out: ${left.join(', ')}. No acquisition among the files names ${left.length > 1 ? 'them' : 'it'}.`);
  await renderNow().catch(() => {});
}

// A panel for the compared acquisition `r` ({index, info, files}): its canvases go to the
// Worker, its overlay shows the linked cursor.
function addPanel(r) {
  const k = r.index;
  const fig = document.createElement('figure');
  fig.className = 'compared';
  fig.dataset.index = k;
  const cap = document.createElement('figcaption');
  const name = r.info.files[0] ? r.info.files[0].name : `acquisition ${k + 1}`;
  cap.textContent = `${name} — ${r.info.shape.join(' × ')} ${r.info.dtype}`;
  cap.title = r.info.files.map((f) => f.name).join(', ');
  const stage = document.createElement('div');
  stage.className = 'stage';
  const frame = document.createElement('div');
  frame.className = 'frame';
  const plain = document.createElement('canvas');
  plain.className = 'plain';
  const canvas = document.createElement('canvas');
  canvas.tabIndex = 0;
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `virtual image of ${name}: click or arrow keys move the linked scan cursor`);
  const overlay = document.createElement('canvas');
  overlay.className = 'overlay';
  frame.append(plain, canvas, overlay);
  stage.append(frame);
  const readout = document.createElement('div');
  readout.className = 'readout';
  readout.setAttribute('aria-live', 'polite');
  fig.append(cap, stage, readout);
  $('compare-grid').append(fig);
  state.compared.push({ index: k, info: r.info, profile: r.profile, files: r.files, fig, canvas, overlay, readout });
  document.body.classList.add('comparing');
  $('compare').hidden = false;
  $('compare-title').textContent = `Compared with ${state.current.info.files[0].name}: ${state.compared.length} acquisition${state.compared.length > 1 ? 's' : ''}, one detector, one display mapping, linked cursor`;
  bindComparedEvents(state.compared[state.compared.length - 1]);
  const readback = state.presentInfo && state.presentInfo.mode === 'readback';
  canvas.classList.toggle('unused', readback);
  plain.classList.toggle('unused', !readback);
  const off = canvas.transferControlToOffscreen(), offPlain = plain.transferControlToOffscreen();
  call('attachCompared', { index: k, canvas: off, plain: offPlain }, [off, offPlain]).catch((e) => showError(e.message));
  fitCompared();
}

// The scan position under the pointer on compared panel `c`, in its scan.
function positionAt(c, ev) {
  const rect = c.canvas.getBoundingClientRect();
  const [h, w] = c.info.shape;
  const r = Math.floor((ev.clientY - rect.top) / rect.height * h), col = Math.floor((ev.clientX - rect.left) / rect.width * w);
  return [clampI(r, 0, h - 1), clampI(col, 0, w - 1)];
}

// The compared panel a left drag moves the cursor on, if any: one for the page, so that
// panels closed and opened again leave no listener behind.
let dragging = null;
window.addEventListener('mouseup', () => { dragging = null; });

function bindComparedEvents(c) {
  // The linked cursor: a position here is the same scan position on every panel (the
  // viewed scan's bounds apply to it; each panel clamps it to its own).
  const moveTo = (ev) => {
    const [r, col] = positionAt(c, ev);
    const [rows, cols] = state.current.info.shape;
    const next = [clampI(r, 0, rows - 1), clampI(col, 0, cols - 1)];
    if (next[0] === S.image.cursor[0] && next[1] === S.image.cursor[1]) return;
    S.image.cursor = next;
    requestRender();
  };
  c.canvas.addEventListener('mousedown', (ev) => {
    if (!interactive() || ev.button !== 0) return;
    c.canvas.focus({ preventScroll: true });
    dragging = c;
    moveTo(ev);
  });
  c.canvas.addEventListener('mousemove', (ev) => {
    if (!interactive()) return;
    if (dragging === c) moveTo(ev);
    hoverValue(c, positionAt(c, ev));
  });
  c.canvas.addEventListener('mouseleave', () => { c.readout.textContent = ''; });
}

let hoverBusy = false;
async function hoverValue(c, [r, col]) {
  if (hoverBusy || state.renderState.inflight) return;
  hoverBusy = true;
  try {
    const v = await call('comparedValueAt', { index: c.index, r, c: col });
    c.readout.textContent = `(${r}, ${col}) = ${fmtNum(v)}`;
  } catch (e) { c.readout.textContent = ''; } finally { hoverBusy = false; }
}

// Each compared panel's frame takes its scan's aspect within its stage.
export function fitCompared() {
  for (const c of state.compared) {
    const frame = c.canvas.parentElement, stage = frame.parentElement;
    const W = stage.clientWidth, H = stage.clientHeight;
    const [h, w] = c.info.shape;
    const s = W > 0 && H > 0 ? Math.min(W / w, H / h) : 0;
    frame.style.width = Math.max(1, Math.floor(w * s)) + 'px';
    frame.style.height = Math.max(1, Math.floor(h * s)) + 'px';
  }
}

// The compared panels' canvas sizes, as render takes them ({compared0: [w, h], …}).
export function comparedSizes() {
  const dpr = window.devicePixelRatio || 1;
  const out = {};
  for (const c of state.compared) {
    out['compared' + c.index] = [Math.max(1, Math.round(c.canvas.clientWidth * dpr)), Math.max(1, Math.round(c.canvas.clientHeight * dpr))];
  }
  return out;
}

// The linked cursor on every compared panel, clamped to its scan as the Worker clamps it.
export function drawComparedCursors() {
  const dpr = window.devicePixelRatio || 1;
  for (const c of state.compared) {
    const el = c.overlay;
    const cw = Math.max(1, Math.round(el.clientWidth * dpr)), ch = Math.max(1, Math.round(el.clientHeight * dpr));
    el.width = cw; el.height = ch;
    const g = el.getContext('2d');
    g.clearRect(0, 0, cw, ch);
    const [h, w] = c.info.shape;
    const r = Math.min(S.image.cursor[0], h - 1), col = Math.min(S.image.cursor[1], w - 1);
    const fx = cw / w, fy = ch / h;
    g.strokeStyle = 'rgb(26, 230, 255)';
    g.lineWidth = 2;
    g.strokeRect(Math.round(col * fx), Math.round(r * fy), Math.max(2, Math.round(fx)), Math.max(2, Math.round(fy)));
  }
}

// The exact values at the linked cursor of every compared panel, under each (after renders
// settle, with the viewed panels' statistics).
export async function refreshComparedReadouts() {
  for (const c of state.compared) {
    const [h, w] = c.info.shape;
    const r = Math.min(S.image.cursor[0], h - 1), col = Math.min(S.image.cursor[1], w - 1);
    try {
      const v = await call('comparedValueAt', { index: c.index, r, c: col });
      c.readout.textContent = `cursor (${r}, ${col}) = ${fmtNum(v)}`;
    } catch (e) { /* a newer render supersedes */ }
  }
}

// Close the grid on the page (the Worker lets its sessions go with `closeCompared`, or
// with the viewed acquisition they were opened beside).
export function clearCompared() {
  state.compared = [];
  $('compare-grid').replaceChildren();
  $('compare').hidden = true;
  document.body.classList.remove('comparing');
}

export async function closeCompare() {
  clearCompared();
  await call('closeCompared').catch(() => {});
  if (state.current) requestRender();
}

// Every file open now, the compared acquisitions' with the viewed one's (re-reading them all
// with new settings keeps the grid).
export const allOpenFiles = () => [...(state.current ? state.current.files : []), ...state.compared.flatMap((c) => c.files)];
