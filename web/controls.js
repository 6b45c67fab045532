// The header's and panels' controls, dialogs, drag and drop and resizing, bound once.
import { $, PANELS, S, state } from './state.js';
import { clearError, clearNotice, hideProgress, showError, showNotice } from './messages.js';
import { restartWorker } from './canvases.js';
import { cancelWork } from './worker_client.js';
import { droppedFiles, filesKey, openChosen, openFromUi, pickPlan, reapplySettings } from './open.js';
import { showEmpty } from './acquisition_view.js';
import { setPreset } from './detector.js';
import { requestRender } from './render.js';
import { fitFrames } from './view_geometry.js';
import { drawOverlays } from './overlays.js';
import { onKey } from './keyboard.js';
import { bindExports } from './export_files.js';
import { findRotation } from './dpc_rotation.js';
import { clearLine, toggleLineMode } from './line_profile.js';
import { closeCompare } from './compare.js';

// Files chosen or dropped: a prepared file among them opens with the settings it was saved
// with (bin, bad-pixel masking); re-reads with changed settings do not ask so.
const CHOSEN = { savedSettings: true };

export function bindControls() {
  const pick = (input) => {
    input.addEventListener('change', () => {
      // The input's FileList is live: clearing the input (so the same files can be chosen
      // again) empties it, so it is copied first.
      const files = Array.from(input.files || []);
      input.value = '';
      if (files.length) { clearNotice(); openChosen(files, CHOSEN); }
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
  $('find-rotation').onclick = () => findRotation();
  $('line-image').onclick = () => toggleLineMode('image');
  $('line-pattern').onclick = () => toggleLineMode('pattern');
  $('profile-close').onclick = () => clearLine();
  $('pattern-source').onchange = (e) => { S.pattern.source = e.target.value; requestRender(); };
  for (const id of ['scan-rows', 'scan-cols']) {
    $(id).addEventListener('input', () => { state.scanShapeFor = state.lastScanShapeError && state.lastFiles ? filesKey(state.lastFiles) : null; });
    $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter' && state.lastScanShapeError && state.lastFiles) openFromUi(state.lastFiles); });
  }
  $('bin').onchange = (e) => reapplySettings(`detector bin ${e.target.value}`);
  $('memory-budget').onchange = (e) => reapplySettings(e.target.value ? `GPU memory ${e.target.selectedOptions[0].textContent}` : 'all the GPU memory');
  $('bad-pixels').onchange = (e) => reapplySettings(e.target.checked ? 'bad-pixel masking on' : 'bad-pixel masking off');
  $('crop').onchange = (e) => reapplySettings(e.target.value.trim() ? `scan crop ${e.target.value.trim()}` : 'scan crop removed');
  const roiButton = (mode, id, other) => {
    $(id).onclick = () => {
      state.roiMode = state.roiMode === mode ? false : mode;
      $(id).classList.toggle('active', state.roiMode === mode);
      $(other).classList.remove('active');
    };
  };
  roiButton('rect', 'roi-draw', 'roi-circle');
  roiButton('circle', 'roi-circle', 'roi-draw');
  $('roi-clear').onclick = () => { S.image.roi = null; S.image.roiCircle = null; requestRender(); };
  $('cancel').onclick = async () => {
    // Outside a load, a streamed product's pass is running, or a prepared file is being
    // saved: stop it and keep the acquisition.
    if (!state.loading) { state.savingCancelled = true; cancelWork(); return; }
    const what = state.loading ? state.loading.what : 'the acquisition';
    hideProgress();
    state.loading = null;
    document.body.classList.remove('loading');
    await restartWorker();
    showEmpty();
    showError(`Loading ${what} was cancelled. Nothing is open now; open or drop files to go on.`, true);
  };
  $('profile').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-plan]');
    if (b) pickPlan(b.dataset.plan);
  });
  $('error-close').onclick = clearError;
  $('notice-close').onclick = clearNotice;
  $('recover').onclick = async () => {
    clearError();
    if (/lost/i.test($('error-text').textContent)) await restartWorker();
    openFromUi(state.lastFiles, { ...state.lastOptions, scanShape: undefined });
  };
  bindExports();
  $('shortcuts-button').onclick = () => $('shortcuts').showModal();
  document.addEventListener('keydown', onKey);
  // Drag and drop, folders included.
  document.addEventListener('dragover', (e) => { e.preventDefault(); document.body.classList.add('dragging'); });
  document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
  document.addEventListener('drop', async (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    const files = await droppedFiles(e.dataTransfer);
    if (files.length) openChosen(files, CHOSEN);
  });
  const resized = () => { fitFrames(); if (state.current) requestRender(); else drawOverlays(); };
  for (const panel of PANELS) new ResizeObserver(resized).observe($(panel + '-canvas').parentElement.parentElement);
  new ResizeObserver(resized).observe($('compare-grid'));
  $('compare-close').onclick = () => closeCompare();
}
