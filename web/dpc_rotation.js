// "Find rotation": the scan–detector rotation and flip that make the DPC field curl-free,
// found on the GPU by the engine's `dpc-rotation` product (C-DPC-ROTATION, decision 0033),
// and set on the DPC/iDPC view. The 180° branch is the one whose iDPC phase is bright where
// the ADF image of the annulus below is.
import { $, S, interactive, state } from './state.js';
import { call } from './worker_client.js';
import { setPreset } from './detector.js';
import { requestRender } from './render.js';
import { clearError, showError, showNotice } from './messages.js';
import { syncDisplayControls } from './display_controls.js';
import { fmtNum } from './format.js';
import { round2 } from './view_geometry.js';

// The annulus whose ADF image picks the branch: the one the image shows, else the ADF
// preset of the fitted BF disk (1.2 r … 2.5 r).
export function rotationAnnulus() {
  const im = S.image;
  if (im.kind === 'adf' && im.inner != null && im.outer != null) {
    return { center: im.center.slice(), inner: im.inner, outer: im.outer };
  }
  const f = state.fit || { center: im.center, radius: 1 };
  const r = f.radius > 0 ? f.radius : 1;
  return { center: f.center.slice(), inner: round2(1.2 * r), outer: round2(Math.max(2.5 * r, 1.2 * r + 1)) };
}

// Find the rotation of the acquisition open now and show the DPC with it (iDPC unless a
// DPC image is shown). A failure is said and leaves the view as it was.
export async function findRotation() {
  if (!interactive() || state.findingRotation) return;
  const button = $('find-rotation');
  const opened = state.current;
  state.findingRotation = true;
  button.disabled = true;
  try {
    const annulus = rotationAnnulus();
    const profile = opened.profile || {};
    const params = { kind: 'dpc-rotation', ...annulus, bin: profile.bin || 1, maskBadPixels: !!profile.mask_bad_pixels };
    const found = await call('product', { params });
    // Another acquisition opened meanwhile: this answer is not about it.
    if (state.current !== opened) return;
    const [theta, flip] = Array.from(found.data);
    S.image.rotation = round2(theta);
    S.image.flip = flip === 1;
    if (S.image.kind !== 'dpc' && S.image.kind !== 'idpc') setPreset('idpc');
    syncDisplayControls();
    requestRender();
    clearError();
    state.lastRotation = { theta, flip: flip === 1, curlEnergy: found.data[2], annulus };
    showNotice(`DPC rotation found: ${fmtNum(S.image.rotation)}°${S.image.flip ? ', flipped' : ', not flipped'} `
      + `(the least curl; of it and ${fmtNum(round2((theta + 180) % 360))}° the one whose iDPC is bright where the ADF of `
      + `${fmtNum(annulus.inner)}–${fmtNum(annulus.outer)} px is).`);
  } catch (e) {
    if (state.current === opened) {
      showError(`The DPC rotation could not be found: ${String(e.message || e)}. The view is unchanged.`);
    }
  } finally {
    state.findingRotation = false;
    button.disabled = !state.current;
  }
}
