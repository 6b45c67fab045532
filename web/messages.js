// What the page says above the panels: errors (with Recover / Open again), notices, and the
// progress of a load or of a streamed product's pass over the files.
import { $, state } from './state.js';
import { fmtBytes } from './format.js';

export function showError(text, recoverable = false) {
  $('error-text').textContent = text;
  $('error').hidden = false;
  const retry = recoverable || /lost|scan-shape|scan shape|out of GPU memory|does not fit|bin the detector|cancelled/i.test(text);
  $('recover').hidden = !(retry && state.lastFiles && state.lastFiles.length);
  $('recover').textContent = /lost/i.test(text) ? 'Recover' : 'Open again';
  if (/scan-shape|scan shape/i.test(text)) $('scan-rows').focus();
  else if (/scan crop/i.test(text)) $('crop').focus();
}
export function clearError() { $('error').hidden = true; }

// What happened that is not an error (a setting applied, a cancelled chooser).
export function showNotice(text) {
  $('notice-text').textContent = text;
  $('notice').hidden = false;
}
export function clearNotice() { $('notice').hidden = true; }

const STAGE_NAMES = {
  'read, decode, upload': 'reading, decoding and uploading frames',
};
// What a stage counts (frames unless named here).
const STAGE_UNITS = {
  'streaming the files for a product': 'scan rows',
};

export function showProgress(stage, done, total) {
  $('progress').hidden = false;
  const frac = total > 0 ? done / total : 0;
  $('progress-fill').style.width = (100 * frac).toFixed(1) + '%';
  const logical = state.loading && state.loading.logical;
  const bytes = total > 0 && logical ? ' · ' + fmtBytes(frac * logical) + ' of ' + fmtBytes(logical) : '';
  const count = total > 0 ? `: ${done} / ${total} ${STAGE_UNITS[stage] || 'frames'}` : '…';
  $('progress-text').textContent = `${STAGE_NAMES[stage] || stage}${count}${bytes}`;
  // Cancel stops a load (nothing stays open) or a streamed pass (the acquisition stays).
  $('cancel').title = state.loading ? 'Stop loading (nothing stays open)'
    : 'Stop this pass over the files (the acquisition stays open)';
}
export function hideProgress() { $('progress').hidden = true; }
