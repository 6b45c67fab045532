// What leaves the page: PNGs of the panels, the image as .npy, the view as JSON (and loading it
// back), and figures (figure.js composes them).
import { $, S, lastStats, mradPerPx, state, unitsOf } from './state.js';
import { call } from './worker_client.js';
import { showError } from './messages.js';
import { mergeDisplay, renderNow } from './render.js';
import { clampI } from './view_geometry.js';
import { syncDisplayControls } from './display_controls.js';
import { fmtNum, fmtLength, fmtEnergy } from './format.js';
import { composeFigure } from './figure.js';

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
  $('export-tiff').onclick = exporting(async () => download(`${baseName()}-${S.image.kind}.tif`, await call('tiff'), 'image/tiff'));
  $('save-state').onclick = exporting(async () => {
    const saved = { stem4d_view: 1, files: state.current.info.files.map((f) => f.name), source_sha256: state.current.info.source_sha256,
      options: state.current.options, preset: state.preset, view: S };
    download(baseName() + '-view.json', JSON.stringify(saved, null, 1), 'application/json');
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
