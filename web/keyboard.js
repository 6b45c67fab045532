// The keyboard: arrows move the scan cursor, letters are the shortcuts of the '?' dialog.
import { $, PANELS, S, interactive } from './state.js';
import { resetToFit, setPreset } from './detector.js';
import { requestRender } from './render.js';
import { clampI, fitFrames, planeSize } from './view_geometry.js';
import { syncDisplayControls } from './display_controls.js';
import { findRotation } from './dpc_rotation.js';

// Keys: arrows move the scan cursor while a panel (or nothing in particular) has focus, never
// while a field or menu has it; letters are the shortcuts listed in the '?' dialog.
export function onKey(e) {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (document.querySelector('dialog[open]')) return;
  const panelOf = (el) => (el && el.closest && el.closest('.panel') ? el.closest('.panel').id.replace('-panel', '') : null);
  const onPanel = t === document.body || (t && t.tagName === 'CANVAS');
  const step = e.shiftKey ? 10 : 1;
  const mv = { ArrowUp: [-step, 0], ArrowDown: [step, 0], ArrowLeft: [0, -step], ArrowRight: [0, step] }[e.key];
  if (mv) {
    if (!onPanel || !interactive()) return;
    e.preventDefault();
    const [rows, cols] = planeSize('image');
    S.image.cursor = [clampI(S.image.cursor[0] + mv[0], 0, rows - 1), clampI(S.image.cursor[1] + mv[1], 0, cols - 1)];
    requestRender();
    return;
  }
  if (t && t.tagName === 'BUTTON' && (e.key === ' ' || e.key === 'Enter')) return;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  const presetKeys = { b: 'bf', a: 'abf', d: 'adf', h: 'haadf', m: 'commag', w: 'comdir' };
  if (key === '?') { e.preventDefault(); $('shortcuts').showModal(); return; }
  if (key === 'o') { e.preventDefault(); $('file-input').click(); return; }
  if (!interactive()) return;
  if (presetKeys[key]) { e.preventDefault(); setPreset(presetKeys[key]); requestRender(); return; }
  if (key === 'l') {
    e.preventDefault();
    const panel = panelOf(t) || 'image';
    const d = S[panel].display;
    d.scale = d.scale === 'log' ? 'linear' : 'log';
    syncDisplayControls(); requestRender();
    return;
  }
  if (key === 'f') {
    e.preventDefault();
    for (const p of PANELS) { S[p].display.zoom = 1; S[p].display.pan = null; }
    fitFrames(); requestRender();
    return;
  }
  if (key === 'r') { e.preventDefault(); resetToFit(); }
  if (key === 't') { e.preventDefault(); findRotation(); }
}
