// What leaves the page: PNGs of the panels, the image as .npy, the view as JSON (and loading it
// back), and figures (figure.js composes them).
import { $, S, lastStats, mradPerPx, state, unitsOf } from './state.js';
import { call } from './worker_client.js';
import { hideProgress, showError, showNotice, showProgress } from './messages.js';
import { mergeDisplay, renderNow } from './render.js';
import { clampI } from './view_geometry.js';
import { syncDisplayControls } from './display_controls.js';
import { fmtNum, fmtLength, fmtEnergy } from './format.js';
import { composeFigure } from './figure.js';
import { profileCsv } from './line_profile.js';
import { renderProvenance } from './provenance.js';

// Save bytes (or a Blob) under `name` through the browser's download.
function download(name, bytes, type) {
  const url = URL.createObjectURL(bytes instanceof Blob ? bytes : new Blob([bytes], { type }));
  const a = document.createElement('a');
  a.href = url; a.download = name; a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

const baseName = () => (state.current && state.current.info.files.length ? state.current.info.files[0].name.replace(/\.[^.]*$/, '') : 'stem4d');

// An export's failure is said on the page, never lost.
const exporting = (fn) => async () => {
  if (!state.current) { showError('Nothing to export: open an acquisition first.'); return; }
  try { await fn(); } catch (e) { showError('Export failed: ' + e.message); }
};

// The footer's exports, the figure dialog and the view files.
export function bindExports() {
  $('export-image-png').onclick = exporting(async () => download(baseName() + '-image.png', await call('png', { panel: 'image' }), 'image/png'));
  $('export-pattern-png').onclick = exporting(async () => download(baseName() + '-pattern.png', await call('png', { panel: 'pattern' }), 'image/png'));
  $('export-npy').onclick = exporting(async () => download(`${baseName()}-${S.image.kind}.npy`, await call('npy'), 'application/octet-stream'));
  $('profile-csv').onclick = exporting(async () => {
    if (!state.profile) throw new Error('draw a line first');
    download(`${baseName()}-${state.profile.panel}-profile.csv`, profileCsv(state.profile), 'text/csv');
  });
  $('export-tiff').onclick = exporting(async () => download(`${baseName()}-${S.image.kind}.tif`, await call('tiff'), 'image/tiff'));
  $('save-state').onclick = exporting(async () => download(baseName() + '-view.json', JSON.stringify(viewFile(), null, 1), 'application/json'));
  $('save-report').onclick = exporting(async () => download(baseName() + '-report.html', await reportHtml(), 'text/html'));
  $('save-prepared').onclick = exporting(savePrepared);
  $('export-figure').onclick = exporting(async () => openFigureDialog());
  $('figure-form').addEventListener('submit', (e) => {
    if (e.submitter && e.submitter.value === 'save') { e.preventDefault(); $('figure-dialog').close(); exporting(saveFigure)(); }
  });
  $('load-state').addEventListener('change', async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (f) { try { await restoreView(viewOf(await f.text())); } catch (err) { showError('Cannot load the view file ' + f.name + ': ' + err.message); } }
  });
}

// The open acquisition as a prepared file (decision 0037; the container is docs/PREPARED.md):
// written piece by piece where the browser lets the user pick a file (File System Access),
// else assembled and downloaded. Closing the picker writes nothing.
async function savePrepared() {
  const name = baseName() + '.stem4d';
  let writable = null;
  if (typeof window.showSaveFilePicker === 'function') {
    let handle;
    try {
      handle = await window.showSaveFilePicker({ suggestedName: name,
        types: [{ description: 'stem4d prepared acquisition', accept: { 'application/octet-stream': ['.stem4d'] } }] });
    } catch (e) {
      if (e.name === 'AbortError') return;
      throw e;
    }
    writable = await handle.createWritable();
  }
  const parts = [];
  state.savingCancelled = false;
  try {
    for (let start = true; ; start = false) {
      const p = await call('preparedPiece', { start });
      if (state.savingCancelled) {
        if (writable) await writable.abort().catch(() => {});
        showNotice('Saving the prepared file was cancelled: nothing was written.');
        return;
      }
      showProgress('writing the prepared file', p.done, p.total);
      if (writable) await writable.write({ type: 'write', position: p.at, data: p.bytes });
      else parts.push(p);
      if (p.last) break;
    }
    if (writable) await writable.close();
  } catch (e) {
    if (writable) await writable.abort().catch(() => {});
    throw e;
  } finally {
    hideProgress();
  }
  if (writable) return;
  parts.sort((a, b) => a.at - b.at);
  const pieces = [];
  let at = 0;
  for (const p of parts) {
    if (p.at > at) pieces.push(new Uint8Array(p.at - at));
    pieces.push(p.bytes);
    at = p.at + p.bytes.length;
  }
  download(name, new Blob(pieces), 'application/octet-stream');
}

// What Save view writes and a report embeds: the files (with their hash), how they were
// opened, the preset and the whole view.
function viewFile() {
  return { stem4d_view: 1, files: state.current.info.files.map((f) => f.name), source_sha256: state.current.info.source_sha256,
    options: state.current.options, preset: state.preset, view: S };
}

// The view file in `text`: a view file's JSON, or the one a report embeds.
function viewOf(text) {
  if (!/^\s*</.test(text)) return JSON.parse(text);
  const doc = new DOMParser().parseFromString(text, 'text/html');
  const el = doc.getElementById('stem4d-view');
  if (!el) throw new Error('not a stem4d report (it embeds no view)');
  return JSON.parse(el.textContent);
}

const escapeHtml = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const dataUrl = (bytes) => new Promise((resolve) => {
  const r = new FileReader();
  r.onload = () => resolve(r.result);
  r.readAsDataURL(new Blob([bytes], { type: 'image/png' }));
});

// A report of the view as one HTML file: both panels as shown, what each shows (detector
// geometry, pattern source), their display settings, the provenance panel's tables, and
// the view file embedded so that Load view… restores the view exactly.
async function reportHtml() {
  const info = state.current.info;
  const panels = [];
  for (const panel of ['image', 'pattern']) {
    const d = S[panel].display;
    const st = lastStats[panel] || await call('stats', { panel });
    const lim = d.limits.mode === 'absolute' ? `${fmtNum(d.limits.lo)} … ${fmtNum(d.limits.hi)}`
      : d.limits.mode === 'symmetric' ? `± ${fmtNum(d.limits.hi)} %` : `${fmtNum(d.limits.lo)} % … ${fmtNum(d.limits.hi)} %`;
    const rows = [...figureMetadata(panel).slice(2),
      `display: ${d.cmap}, ${d.scale} scale, limits ${d.limits.mode} ${lim} (${fmtNum(st.lo)} … ${fmtNum(st.hi)} ${unitsOf(panel)}), zoom ${fmtNum(d.zoom)}`];
    panels.push(`<section><h2>${escapeHtml(figureTitle(panel))}</h2><img alt="${panel}" src="${await dataUrl(await call('png', { panel }))}">`
      + `<ul>${rows.map((r) => `<li>${escapeHtml(r)}</li>`).join('')}</ul></section>`);
  }
  const prov = document.createElement('div');
  renderProvenance(prov, state.current.profile, info, state.current.bfFitWarning);
  const embedded = JSON.stringify(viewFile()).replace(/</g, '\\u003c');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(baseName())} — stem4d report</title>`
    + '<style>body{font:14px sans-serif;margin:24px;max-width:1100px}img{image-rendering:pixelated;width:480px;border:1px solid #888}'
    + 'section{display:inline-block;vertical-align:top;margin-right:24px}table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left}</style></head><body>'
    + `<h1>${escapeHtml(baseName())}</h1><p>${escapeHtml(figureMetadata('image').slice(0, 2).join(' · '))}</p>`
    + `<p>Saved ${escapeHtml(new Date().toISOString())} by stem4d. Open the same files in stem4d and use Load view… on this file to restore the view.</p>`
    + panels.join('') + `<h2>Provenance</h2>${prov.innerHTML}`
    + `<script type="application/json" id="stem4d-view">${embedded}</script></body></html>`;
}

function restoreView(saved) {
  if (saved.stem4d_view !== 1 || !saved.view) throw new Error('not a stem4d view file');
  if (!state.current) throw new Error('open the acquisition first');
  if (saved.source_sha256 !== state.current.info.source_sha256) {
    throw new Error(`it was saved for ${saved.files.join(', ')}, not the files open now`);
  }
  const { display: di, ...image } = saved.view.image;
  const { display: dp, ...pattern } = saved.view.pattern;
  Object.assign(S.image, image);
  Object.assign(S.pattern, pattern);
  if (di) mergeDisplay(S.image.display, di);
  if (dp) mergeDisplay(S.pattern.display, dp);
  state.preset = saved.preset || state.preset;
  $('image-kind').value = state.preset;
  syncDisplayControls();
  return renderNow();
}

export function figureTitle(panel) {
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
  const info = state.current.info, p = state.current.profile, cal = info.calibration || {};
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

export async function saveFigure() {
  const panel = $('figure-panel').value;
  const width = clampI(parseInt($('figure-width').value, 10) || 1200, 200, 8000);
  const png = await call('png', { panel });
  const st = lastStats[panel] || await call('stats', { panel });
  const cal = state.current.info.calibration || {};
  const blob = await composeFigure({
    png, width, title: $('figure-title').value,
    metadata: $('figure-meta').checked ? figureMetadata(panel) : [],
    stats: st, units: unitsOf(panel), scale: S[panel].display.scale,
    table: state.colormaps.tables[Math.max(0, state.colormaps.names.indexOf(S[panel].display.cmap))],
    wheel: panel === 'image' && S.image.kind === 'comdir',
    step: panel === 'image' ? cal.scan_step : mradPerPx(), stepUnits: panel === 'image' ? cal.scan_units : 'mrad',
  });
  state.lastFigure = { width, bytes: blob.size };
  download(`${baseName()}-${panel === 'image' ? S.image.kind : S.pattern.source}-figure.png`, blob, 'image/png');
  return blob;
}
