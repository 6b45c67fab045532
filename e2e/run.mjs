// End-to-end tests of the viewer in Chromium (headed under Xvfb in CI).
//   node e2e/run.mjs [--update-goldens]
// Env: STEM4D_E2E_GPU=real   use $CHROMIUM_FLAGS (a real adapter) and fail on a software one;
//      CHROMIUM              browser binary (default /usr/bin/chromium);
//      WEBTOOLS_DIR          where setup put playwright-core (default ~/.local/share/webtools).
// Serves dist/ (run `trunk build --release` first), the fixtures and ../shared/data on 127.0.0.1.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WEBTOOLS = process.env.WEBTOOLS_DIR || path.join(os.homedir(), '.local/share/webtools');
const { chromium } = createRequire(path.join(WEBTOOLS, 'package.json'))('playwright-core');
const UPDATE = process.argv.includes('--update-goldens');
const REAL = process.env.STEM4D_E2E_GPU === 'real';
const FIXTURES = path.join(ROOT, 'tests/fixtures');
const SWIFTSHADER = ['--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--enable-features=Vulkan',
  '--use-vulkan=swiftshader', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'];
const QUIET = ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

// ------------------------------------------------------------------ static server
const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.json': 'application/json' };
const MOUNTS = [['/fixtures/', FIXTURES], ['/shared/', path.join(ROOT, '../shared/data')], ['/', path.join(ROOT, 'dist')]];
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

// ------------------------------------------------------------------ npy + comparison
function readNpy(file) {
  const b = fs.readFileSync(file);
  const hlen = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = b[6] === 1 ? 10 : 12;
  const header = b.subarray(off, off + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  return { shape, dtype: descr, data: typed(descr.slice(1), b.subarray(off + hlen)) };
}
const DTYPES = { b1: Uint8Array, u1: Uint8Array, u2: Uint16Array, u4: Uint32Array, u8: BigUint64Array, f4: Float32Array, f8: Float64Array,
  uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array, float32: Float32Array, float64: Float64Array };
function typed(code, buf) {
  const T = DTYPES[code];
  if (!T) throw new Error('dtype ' + code);
  const copy = new Uint8Array(buf.length); copy.set(buf);
  return new T(copy.buffer);
}
const NPY_NAME = { u1: 'uint8', u2: 'uint16', u4: 'uint32', u8: 'uint64', f4: 'float32', f8: 'float64' };

// The contract's bounds: integers byte-identical; GPU CoM the float32 rounding of the exact
// quotient, DPC within 2e-6 px, iDPC within 1e-5·max|φ|; CPU floats within 1e-12.
function compare(kind, got, want) {
  if (JSON.stringify(got.shape) !== JSON.stringify(want.shape)) return `shape ${got.shape} != ${want.shape}`;
  const wname = NPY_NAME[want.dtype.slice(1)];
  const g = got.data, w = want.data;
  if (got.dtype === 'float32' && wname === 'float64' && ['com', 'dpc', 'idpc'].includes(kind)) {
    const scale = w.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (let i = 0; i < w.length; i++) {
      const ok = kind === 'com' ? g[i] === Math.fround(w[i]) : Math.abs(g[i] - w[i]) <= (kind === 'dpc' ? 2e-6 : 1e-5 * scale);
      if (!ok) return `[${i}] ${g[i]} vs ${w[i]}`;
    }
    return null;
  }
  if (kind === 'mean-dp-f32' && got.dtype === 'float64') {
    for (let i = 0; i < w.length; i++) if (Math.fround(g[i]) !== w[i]) return `[${i}] f32(${g[i]}) vs ${w[i]}`;
    return null;
  }
  if (got.dtype !== wname) return `dtype ${got.dtype} != ${wname}`;
  if (wname === 'float64') {
    const scale = w.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const signed = ['dpc', 'idpc', 'com'].includes(kind);
    for (let i = 0; i < w.length; i++) {
      const tol = 1e-12 * (signed ? scale : Math.abs(w[i]));
      if (Math.abs(g[i] - w[i]) > tol && !(Number.isNaN(g[i]) && Number.isNaN(w[i]))) return `[${i}] ${g[i]} vs ${w[i]}`;
    }
    return null;
  }
  for (let i = 0; i < w.length; i++) if (g[i] !== w[i]) return `[${i}] ${g[i]} vs ${w[i]}`;
  return null;
}

function apiParams(kind, p) {
  const out = { kind: kind.replace(/-f32$/, '') };
  const map = { scan_roi: 'scanRoi', mask_bad_pixels: 'maskBadPixels' };
  for (const [k, v] of Object.entries(p)) {
    if (v === null || v === undefined) continue;
    if (k === 'mask') {
      const m = readNpy(path.join(FIXTURES, v));
      out.mask = /(u1|b1)$/.test(m.dtype) ? Array.from(m.data, (x) => x !== 0) : Array.from(m.data);
    } else out[map[k] || k] = v;
  }
  return out;
}

// ------------------------------------------------------------------ page helpers
const results = { pass: 0, fail: 0, failures: [], figures: {} };
function check(ok, what) {
  if (ok) results.pass++; else { results.fail++; results.failures.push(what); console.log('FAIL ' + what); }
}

async function openInPage(page, urls, options = {}) {
  return page.evaluate(async ({ urls, options }) => {
    const files = await Promise.all(urls.map(async (u) => new File([await (await fetch(u)).blob()], u.split('/').pop())));
    try { return { info: await window.stem4d.open(files, options) }; } catch (e) { return { error: e.message }; }
  }, { urls, options });
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

function fixtureUrls(fx) {
  const base = fx.root === 'shared' ? '/shared/' : '/fixtures/data/';
  return fx.files.map((f) => base + f);
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
  check(d.sameSize && d.meanAbs < 4 && d.bigFrac < 0.02,
    `${name}: screenshot differs from golden (mean |Δ| ${d.meanAbs?.toFixed(2)}, ${(100 * d.bigFrac).toFixed(2)} % of pixels off by > 48)`);
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
    if (x.width !== y.width || x.height !== y.height) return { sameSize: false, meanAbs: 255, bigFrac: 1 };
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

// ------------------------------------------------------------------ the suite
async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json')));
  const bad = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'bad/manifest.json')));
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

    // 1. Parity through window.stem4d.product against the CPU reference, every fixture and kind.
    const kinds = new Set();
    for (const fx of manifest.fixtures) {
      const opened = await openInPage(page, fixtureUrls(fx), fx.scan_shape ? { scanShape: fx.scan_shape } : {});
      check(!opened.error, `${fx.name}: opens (${opened.error || 'ok'})`);
      if (opened.error) continue;
      check(JSON.stringify(opened.info.shape) === JSON.stringify(fx.shape) && opened.info.dtype === fx.dtype,
        `${fx.name}: info shape/dtype ${opened.info.shape} ${opened.info.dtype}`);
      for (const p of fx.products) {
        const got = await productInPage(page, apiParams(p.kind, p.params));
        const what = `${fx.name} ${p.ref}`;
        if (got.error) { check(false, `${what}: ${got.error}`); continue; }
        const data = typed(got.dtype, Buffer.from(got.b64, 'base64'));
        const err = compare(p.kind, { shape: got.shape, dtype: got.dtype, data }, readNpy(path.join(FIXTURES, p.ref)));
        check(err === null, `${what}: ${err}`);
        kinds.add(p.kind.replace(/-f32$/, ''));
      }
    }
    check(kinds.size === 15, `every product kind checked (${[...kinds].sort().join(', ')})`);

    // 2. Bad inputs: a clear error naming the file, through the same API, never a crash.
    for (const c of bad.cases) {
      const r = await openInPage(page, c.files.map((f) => '/fixtures/bad/' + f), c.scan_shape ? { scanShape: c.scan_shape } : {});
      const names = c.files.map((f) => f.split('/').pop());
      check(r.error && r.error.toLowerCase().includes(c.expect.toLowerCase()) && names.some((n) => r.error.includes(n.replace(/_data_\d+\.h5$/, ''))),
        `bad input ${c.name}: ${r.error || 'opened without error'}`);
      const shown = await page.evaluate(() => !document.getElementById('error').hidden && document.getElementById('error-text').textContent);
      check(shown && shown.length > 0, `bad input ${c.name}: the error is shown on the page`);
    }

    // 3. Through the UI: drop the Arina fixture, panels render like the goldens, drag a detector.
    const arina = manifest.fixtures.find((f) => f.name === 'arina_u16');
    await page.evaluate(async (urls) => {
      const dt = new DataTransfer();
      for (const u of urls) dt.items.add(new File([await (await fetch(u)).blob()], u.split('/').pop()));
      document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, fixtureUrls(arina));
    await page.waitForFunction(() => document.getElementById('drop-hint').textContent.includes('arina_u16'), null, { timeout: 30000 });
    await page.evaluate(() => window.stem4d.rendered());
    await page.waitForTimeout(300);
    const before = await compareGolden(page, 'section.panel:nth-of-type(1) .stage', 'image-bf');
    await compareGolden(page, 'section.panel:nth-of-type(2) .stage', 'pattern-cursor');
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
    const after = await page.locator('section.panel:nth-of-type(1) .stage').screenshot();
    const moved = await pixelDiff(page, before, after);
    check(moved.meanAbs > 1, `the virtual image changed after the drag (mean |Δ| ${moved.meanAbs.toFixed(2)})`);
    const mp = apiParams('bf', { center: v1.image.center, radius: v1.image.radius });
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
    for (const source of ['mean', 'sum', 'max', 'cursor']) {
      const err = await page.evaluate(async (source) => {
        try { await window.stem4d.setView({ pattern: { source }, image: { roi: [1, 4, 1, 5] } }); return null; } catch (e) { return e.message; }
      }, source);
      check(err === null, `pattern ${source} over a scan ROI renders (${err || 'ok'})`);
    }
    const png = await page.evaluate(async () => { const b = await window.stem4d.png('image'); return Array.from(b.subarray(0, 8)); });
    check(png[1] === 0x50 && png[2] === 0x4e && png[3] === 0x47, 'PNG export of the image panel');
    const profile = await page.evaluate(() => window.stem4d.profile());
    check(profile.stages.length >= 3 && profile.adapter.name === adapter.name, 'load profile has stages and the adapter');

    // 4. Interaction latency on a synthetic acquisition generated on the GPU (software
    //    adapters: correctness only, the figures are labelled). STEM4D_E2E_BENCH=R,C,KR,KC.
    const dims = (process.env.STEM4D_E2E_BENCH || '48,64,96,96').split(',').map(Number);
    const bench = await page.evaluate(async (dims) => {
      const t0 = performance.now();
      const info = await window.stem4d.open([], { synthetic: dims });
      const load = performance.now() - t0;
      const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
      const v = window.stem4d.view();
      const [kr, kc] = [dims[2], dims[3]];
      const r = 0.16 * Math.min(kr, kc);
      const out = { shape: info.shape, load_ms: load, profile: await window.stem4d.profile() };
      const series = async (name, preset, step) => {
        await window.stem4d.setView({ preset, pattern: { source: 'cursor' }, image: { roi: null } });
        const t = [];
        for (let k = 0; k < 30; k++) { await window.stem4d.setView(step(k)); t.push(window.stem4d.lastRenderMs()); }
        out[name] = med(t);
      };
      const disk = (k) => ({ image: { center: [kr / 2 + (k % 5) * 0.25, kc / 2 - (k % 3) * 0.25], radius: r } });
      await series('bf_drag_ms', 'bf', disk);
      await series('adf_drag_ms', 'adf', (k) => ({ image: { center: [kr / 2 + (k % 5) * 0.25, kc / 2], inner: 1.2 * r, outer: 2.5 * r } }));
      await series('df_drag_ms', 'df', disk);
      await series('dpc_rotate_ms', 'dpc0', (k) => ({ image: { rotation: k } }));
      await series('idpc_rotate_ms', 'idpc', (k) => ({ image: { rotation: k } }));
      await series('pattern_cursor_ms', 'bf', (k) => ({ image: { cursor: [(7 * k) % dims[0], (11 * k) % dims[1]] } }));
      await series('mean_pattern_roi_ms', 'bf', (k) => ({ pattern: { source: 'mean' }, image: { roi: [0, 1 + (k % dims[0]), 0, dims[1]] } }));
      return out;
    }, dims);
    results.figures.bench = bench;
    const label = adapter.software ? ' — software adapter: correctness only, not a speed figure' : '';
    console.log(`interaction on synthetic ${bench.shape.join('×')} u16 (${adapter.name}${label}), median of 30, request → GPU done:`);
    for (const [k, v] of Object.entries(bench)) if (k.endsWith('_ms')) console.log(`  ${k.padEnd(22)} ${v.toFixed(2)}`);
    check(consoleErrors.filter((e) => !/favicon/.test(e)).length === 0, 'no console errors: ' + consoleErrors.join(' | '));
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
