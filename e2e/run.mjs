// End-to-end tests of the viewer in Chromium (headed under Xvfb in CI).
//   node e2e/run.mjs [--update-goldens]
// Env: STEM4D_E2E_ONLY=first_use  only the first-use scenarios (e2e/first_use.mjs);
//      STEM4D_E2E_GPU=real   use $CHROMIUM_FLAGS (a real adapter) and fail on a software one;
//      CHROMIUM              browser binary (default /usr/bin/chromium);
//      WEBTOOLS_DIR          where setup put playwright-core (default ~/.local/share/webtools).
// Serves dist/ (run `trunk build --release` first), the fixtures and ../shared/data on 127.0.0.1.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { firstUse } from './first_use.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WEBTOOLS = process.env.WEBTOOLS_DIR || path.join(os.homedir(), '.local/share/webtools');
const { chromium } = createRequire(path.join(WEBTOOLS, 'package.json'))('playwright-core');
const UPDATE = process.argv.includes('--update-goldens');
const REAL = process.env.STEM4D_E2E_GPU === 'real';
const ONLY = process.env.STEM4D_E2E_ONLY || '';
const FIXTURES = path.join(ROOT, 'tests/fixtures');
const SWIFTSHADER = ['--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--enable-features=Vulkan',
  '--use-vulkan=swiftshader', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'];
const QUIET = ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

// ------------------------------------------------------------------ static server
const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.json': 'application/json' };
const MOUNTS = [['/fixtures/', FIXTURES], ['/e2e/', path.join(ROOT, 'e2e')], ['/shared/', path.join(ROOT, '../shared/data')], ['/', path.join(ROOT, 'dist')]];
function serve() {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const [prefix, dir] = MOUNTS.find(([p]) => url.startsWith(p));
    let file = path.join(dir, url.slice(prefix.length) || 'index.html');
    if (!file.startsWith(dir) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404); res.end('not found'); return;
    }
    res.writeHead(200, { 'content-type': MIME[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// ------------------------------------------------------------------ typed arrays from the page
const DTYPES = { b1: Uint8Array, u1: Uint8Array, u2: Uint16Array, u4: Uint32Array, u8: BigUint64Array, f4: Float32Array, f8: Float64Array,
  uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array, float32: Float32Array, float64: Float64Array };
function typed(code, buf) {
  const T = DTYPES[code];
  if (!T) throw new Error('dtype ' + code);
  const copy = new Uint8Array(buf.length); copy.set(buf);
  return new T(copy.buffer);
}

// ------------------------------------------------------------------ page helpers
const results = { pass: 0, fail: 0, failures: [], figures: {} };
function check(ok, what) {
  if (ok) results.pass++; else { results.fail++; results.failures.push(what); console.log('FAIL ' + what); }
}

async function productInPage(page, params) {
  return page.evaluate(async (params) => {
    try {
      const r = await window.stem4d.product(params);
      const bytes = new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength);
      let s = '';
      for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      return { shape: r.shape, dtype: r.dtype, b64: btoa(s) };
    } catch (e) { return { error: e.message }; }
  }, params);
}

// Screenshot of one panel's stage, compared in the page with a golden PNG.
async function compareGolden(page, selector, name) {
  const shot = await page.locator(selector).screenshot();
  const golden = path.join(ROOT, 'e2e/goldens', name + '.png');
  if (UPDATE || !fs.existsSync(golden)) {
    if (!UPDATE) { check(false, `golden ${name}.png missing (run with --update-goldens)`); return shot; }
    fs.writeFileSync(golden, shot);
    console.log('wrote golden ' + golden);
    return shot;
  }
  const d = await pixelDiff(page, shot, fs.readFileSync(golden));
  const ok = d.sameSize && d.meanAbs < 4 && d.bigFrac < 0.02;
  // A differing screenshot is kept beside the run, to be looked at.
  const kept = path.join(os.tmpdir(), `stem4d-e2e-${name}.png`);
  if (!ok) fs.writeFileSync(kept, shot);
  check(ok, `${name}: screenshot differs from golden (${d.sameSize ? '' : `sizes ${d.sizes}; `}mean |Δ| ${d.meanAbs?.toFixed(2)}, ${(100 * d.bigFrac).toFixed(2)} % of pixels off by > 48; kept as ${kept})`);
  return shot;
}

async function pixelDiff(page, a, b) {
  return page.evaluate(async ({ a, b }) => {
    const load = async (b64) => {
      const bmp = await createImageBitmap(await (await fetch('data:image/png;base64,' + b64)).blob());
      const c = new OffscreenCanvas(bmp.width, bmp.height);
      const g = c.getContext('2d'); g.drawImage(bmp, 0, 0);
      return g.getImageData(0, 0, bmp.width, bmp.height);
    };
    const [x, y] = await Promise.all([load(a), load(b)]);
    if (x.width !== y.width || x.height !== y.height) return { sameSize: false, meanAbs: 255, bigFrac: 1, sizes: `${x.width}×${x.height} against ${y.width}×${y.height}` };
    let sum = 0, big = 0;
    for (let i = 0; i < x.data.length; i += 4) {
      let m = 0;
      for (let k = 0; k < 3; k++) { const d = Math.abs(x.data[i + k] - y.data[i + k]); sum += d; m = Math.max(m, d); }
      if (m > 48) big++;
    }
    const n = x.data.length / 4;
    return { sameSize: true, meanAbs: sum / (3 * n), bigFrac: big / n };
  }, { a: a.toString('base64'), b: b.toString('base64') });
}

// Mean grey level (0–255) of a screenshot.
async function meanLevel(page, shot) {
  return page.evaluate(async (b64) => {
    const bmp = await createImageBitmap(await (await fetch('data:image/png;base64,' + b64)).blob());
    const c = new OffscreenCanvas(bmp.width, bmp.height);
    const g = c.getContext('2d'); g.drawImage(bmp, 0, 0);
    const d = g.getImageData(0, 0, bmp.width, bmp.height).data;
    let s = 0;
    for (let i = 0; i < d.length; i += 4) s += (d[i] + d[i + 1] + d[i + 2]) / 3;
    return s / (d.length / 4);
  }, shot.toString('base64'));
}

// ------------------------------------------------------------------ the suite
async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json')));
  if (!fs.existsSync(path.join(ROOT, 'dist/index.html'))) throw new Error('dist/ is missing: run `trunk build --release` first');
  const server = await serve();
  const url = `http://127.0.0.1:${server.address().port}/`;
  const args = REAL ? (process.env.CHROMIUM_FLAGS || '').split(/\s+/).filter(Boolean) : [...SWIFTSHADER, ...QUIET];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    // Playwright gives every launch a fresh temporary profile.
    headless: REAL, args: args.filter((a) => !a.startsWith('--headless') && !a.startsWith('--user-data-dir')),
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  try {
    await page.goto(url);
    await page.waitForFunction(() => window.stem4dReady === true, null, { timeout: 60000 });
    const adapter = await page.evaluate(() => window.stem4d.adapter());
    console.log('adapter:', JSON.stringify(adapter));
    check(adapter && !adapter.error, 'WebGPU adapter available: ' + JSON.stringify(adapter));
    if (!adapter || adapter.error) throw new Error('no WebGPU adapter');
    if (REAL) check(!adapter.software, 'a real (hardware) adapter was required, got ' + adapter.name);
    results.figures.adapter = adapter.name + (adapter.software ? ' (software)' : '');

    // STEM4D_E2E_ONLY=first_use runs only the first-use scenarios (while working on the page).
    if (ONLY !== 'first_use') {
    // The page made the staging ring of file uploads while it waited: its first load from
    // files makes no staging buffer, and neither does the next (the ring is kept).
    const staging = await page.evaluate(async (urls) => {
      const files = await Promise.all(urls.map(async (u) => new File([await (await fetch(u)).blob()], u.split('/').pop())));
      const made = [];
      for (let k = 0; k < 2; k++) {
        await window.stem4d.open(files);
        const p = await window.stem4d.profile();
        made.push([p.staging_buffers_made, p.file_buffer_windows]);
      }
      return made;
    }, manifest.fixtures.find((f) => f.name === 'arina_u16').files.map((f) => '/fixtures/data/' + f));
    check(staging.every(([made, windows]) => made === 0 && windows > 0),
      `loads from files use the staging ring made while the page was idle ([made, windows]: ${JSON.stringify(staging)})`);

    // 1–2. Parity of every product kind and the bad-input corpus, in the page (e2e/suite.js).
    const suite = await page.evaluate(async () => (await import('/e2e/suite.js')).runSuite({ parts: ['parity', 'bad'] }));
    results.pass += suite.pass;
    results.fail += suite.fail;
    for (const f of suite.failures) { results.failures.push(f); console.log('FAIL ' + f); }
    check(suite.skipped.length === 0, 'no fixture skipped: ' + suite.skipped.join('; '));
    console.log(`in-page suite: ${suite.pass} passed, ${suite.fail} failed; kinds: ${suite.figures.kinds.join(' ')}`);

    // 3. Through the UI: drop the Arina fixture, panels render like the goldens, drag a detector.
    const arina = manifest.fixtures.find((f) => f.name === 'arina_u16');
    const fixtureUrls = (fx) => fx.files.map((f) => '/fixtures/data/' + f);
    const dropFiles = (urls) => page.evaluate(async (urls) => {
      const dt = new DataTransfer();
      for (const u of urls) dt.items.add(new File([await (await fetch(u)).blob()], u.split('/').pop()));
      document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, urls);
    await dropFiles(fixtureUrls(arina));
    await page.waitForFunction(() => document.getElementById('drop-hint').textContent.includes('arina_u16'), null, { timeout: 30000 });
    await page.evaluate(() => window.stem4d.rendered());
    await page.waitForTimeout(300);
    const progressShown = await page.evaluate(() => getComputedStyle(document.getElementById('progress')).display);
    check(progressShown === 'none', `the progress bar is gone once the acquisition is loaded (display: ${progressShown})`);
    const before = await compareGolden(page, '#image-panel .frame', 'image-bf');
    const patternShot = await compareGolden(page, '#pattern-panel .frame', 'pattern-cursor');
    // Frames reach the screen the way the page measured to be faster; the other way shows
    // the same pixels, and a way that does not exist is refused by name.
    const present = await page.evaluate(() => window.stem4d.present());
    check(present && ['surface', 'readback'].includes(present.mode) && present.chosen === 'measured'
      && present.surface_ms > 0 && present.readback_ms > 0 && !present.error,
      `frames are presented the measured way: ${JSON.stringify(present)}`);
    console.log(`present: ${present.mode} (calibration medians: surface ${present.surface_ms?.toFixed(2)} ms, readback ${present.readback_ms?.toFixed(2)} ms)`);
    const other = present.mode === 'surface' ? 'readback' : 'surface';
    const switched = await page.evaluate((m) => window.stem4d.setPresent(m), other);
    check(switched.mode === other && switched.chosen === 'asked', `stem4d.setPresent('${other}'): ${JSON.stringify(switched)}`);
    await page.waitForTimeout(300);
    for (const [shot, n, name] of [[before, 1, 'image-bf'], [patternShot, 2, 'pattern-cursor']]) {
      const now = await compareGolden(page, `${n === 1 ? '#image-panel' : '#pattern-panel'} .frame`, name);
      const d = await pixelDiff(page, shot, now);
      check(d.sameSize && d.meanAbs < 0.5 && d.bigFrac === 0,
        `${name} presented ${other}: the same pixels as ${present.mode} (mean |Δ| ${d.meanAbs?.toFixed(3)}, ${(100 * d.bigFrac).toFixed(2)} % off by > 48)`);
    }
    const refusedPresent = await page.evaluate(async () => {
      try { await window.stem4d.setPresent('carrier pigeon'); return ''; } catch (e) { return e.message; }
    });
    check(/carrier pigeon/.test(refusedPresent) && /surface/.test(refusedPresent), `an unknown way to present is refused: ${refusedPresent}`);
    // The page address chooses the way too; a way that does not exist is said on the page.
    for (const [query, want] of [['readback', 'readback'], ['surface', 'surface'], ['carrier-pigeon', null]]) {
      const tab = await browser.newPage({ viewport: { width: 640, height: 480 }, deviceScaleFactor: 1 });
      await tab.goto(url + '?present=' + query);
      await tab.waitForFunction(() => window.stem4dReady === true, null, { timeout: 60000 });
      const got = await tab.evaluate(() => ({ present: window.stem4d.present(), error: !document.getElementById('error').hidden && document.getElementById('error-text').textContent }));
      check(want ? got.present.mode === want && got.present.chosen === 'asked' && !got.error
        : got.present.chosen === 'measured' && /carrier-pigeon/.test(got.error || ''),
      `?present=${query}: ${JSON.stringify(got)}`);
      await tab.close();
    }
    const back = await page.evaluate((m) => window.stem4d.setPresent(m), present.mode);
    check(back.mode === present.mode && (await page.evaluate(() => window.stem4d.profile())).present.mode === present.mode,
      'the profile says how frames are presented');
    const v0 = await page.evaluate(() => window.stem4d.view());
    const box = await page.locator('#pattern-canvas').boundingBox();
    const [kr, kc] = [arina.shape[2], arina.shape[3]];
    const fit = Math.min(box.width / kc, box.height / kr);
    const at = (r, c) => [box.x + box.width / 2 + (c + 0.5 - kc / 2) * fit, box.y + box.height / 2 + (r + 0.5 - kr / 2) * fit];
    const [x0, y0] = at(v0.image.center[0], v0.image.center[1]);
    await page.mouse.move(x0, y0);
    await page.mouse.down();
    for (let k = 1; k <= 5; k++) await page.mouse.move(x0 + k * 0.6 * fit, y0 + k * 0.4 * fit);
    await page.mouse.up();
    await page.evaluate(() => window.stem4d.rendered());
    await page.waitForTimeout(300);
    const v1 = await page.evaluate(() => window.stem4d.view());
    check(Math.abs(v1.image.center[1] - v0.image.center[1] - 3) < 0.6 && Math.abs(v1.image.center[0] - v0.image.center[0] - 2) < 0.6,
      `dragging the disk moved its centre by (2, 3) px: ${v0.image.center} → ${v1.image.center}`);
    const after = await page.locator('#image-panel .frame').screenshot();
    const moved = await pixelDiff(page, before, after);
    check(moved.meanAbs > 1, `the virtual image changed after the drag (mean |Δ| ${moved.meanAbs.toFixed(2)})`);
    // The page masks bad pixels by default: the exact sum it shows is the masked one.
    const mp = { kind: 'bf', center: v1.image.center, radius: v1.image.radius, maskBadPixels: true };
    const exact = await productInPage(page, mp);
    const sums = typed('uint64', Buffer.from(exact.b64, 'base64'));
    const [cr, cc] = v1.image.cursor;
    const hover = await page.evaluate(([r, c]) => window.stem4d.valueAt('image', r, c), [cr, cc]);
    check(BigInt(hover) === sums[cr * arina.shape[1] + cc], `hover readout ${hover} is the exact BF sum ${sums[cr * arina.shape[1] + cc]}`);
    // Arrow keys move the cursor; Shift moves by 10 (clamped to the scan).
    await page.locator('body').click({ position: { x: 5, y: 790 } });
    await page.keyboard.press('ArrowRight');
    const v2 = await page.evaluate(() => window.stem4d.view());
    check(v2.image.cursor[1] === Math.min(v1.image.cursor[1] + 1, arina.shape[1] - 1), `ArrowRight moved the cursor: ${v2.image.cursor}`);
    await page.keyboard.press('Shift+ArrowUp');
    const v3 = await page.evaluate(() => window.stem4d.view());
    check(v3.image.cursor[0] === 0, `Shift+ArrowUp moved the cursor 10 rows (clamped): ${v3.image.cursor}`);
    // Every image kind renders, with diverging limits for DPC/iDPC.
    for (const preset of ['abf', 'adf', 'haadf', 'rect', 'point', 'df', 'total', 'com0', 'com1', 'dpc0', 'dpc1', 'idpc']) {
      const err = await page.evaluate(async (preset) => {
        try { await window.stem4d.setView({ preset }); const s = await window.stem4d.stats('image'); return s.lo < s.hi ? null : 'empty range'; } catch (e) { return e.message; }
      }, preset);
      check(err === null, `preset ${preset} renders (${err || 'ok'})`);
    }
    const dpcStats = await page.evaluate(async () => { await window.stem4d.setView({ preset: 'dpc0' }); return window.stem4d.stats('image'); });
    check(Math.abs(dpcStats.lo + dpcStats.hi) < 1e-6 * Math.max(1, Math.abs(dpcStats.hi)), `DPC limits are symmetric: ${dpcStats.lo} … ${dpcStats.hi}`);
    // A circular scan ROI drawn on the image panel through the UI.
    await page.evaluate(() => window.stem4d.setView({ pattern: { source: 'sum' }, image: { roi: null, roiCircle: null } }));
    await page.click('#roi-circle');
    const ibox = await page.locator('#image-canvas').boundingBox();
    const [sr, sc] = [arina.shape[0], arina.shape[1]];
    const ifit = Math.min(ibox.width / sc, ibox.height / sr);
    const iat = (r, c) => [ibox.x + ibox.width / 2 + (c + 0.5 - sc / 2) * ifit, ibox.y + ibox.height / 2 + (r + 0.5 - sr / 2) * ifit];
    await page.mouse.move(...iat(2, 3));
    await page.mouse.down();
    await page.mouse.move(...iat(2, 5), { steps: 4 });
    await page.mouse.up();
    await page.evaluate(() => window.stem4d.rendered());
    const vc = await page.evaluate(() => window.stem4d.view());
    check(vc.image.roiCircle && Math.abs(vc.image.roiCircle[2] - 2) < 0.3 && vc.image.roi === null,
      `a circular scan ROI was drawn: ${JSON.stringify(vc.image.roiCircle)}`);
    for (const source of ['mean', 'sum', 'max', 'cursor']) {
      const err = await page.evaluate(async (source) => {
        try { await window.stem4d.setView({ pattern: { source }, image: { roi: [1, 4, 1, 5], roiCircle: null } }); return null; } catch (e) { return e.message; }
      }, source);
      check(err === null, `pattern ${source} over a scan ROI renders (${err || 'ok'})`);
    }
    const png = await page.evaluate(async () => { const b = await window.stem4d.png('image'); return Array.from(b.subarray(0, 8)); });
    check(png[1] === 0x50 && png[2] === 0x4e && png[3] === 0x47, 'PNG export of the image panel');
    const profile = await page.evaluate(() => window.stem4d.profile());
    check(profile.stages.length >= 3 && profile.adapter.name === adapter.name, 'load profile has stages and the adapter');
    // The open's tail follows the first image, once, and joins the profile.
    const tail = ['totals + CoM moments', 'ring sums about the BF centre'].map((n) => profile.stages.filter((st) => st.name === n).length);
    const stageAt = (n) => profile.stages.findIndex((st) => st.name === n);
    check(tail[0] === 1 && tail[1] === 1 && stageAt('BF disk fit') >= 0 && stageAt('totals + CoM moments') > stageAt('BF disk fit'),
      `totals, CoM and ring sums made once, after the BF fit and the first image (${profile.stages.map((st) => st.name).join(', ')})`);
    check(profile.index_read_rounds > 1 && profile.index_read_rounds < 64, `metadata reads gathered into ${profile.index_read_rounds} rounds`);
    // Files read by Blob.arrayBuffer() in the viewer's Worker instead of the pool: the same
    // acquisition; an unknown read mode is refused by name.
    const viaBlob = await page.evaluate(async (urls) => {
      const files = await Promise.all(urls.map(async (u) => new File([await (await fetch(u)).arrayBuffer()], u.split('/').pop())));
      const a = await window.stem4d.product({ kind: 'bf', center: [6, 5], radius: 3 });
      await window.stem4d.open(files, { reads: 'blob' });
      const b = await window.stem4d.product({ kind: 'bf', center: [6, 5], radius: 3 });
      let refused = '';
      try { await window.stem4d.open(files, { reads: 'carrier pigeon' }); } catch (e) { refused = e.message; }
      await window.stem4d.open(files);
      return { same: a.data.length === b.data.length && a.data.every((v, i) => v === b.data[i]), refused };
    }, fixtureUrls(arina));
    check(viaBlob.same, 'reads: "blob" opens the same acquisition as the pool Workers');
    check(/carrier pigeon/.test(viaBlob.refused), `an unknown read mode is refused: ${viaBlob.refused}`);
    // The scan-crop field: a malformed crop is said on the page; a valid one opens the sub-scan.
    await page.fill('#crop', '1-4,2');
    await dropFiles(fixtureUrls(arina));
    await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: 10000 });
    const cropError = await page.textContent('#error-text');
    check(/scan crop/.test(cropError), `a malformed crop is refused on the page: ${cropError}`);
    await page.fill('#crop', '1:4,2:6');
    await dropFiles(fixtureUrls(arina));
    await page.waitForFunction(async () => {
      try { return JSON.stringify((await window.stem4d.profile()).scan_crop) === '[1,4,2,6]'; } catch (e) { return false; }
    }, null, { timeout: 30000 });
    const cropped = await page.evaluate(() => window.stem4d.profile());
    check(cropped.shape[0] === 3 && cropped.shape[1] === 4, `the cropped scan is 3×4: ${cropped.shape}`);
    await page.fill('#crop', '');

    // 4. Interaction latency on a synthetic acquisition generated on the GPU (software
    //    adapters: correctness only, the figures are labelled). STEM4D_E2E_BENCH=R,C,KR,KC.
    const dims = (process.env.STEM4D_E2E_BENCH || '32,40,64,64').split(',').map(Number);
    const bench = await page.evaluate(async (dims) => (await import('/e2e/suite.js')).bench(dims, 30), dims);
    results.figures.bench = bench;
    const label = adapter.software ? ' — software adapter: correctness only, not a speed figure' : '';
    console.log(`interaction on synthetic ${bench.shape.join('×')} u16 (${adapter.name}${label}), median of 30, request → GPU done:`);
    for (const [k, v] of Object.entries(bench)) if (k.endsWith('_ms')) console.log(`  ${k.padEnd(22)} ${v.toFixed(2)}`);
    for (const k of ['drag', 'idle']) {
      const f = bench[k];
      console.log(`  ${k.padEnd(22)} ${f.fps.toFixed(1)} frames/s, longest ${f.worst_frame_ms.toFixed(1)} ms, ${f.renders_per_s.toFixed(1)} images/s, ${f.engine_calls} engine calls`);
    }
    const op = bench.other_present;
    console.log(`  presented ${bench.present.mode} (measured: surface ${bench.present.surface_ms.toFixed(2)}, readback ${bench.present.readback_ms.toFixed(2)} ms a frame); `
      + `${op.mode}: BF ${op.bf_drag_ms.toFixed(2)}, pattern ${op.pattern_cursor_ms.toFixed(2)}, colour map ${op.pattern_cmap_ms.toFixed(2)}`);
    for (const [px, f] of Object.entries(bench.pattern_by_width)) {
      console.log(`  pattern canvas ${px} px   colour map ${f.cmap_ms.toFixed(2)}, cursor ${f.cursor_ms.toFixed(2)}`);
    }
    for (const [k, g] of Object.entries(bench.gpu)) {
      if (k === 'timed') continue;
      const top = Object.entries(g.computed.kernels).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([n, ms]) => `${n} ${ms.toFixed(2)}`);
      console.log(`  GPU ${k.padEnd(18)} computed ${g.computed.busy_ms.toFixed(2)}, drawn ${g.drawn.busy_ms.toFixed(2)} ms busy (${top.join(', ')})`);
    }
    const frameChecks = await page.evaluate(async (b) => (await import('/e2e/suite.js')).checkFrames(b), bench);
    for (const what of frameChecks) check(what.ok, what.text);
    }
    check(consoleErrors.filter((e) => !/favicon/.test(e)).length === 0, 'no console errors: ' + consoleErrors.join(' | '));

    // 5. The page as a first-time user meets it, in fresh pages (e2e/first_use.mjs).
    const before = results.pass + results.fail;
    await firstUse({ browser, url, check, ROOT, manifest, pixelDiff, meanLevel, compareGolden });
    console.log(`first use: ${results.pass + results.fail - before} checks`);
  } finally {
    await browser.close();
    server.close();
  }
  console.log(`\ne2e: ${results.pass} passed, ${results.fail} failed`);
  if (process.env.STEM4D_E2E_OUT) fs.writeFileSync(process.env.STEM4D_E2E_OUT, JSON.stringify(results, null, 1));
  if (results.fail) {
    console.log(results.failures.join('\n'));
    process.exit(1);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
