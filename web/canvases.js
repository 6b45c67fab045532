// The panels' canvases handed to the Worker, and how frames reach the screen on them (the
// WebGPU canvas or the 2D one); restarting the Worker hands it fresh ones.
import { $, PANELS, freshRenderState, state } from './state.js';
import { call, startWorker, stopWorker } from './worker_client.js';
import { showError } from './messages.js';
import { canvasSizes } from './view_geometry.js';
import { bindPanelEvents } from './gestures.js';

// A transferred canvas cannot be transferred again: a new Worker gets fresh elements. Each
// panel has a WebGPU canvas and a 2D one; which shows the frames is measured here
// (calibratePresent: display/present.rs says why) unless the URL asks (?present=surface|readback).
export async function attachCanvases() {
  for (const panel of PANELS) {
    const old = $(panel + '-canvas');
    const fresh = old.cloneNode(false);
    old.replaceWith(fresh);
    bindPanelEvents(panel, fresh);
    const oldPlain = $(panel + '-plain');
    const plain = oldPlain.cloneNode(false);
    oldPlain.replaceWith(plain);
    const off = fresh.transferControlToOffscreen(), offPlain = plain.transferControlToOffscreen();
    await call('attach', { panel, canvas: off, plain: offPlain }, [off, offPlain]);
  }
  try {
    state.presentInfo = await call('calibratePresent', { sizes: canvasSizes() });
  } catch (e) {
    // The WebGPU canvases still work (the Worker keeps presenting them): the page says why.
    state.presentInfo = { mode: 'surface', chosen: 'default', error: e.message };
    showError('Frames are presented the default way: ' + e.message);
  }
  const asked = new URLSearchParams(location.search).get('present');
  if (asked) {
    try {
      state.presentInfo = await call('setPresent', { mode: asked });
    } catch (e) {
      showError(`The page address's present=${asked} is refused (${e.message}); frames are presented the ${state.presentInfo.mode} way`);
    }
  }
  showPresent();
  // The staging ring of file uploads is made while the page waits for files, not in the
  // first load. Not awaited: an open made meanwhile queues behind it in the Worker.
  call('prepareUploads').catch(() => {});
}

// The canvas of each panel that frames are presented on is shown; the other is transparent.
export function showPresent() {
  const readback = state.presentInfo && state.presentInfo.mode === 'readback';
  for (const panel of PANELS) {
    $(panel + '-canvas').classList.toggle('unused', readback);
    $(panel + '-plain').classList.toggle('unused', !readback);
  }
}

// The load profile with how this page presents its frames.
export const withPresent = (profile) => ({ ...profile, present: state.presentInfo });

export async function restartWorker() {
  stopWorker('the viewer was restarted');
  state.renderState = freshRenderState();
  startWorker();
  await state.workerReady;
  if (state.adapterInfo && !state.adapterInfo.error) await attachCanvases();
}
