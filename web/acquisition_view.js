// What the page shows of the acquisition open now, or of none: the drop hint, the calibration
// line, the load profile, and which controls are enabled.
import { $, PANELS, lastStats, state } from './state.js';
import { withPresent } from './canvases.js';
import { geometryContext } from './detector.js';
import { fitFrames } from './view_geometry.js';
import { drawOverlays } from './overlays.js';
import { clearDisplayBox } from './display_controls.js';
import { fmtNum, fmtLength, fmtEnergy } from './format.js';
import { syncGeometry } from './geometry.js';
import { renderProvenance } from './provenance.js';
import { clearCompared } from './compare.js';

// The empty page: nothing open, no stale image, readouts, limits or exports.
export function showEmpty() {
  state.current = null;
  state.fit = null;
  clearCompared();
  document.body.classList.add('empty');
  $('drop-hint').hidden = false;
  $('drop-hint').textContent = 'Drop an acquisition here (Arina master + data files, EMD, HDF5 stack, EMPAD raw + xml, Merlin mib + hdr), or a folder. Files never leave this computer.';
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

export function showOpened() {
  document.body.classList.remove('empty');
  const info = state.current.info;
  $('drop-hint').textContent = info.files.map((f) => f.name).join(', ') + ' — ' + info.shape.join(' × ') + ' ' + info.dtype
    + (state.current.profile.bin > 1 ? ` (bin ${state.current.profile.bin})` : '') + (state.current.profile.mask_bad_pixels ? ', bad pixels masked' : '');
  showCalibration();
  showProfile();
  fitFrames();
  syncEnabled();
}

export function showProfile() {
  if (!state.current) return;
  renderProvenance($('profile'), withPresent(state.current.profile), state.current.info, state.current.bfFitWarning);
}

// Energy, camera length, pixel sizes, scan step and convergence angle, each with its source.
function showCalibration() {
  const cal = (state.current && state.current.info.calibration) || {};
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

// Controls that need an acquisition are disabled, with the reason, while none is open.
export function syncEnabled() {
  const none = !state.current;
  for (const id of ['export-figure', 'export-image-png', 'export-pattern-png', 'export-npy', 'export-tiff', 'save-state', 'save-report', 'load-state-button', 'roi-draw', 'roi-circle', 'roi-clear', 'find-rotation', 'line-image', 'line-pattern']) {
    const el = $(id);
    el.disabled = none;
    if (none) el.dataset.why = 'open an acquisition first'; else delete el.dataset.why;
  }
}
