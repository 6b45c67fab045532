// The detector's geometry as numbers: centre, radius, inner/outer radii, rectangle or point,
// in detector pixels (centres at integer indices, as the mask contract measures) and, where
// the files calibrate the detector, radii in mrad. Typing either unit moves the detector;
// dragging it updates the fields. A reset puts it back on the fitted BF disk.
import { fmtNum } from './format.js';

const round2 = (x) => Math.round(x * 100) / 100;

// The largest radius about `center` whose disk stays on a `det` = [rows, cols] detector:
// pixel centres run 0..K−1, so the detector's edge is half a pixel beyond them.
export function insideRadius(center, det) {
  const [cr, cc] = center, [kr, kc] = det;
  return round2(Math.max(0, Math.min(cr + 0.5, kr - 0.5 - cr, cc + 0.5, kc - 0.5 - cc)));
}

// Whether a circle of radius `r` about `center` runs off the detector, and by how much.
export function annulusOffDetector(center, r, det) {
  const inside = insideRadius(center, det);
  return r > inside + 1e-9 ? { inside, beyond: round2(r - inside) } : null;
}

let els = null;
let getCtx = null;

// Build the fields once into `box`; `ctx()` gives the page's state when they change.
export function buildGeometry(box, ctx) {
  getCtx = ctx;
  box.innerHTML = `
    <span class="geo-label muted">detector</span>
    <span class="geo-group" data-for="centre">centre <input data-k="cr" type="number" step="0.1" title="detector centre row (px)" aria-label="centre row px">
      <input data-k="cc" type="number" step="0.1" title="detector centre column (px)" aria-label="centre column px"> px</span>
    <span class="geo-group" data-for="disk">radius <input data-k="radius" type="number" step="0.1" min="0" title="disk radius (px); pixels with d ≤ r are summed" aria-label="radius px"> px
      <span class="mrad"><input data-k="radius" data-u="mrad" type="number" step="0.01" min="0" title="disk radius (mrad)" aria-label="radius mrad"> mrad</span></span>
    <span class="geo-group" data-for="annulus">inner <input data-k="inner" type="number" step="0.1" min="0" title="annulus inner radius (px, exclusive)" aria-label="inner radius px"> px
      <span class="mrad"><input data-k="inner" data-u="mrad" type="number" step="0.01" min="0" title="annulus inner radius (mrad)" aria-label="inner radius mrad"> mrad</span>
      outer <input data-k="outer" type="number" step="0.1" min="0" title="annulus outer radius (px, inclusive)" aria-label="outer radius px"> px
      <span class="mrad"><input data-k="outer" data-u="mrad" type="number" step="0.01" min="0" title="annulus outer radius (mrad)" aria-label="outer radius mrad"> mrad</span></span>
    <span class="geo-group" data-for="rect">rows <input data-k="r0" type="number" step="1" min="0" title="first detector row" aria-label="rectangle first row">:<input data-k="r1" type="number" step="1" min="1" title="end row (half-open)" aria-label="rectangle end row">
      cols <input data-k="c0" type="number" step="1" min="0" title="first detector column" aria-label="rectangle first column">:<input data-k="c1" type="number" step="1" min="1" title="end column (half-open)" aria-label="rectangle end column"></span>
    <span class="geo-group" data-for="point">pixel <input data-k="pr" type="number" step="1" min="0" title="detector row of the point" aria-label="point row">
      <input data-k="pc" type="number" step="1" min="0" title="detector column of the point" aria-label="point column"></span>
    <span class="geo-group" data-for="whole">whole frame</span>
    <button class="geo-reset" title="Put the detector back on the fitted BF disk (R)">reset to fit</button>
    <span class="geo-fit muted"></span>
    <span class="geo-warn warn" role="status"></span>`;
  els = {
    box,
    groups: Object.fromEntries(Array.from(box.querySelectorAll('.geo-group'), (g) => [g.dataset.for, g])),
    inputs: Array.from(box.querySelectorAll('input')),
    reset: box.querySelector('.geo-reset'),
    fit: box.querySelector('.geo-fit'),
    warn: box.querySelector('.geo-warn'),
  };
  for (const input of els.inputs) input.addEventListener('change', () => typed(input));
  els.reset.addEventListener('click', () => getCtx().onReset());
}

// A number typed into a field: px as is, mrad through the calibration.
function typed(input) {
  const ctx = getCtx();
  if (!ctx.open) return;
  const im = ctx.image;
  let v = parseFloat(input.value);
  if (!Number.isFinite(v)) { syncGeometry(ctx); return; }
  if (input.dataset.u === 'mrad') v = ctx.mradPerPx ? v / ctx.mradPerPx : NaN;
  if (!Number.isFinite(v)) { syncGeometry(ctx); return; }
  const k = input.dataset.k;
  switch (k) {
    case 'cr': im.center = [round2(v), im.center[1]]; break;
    case 'cc': im.center = [im.center[0], round2(v)]; break;
    case 'radius': im.radius = round2(Math.max(0, v)); break;
    case 'inner': im.inner = round2(Math.max(0, v)); break;
    case 'outer': im.outer = round2(Math.max(0, v)); break;
    case 'r0': case 'r1': case 'c0': case 'c1': {
      const i = { r0: 0, r1: 1, c0: 2, c1: 3 }[k];
      im.rect = (im.rect || [0, 1, 0, 1]).slice();
      im.rect[i] = Math.round(v);
      break;
    }
    case 'pr': im.point = [Math.round(v), (im.point || [0, 0])[1]]; break;
    case 'pc': im.point = [(im.point || [0, 0])[0], Math.round(v)]; break;
  }
  if (im.kind === 'adf' && !(im.inner < im.outer)) {
    els.warn.textContent = `inner radius ${fmtNum(im.inner)} px must be below the outer ${fmtNum(im.outer)} px`;
    if (k === 'inner') im.inner = round2(Math.max(0, im.outer - 0.5)); else im.outer = round2(im.inner + 0.5);
  }
  ctx.onChange();
}

// Show the fields of the detector in use, with the state's values.
export function syncGeometry(ctx) {
  if (!els) return;
  const im = ctx.image;
  const shape = !ctx.open ? null
    : im.kind === 'bf' || im.kind === 'df' ? 'disk'
      : im.kind === 'adf' ? 'annulus'
        : im.kind === 'rect' ? 'rect'
          : im.kind === 'point' ? 'point' : 'whole';
  const show = { centre: shape === 'disk' || shape === 'annulus', disk: shape === 'disk', annulus: shape === 'annulus', rect: shape === 'rect', point: shape === 'point', whole: shape === 'whole' };
  for (const [k, g] of Object.entries(els.groups)) g.hidden = !show[k];
  for (const m of els.box.querySelectorAll('.mrad')) m.hidden = !ctx.mradPerPx;
  els.box.classList.toggle('disabled', !ctx.open);
  els.reset.disabled = !ctx.open || !ctx.fit;
  for (const input of els.inputs) input.disabled = !ctx.open;
  const values = {
    cr: im.center && im.center[0], cc: im.center && im.center[1], radius: im.radius, inner: im.inner, outer: im.outer,
    r0: im.rect && im.rect[0], r1: im.rect && im.rect[1], c0: im.rect && im.rect[2], c1: im.rect && im.rect[3],
    pr: im.point && im.point[0], pc: im.point && im.point[1],
  };
  for (const input of els.inputs) {
    if (input === document.activeElement) continue;
    let v = values[input.dataset.k];
    if (v == null || !ctx.open) { input.value = ''; continue; }
    if (input.dataset.u === 'mrad') v = ctx.mradPerPx ? v * ctx.mradPerPx : null;
    input.value = v == null ? '' : +(+v).toPrecision(6);
  }
  if (!ctx.open || !ctx.fit) { els.fit.textContent = ''; els.warn.textContent = ''; return; }
  const f = ctx.fit;
  els.fit.textContent = `fit: (${fmtNum(f.center[0])}, ${fmtNum(f.center[1])}) r ${fmtNum(f.radius)} px`
    + (ctx.mradPerPx ? ` = ${fmtNum(f.radius * ctx.mradPerPx)} mrad` : '');
  const warns = [];
  if (ctx.fitWarning) warns.push(ctx.fitWarning);
  const [kr, kc] = ctx.det;
  const off = (r, what) => {
    const o = annulusOffDetector(im.center, r, ctx.det);
    if (o) warns.push(`the ${what} (${fmtNum(r)} px) runs ${fmtNum(o.beyond)} px off the ${kr}×${kc} detector (${fmtNum(o.inside)} px fits about this centre): only pixels on it are summed`);
  };
  if (shape === 'annulus') off(im.outer, 'outer radius');
  if (shape === 'disk') off(im.radius, 'disk');
  els.warn.textContent = warns.join(' · ');
}
