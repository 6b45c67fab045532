// The page as a first-time user meets it (issue #27): acquisitions opened through the real
// file chooser (the browser's file-chooser event) as well as dropped, failures and cancels
// followed by more work, typed detector geometry, display limits, settings that apply, the
// layout at three window sizes, calibration, the keyboard and the views peers have. Each
// scenario runs in a fresh page; run.mjs calls `firstUse` with its helpers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function firstUse(t) {
  const { browser, url, check, ROOT, manifest } = t;
  const FIX = path.join(ROOT, 'tests/fixtures');
  const fixture = (name) => manifest.fixtures.find((f) => f.name === name);
  const filesOf = (name) => {
    const fx = fixture(name);
    return fx.files.map((f) => path.join(fx.root === 'shared' ? path.join(ROOT, '../shared/data') : path.join(FIX, 'data'), f));
  };
  const bad = (p) => path.join(FIX, 'bad', p);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'stem4d-e2e-'));

  // Each scenario runs on its own: one that throws is a failed check that names it, its pages
  // are closed, and the next scenario runs.
  const open = [];
  // STEM4D_E2E_SCENARIO=11 runs only the scenarios whose names start so (while working on one).
  async function scenario(name, fn) {
    if (process.env.STEM4D_E2E_SCENARIO && !name.startsWith(process.env.STEM4D_E2E_SCENARIO)) return;
    try {
      await fn();
    } catch (e) {
      check(false, `scenario ${name}: ${String(e.message || e).split('\n')[0]}`);
    } finally {
      for (const p of open.splice(0)) await p.close().catch(() => {});
    }
  }

  async function freshPage(viewport = { width: 1280, height: 800 }) {
    const page = await browser.newPage({ viewport, deviceScaleFactor: 1, acceptDownloads: true });
    open.push(page);
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error' && !/favicon/.test(m.text())) errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => window.stem4dReady === true, null, { timeout: 60000 });
    // Several tabs are open: a file chooser opens only from the one in front.
    await page.bringToFront();
    page.errors = errors;
    return page;
  }
  const status = (page) => page.evaluate(() => window.stem4d.status());
  // Choose `paths` in the file chooser that `button` opens, as a user does.
  async function choose(page, button, paths) {
    const label = { '#open-files': 'Open files…', '#open-folder': 'Open folder…' }[button];
    const [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 10000 }),
      page.getByText(label, { exact: true }).first().click({ timeout: 10000 })]);
    await chooser.setFiles(paths);
  }
  const settled = (page, timeout = 60000) => page.waitForFunction(() => {
    const s = window.stem4d.status();
    return !s.loading && (s.open || s.error);
  }, null, { timeout });
  // Wait until `name` is open; a timeout is a failed check with what the page says instead.
  const openedAs = async (page, name, timeout = 60000) => {
    try {
      await page.waitForFunction((n) => {
        const s = window.stem4d.status();
        return !s.loading && s.open && s.open.includes(n);
      }, name, { timeout });
      return true;
    } catch (e) {
      check(false, `${name} did not open: ${JSON.stringify(await status(page))} ${page.errors.join(' | ')}`);
      return false;
    }
  };
  const rendered = (page) => page.evaluate(() => window.stem4d.rendered());
  const shot = (page, sel) => page.locator(sel).screenshot();
  const imageStage = '#image-panel .stage', patternStage = '#pattern-panel .stage';
  const noErrors = (page, what) => check(page.errors.length === 0, `${what}: no console errors (${page.errors.join(' | ')})`);
  // The exact value under the image's scan cursor, through the page's hover path.
  const valueAtCursor = (page) => page.evaluate(async () => {
    const v = window.stem4d.view();
    return String(await window.stem4d.valueAt('image', v.image.cursor[0], v.image.cursor[1]));
  });

  // ---------------------------------------------------------------- 1. open buttons that open
  await scenario('1 open buttons', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const s = await status(page);
      check(s.open && s.open.length === 4 && !s.error, `Open files… opens the chosen acquisition: ${JSON.stringify(s)}`);
      const st = await page.evaluate(() => window.stem4d.stats('image'));
      check(st.hi > st.lo, `the chosen acquisition's BF image is drawn (limits ${st.lo}…${st.hi})`);
      // The same files chosen again open again (the input was cleared after the first choice).
      const calls = (await page.evaluate(() => window.stem4d.activity())).calls;
      await choose(page, '#open-files', filesOf('arina_u16'));
      await page.waitForFunction((c) => window.stem4d.activity().calls > c + 2 && !window.stem4d.status().loading, calls, { timeout: 60000 });
      check((await status(page)).open.length === 4, 'the same files chosen a second time open again');
      // A folder through Open folder… (a folder holding one acquisition).
      await page.fill('#scan-rows', '4'); await page.fill('#scan-cols', '6');
      const dir = path.join(tmp, 'arina_u8_folder');
      fs.mkdirSync(dir);
      for (const f of filesOf('arina_u8')) fs.copyFileSync(f, path.join(dir, path.basename(f)));
      await choose(page, '#open-folder', dir);
      await openedAs(page, 'arina_u8_master.h5');
      check((await status(page)).open.includes('arina_u8_data_000001.h5'), 'Open folder… opens the acquisition in the chosen folder');
      // Files with one the acquisition does not read: opened, and the page says what it
      // left out (never silently dropped).
      const notes = path.join(tmp, 'notes.txt');
      fs.writeFileSync(notes, 'beam current 50 pA\n');
      await choose(page, '#open-files', [...filesOf('arina_u16'), notes]);
      // (The notice that the typed scan shape was for other files names notes.txt too: wait
      // for the load to end and the left-out notice.)
      await page.waitForFunction(() => !window.stem4d.status().loading && /Left out/.test(window.stem4d.status().notice || ''), null, { timeout: 60000 }).catch(() => {});
      const left = await status(page);
      check(left.open && !left.error && /Left out: notes\.txt/.test(left.notice || ''),
        `a file the acquisition does not read is left out and said: ${JSON.stringify(left)}`);
      // From the keyboard: Tab to the button, Enter opens the chooser.
      await page.bringToFront();
      await page.focus('#open-files');
      const focused = await page.evaluate(() => document.activeElement.id);
      // Enter, else Space (both activate a button); headed Chromium now and then drops a
      // chooser asked for soon after another one closed (twice in a row once), so each key
      // is pressed again after a pause, the focus still on the button.
      let chooser = null;
      for (const key of ['Enter', 'Space', 'Enter', 'Space']) {
        [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 5000 }).catch(() => null), page.keyboard.press(key)]);
        if (chooser) break;
        await page.waitForTimeout(500);
        await page.focus('#open-files');
      }
      check(chooser !== null, `the keyboard on the focused Open files… button opens the file chooser (focus on ${focused})`);
      if (chooser) await chooser.setFiles(filesOf('arina_u16'));
      if (chooser) await openedAs(page, 'arina_u16_master.h5');
      noErrors(page, 'file chooser');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 2. a page that survives failure
  await scenario('2 failure and cancel', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      // A file that is not an acquisition: refused before anything loads, the acquisition open
      // before stays open and fully usable.
      await choose(page, '#open-files', [bad('text_file/notes.h5')]);
      await page.waitForFunction(() => window.stem4d.status().error, null, { timeout: 30000 });
      let s = await status(page);
      check(/notes\.h5/.test(s.error) && /still open/.test(s.error) && s.open && s.open.includes('arina_u16_master.h5'),
        `a failed open names the file and keeps the previous acquisition: ${JSON.stringify(s)}`);
      const before = await shot(page, imageStage);
      await page.selectOption('#image-kind', 'adf');
      await rendered(page);
      await page.waitForTimeout(200);
      const after = await shot(page, imageStage);
      const d = await t.pixelDiff(page, before, after);
      check(d.meanAbs > 1, `after a failed open a preset changes the image (mean |Δ| ${d.meanAbs.toFixed(2)})`);
      const box = await page.locator('#image-canvas').boundingBox();
      await page.mouse.click(box.x + box.width * 0.1, box.y + box.height * 0.1);
      await rendered(page);
      const v = await page.evaluate(() => window.stem4d.view());
      check(v.image.cursor[0] === 0 && v.image.cursor[1] === 0, `after a failed open a click moves the cursor: ${v.image.cursor}`);
      await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
      await page.waitForFunction(() => document.getElementById('image-readout').textContent.includes('='), null, { timeout: 5000 }).catch(() => {});
      check((await page.textContent('#image-readout')).includes('='), 'after a failed open hovering reads a value');
      await page.keyboard.press('ArrowDown');
      const v2 = await page.evaluate(() => window.stem4d.view());
      check(v2.image.cursor[0] === 1, `after a failed open the arrow keys move the cursor: ${v2.image.cursor}`);
      const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }).catch(() => null), page.click('#export-npy')]);
      check(download && /\.npy$/.test(download.suggestedFilename()), 'after a failed open the .npy export downloads');
      // A chooser closed without a choice changes nothing and says so.
      await page.evaluate(() => document.getElementById('file-input').dispatchEvent(new Event('cancel')));
      s = await status(page);
      check(s.open && /nothing changed/.test(s.notice || ''), `a cancelled chooser keeps the acquisition and says so: ${JSON.stringify(s)}`);
      // A load that fails once it has begun (a corrupt LZ4 block): the page is empty and says
      // why, the exports are off, and the next open works.
      await page.fill('#scan-rows', '4'); await page.fill('#scan-cols', '6');
      await choose(page, '#open-files', [bad('bslz4_corrupt_lz4/data.h5')]);
      await page.waitForFunction(() => window.stem4d.status().error, null, { timeout: 60000 });
      s = await status(page);
      const empty = await page.evaluate(() => ({ body: document.body.classList.contains('empty'), npy: document.getElementById('export-npy').disabled, readout: document.getElementById('image-readout').textContent }));
      check(s.open === null && /data\.h5/.test(s.error) && /Nothing is open/.test(s.error) && empty.body && empty.npy,
        `a load failing after it began leaves a clean empty page: ${JSON.stringify({ s, empty })}`);
      await page.fill('#scan-rows', ''); await page.fill('#scan-cols', '');
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      check(!(await page.evaluate(() => document.body.classList.contains('empty'))), 'after the failure the next acquisition opens');
      // Cancel during a load: a clean empty page that says so, then more work.
      await page.evaluate(() => { window.stem4d.open([], { synthetic: [96, 96, 128, 128] }).catch(() => {}); });
      await page.waitForSelector('#progress:not([hidden])', { timeout: 10000 });
      await page.click('#cancel');
      await page.waitForFunction(() => /cancelled/.test(window.stem4d.status().error || ''), null, { timeout: 60000 });
      await page.waitForFunction(() => window.stem4dReady && window.stem4d.adapter() && !window.stem4d.status().loading, null, { timeout: 60000 });
      s = await status(page);
      check(s.open === null && /Nothing is open/.test(s.error), `a cancelled load leaves a clean empty page that says so: ${JSON.stringify(s)}`);
      await page.waitForTimeout(500);
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await page.selectOption('#image-kind', 'bf');
      await rendered(page);
      check((await valueAtCursor(page)) !== '', 'after a cancel the chooser opens the next acquisition and it reads values');
      noErrors(page, 'failure and cancel');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 3. a BF fit that finds the disk
  // C-FIT within a pixel of the true disk, masked or not; C-BAD-FOUND's pixels in the provenance.
  await scenario('3 BF fit', async () => {
    for (const fx of manifest.fixtures.filter((f) => f.true_bf_disk)) {
      for (const mask of [true, false]) {
        const page = await freshPage();
        if (!mask) await page.uncheck('#bad-pixels');
        await choose(page, '#open-files', filesOf(fx.name));
        await openedAs(page, fx.files[0].split('/').pop());
        const s = await status(page);
        const [tr, tc, trad] = fx.true_bf_disk;
        const f = s.fit;
        check(f && Math.hypot(f.center[0] - tr, f.center[1] - tc) <= 1 && Math.abs(f.radius - trad) <= 1 && !f.warning,
          `${fx.name} (masking ${mask ? 'on' : 'off'}): the BF fit ${JSON.stringify(f)} is within 1 px of the disk (${fx.true_bf_disk})`);
        const p = await page.evaluate(() => window.stem4d.profile());
        check(!mask || (p.bad_pixels && p.bad_pixels.hot && p.bad_pixels.hot.length >= 1),
          `${fx.name}: hot pixels found in the mean pattern are in the provenance (${JSON.stringify(p.bad_pixels)})`);
        noErrors(page, `${fx.name} fit`);
        await page.close();
      }
    }
    for (const fx of manifest.fixtures.filter((f) => f.implausible_bf_fit && f.root === 'fixtures' && !f.scan_shape).slice(0, 1)) {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf(fx.name));
      await openedAs(page, fx.files[0].split('/').pop());
      const s = await status(page);
      const shown = await page.textContent('#geometry .geo-warn');
      check(s.fit && s.fit.warning && shown.includes(s.fit.warning), `${fx.name}: an implausible fit is warned on the page: ${JSON.stringify(s.fit)} / "${shown}"`);
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 4. geometry you can read and type
  await scenario('4 geometry', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const { fit } = await status(page);
      // Typed radius in px: the image is the exact BF sum with that radius.
      await page.fill('#geometry input[data-k=radius]:not([data-u])', '2.5');
      await page.press('#geometry input[data-k=radius]:not([data-u])', 'Enter');
      await rendered(page);
      let v = await page.evaluate(() => window.stem4d.view());
      check(v.image.radius === 2.5, `a typed radius sets the detector: ${v.image.radius}`);
      const exact = await page.evaluate(async ({ c, r }) => {
        const p = await window.stem4d.product({ kind: 'bf', center: c, radius: r, maskBadPixels: true });
        const v = window.stem4d.view();
        return String(p.data[v.image.cursor[0] * p.shape[1] + v.image.cursor[1]]);
      }, { c: v.image.center, r: 2.5 });
      const hovered = await valueAtCursor(page);
      check(hovered === exact, `the typed detector's image is the exact BF sum (${hovered} vs ${exact})`);
      // In mrad, through the calibration (pixel 75 µm at 0.115 m: 0.652 mrad per pixel).
      const step = 75e-6 / 0.115 * 1e3;
      await page.fill('#geometry input[data-k=radius][data-u=mrad]', (3 * step).toFixed(4));
      await page.press('#geometry input[data-k=radius][data-u=mrad]', 'Enter');
      await rendered(page);
      v = await page.evaluate(() => window.stem4d.view());
      check(Math.abs(v.image.radius - 3) < 0.01, `a radius typed in mrad sets ${3 * step} mrad = 3 px: ${v.image.radius}`);
      const centreTyped = [fit.center[0] + 1, fit.center[1] - 1];
      await page.fill('#geometry input[data-k=cr]', String(centreTyped[0]));
      await page.press('#geometry input[data-k=cr]', 'Tab');
      await page.fill('#geometry input[data-k=cc]', String(centreTyped[1]));
      await page.press('#geometry input[data-k=cc]', 'Enter');
      await rendered(page);
      v = await page.evaluate(() => window.stem4d.view());
      check(Math.abs(v.image.center[0] - centreTyped[0]) < 0.01 && Math.abs(v.image.center[1] - centreTyped[1]) < 0.01, `a typed centre moves the detector: ${v.image.center}`);
      // Presets come from the fit, never from the dragged or typed disk.
      await page.selectOption('#image-kind', 'adf');
      await rendered(page);
      v = await page.evaluate(() => window.stem4d.view());
      check(Math.abs(v.image.inner - Math.round(1.2 * fit.radius * 100) / 100) < 0.011 && v.image.center[0] === fit.center[0] && v.image.center[1] === fit.center[1],
        `the ADF preset is made from the fit (${JSON.stringify(fit)}), not the typed disk: inner ${v.image.inner} at ${v.image.center}`);
      const shownInner = await page.inputValue('#geometry input[data-k=inner]:not([data-u])');
      check(Math.abs(parseFloat(shownInner) - v.image.inner) < 0.01, `the annulus's inner radius is shown as a number: ${shownInner}`);
      // Reset to the fit.
      await page.selectOption('#image-kind', 'disk');
      await page.fill('#geometry input[data-k=radius]:not([data-u])', '1');
      await page.press('#geometry input[data-k=radius]:not([data-u])', 'Enter');
      await page.click('#geometry .geo-reset');
      await rendered(page);
      v = await page.evaluate(() => window.stem4d.view());
      check(v.image.radius === fit.radius && v.image.center[0] === fit.center[0], `reset puts the detector back on the fitted disk: ${v.image.radius} at ${v.image.center}`);
      // The pattern's readout in mrad from the beam centre.
      const pbox = await page.locator('#pattern-canvas').boundingBox();
      const [kr, kc] = [13, 11];
      const scale = Math.min(pbox.width / kc, pbox.height / kr);
      const at = [2, 3];
      await page.mouse.move(pbox.x + pbox.width / 2 + (at[1] + 0.5 - kc / 2) * scale, pbox.y + pbox.height / 2 + (at[0] + 0.5 - kr / 2) * scale);
      await page.waitForFunction(() => document.getElementById('pattern-readout').textContent.includes('mrad'), null, { timeout: 5000 }).catch(() => {});
      const readout = await page.textContent('#pattern-readout');
      const want = Math.hypot(at[0] - fit.center[0], at[1] - fit.center[1]) * step;
      const m = /\|θ\| = ([-\d.e+]+) mrad from the beam centre/.exec(readout);
      check(m && Math.abs(parseFloat(m[1]) - want) < 1e-3 * Math.max(1, want), `the pattern readout gives the angle from the beam centre: "${readout}" (want ${want.toFixed(4)} mrad)`);
      // An annulus off the detector is warned: HAADF outer typed beyond the 73 × 63 detector.
      await page.evaluate(() => window.stem4d.open([], { synthetic: [4, 5, 73, 63] }));
      await page.selectOption('#image-kind', 'haadf');
      await rendered(page);
      const clean = await page.textContent('#geometry .geo-warn');
      check(!/runs .* off/.test(clean), `the HAADF preset on 73 × 63 stays on the detector: "${clean}"`);
      await page.fill('#geometry input[data-k=outer]:not([data-u])', '45');
      await page.press('#geometry input[data-k=outer]:not([data-u])', 'Enter');
      await rendered(page);
      const warn = await page.textContent('#geometry .geo-warn');
      check(/off the 73×63 detector/.test(warn), `an annulus running off the 73 × 63 detector is warned: "${warn}"`);
      noErrors(page, 'geometry');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 5. display limits that never silently fail
  // C-DISPLAY: absolute limits in data units on every scale, and notes where they cannot apply.
  await scenario('5 limits', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const labels = await page.evaluate(() => [...document.querySelectorAll('#image-panel .display .lim span')].map((e) => e.textContent));
      check(labels.join(',') === 'lo %,hi %', `percentile limits are labelled: ${labels}`);
      const st = await page.evaluate(() => window.stem4d.stats('image'));
      await page.selectOption('#image-panel .display .mode', 'absolute');
      await rendered(page);
      const abs = await page.evaluate(() => ({ labels: [...document.querySelectorAll('#image-panel .display .lim span')].map((e) => e.textContent), v: window.stem4d.view().image.display.limits }));
      check(abs.labels.join(',') === 'lo,hi' && abs.v.mode === 'absolute' && Math.abs(abs.v.lo - st.lo) <= 1e-6 * Math.abs(st.lo) + 1e-9,
        `absolute limits take the values shown in the panel's units: ${JSON.stringify(abs)} (from ${st.lo}…${st.hi})`);
      // Log scale with absolute limits in the data's units is not a black image.
      await page.selectOption('#image-panel .display .scale', 'log');
      await rendered(page);
      await page.waitForTimeout(300);
      const logShot = await page.locator('#image-panel .frame').screenshot();
      const bright = await t.meanLevel(page, logShot);
      check(bright > 20, `log scale with absolute limits shows the image (mean level ${bright.toFixed(1)})`);
      const logStats = await page.evaluate(() => window.stem4d.stats('image'));
      check(Math.abs(logStats.lo - abs.v.lo) <= 1e-3 * Math.abs(abs.v.lo) + 1e-6, `log scale keeps the absolute limits in data units: ${logStats.lo} vs ${abs.v.lo}`);
      // Limits outside the data are explained inline instead of a silent black image.
      await page.fill('#image-panel .display input.hi', String(st.max * 20));
      await page.press('#image-panel .display input.hi', 'Enter');
      await page.fill('#image-panel .display input.lo', String(st.max * 10));
      await page.press('#image-panel .display input.lo', 'Enter');
      await rendered(page);
      await page.waitForFunction(() => document.querySelector('#image-panel .display .note').textContent.length > 0, null, { timeout: 5000 }).catch(() => {});
      const note = await page.textContent('#image-panel .display .note');
      check(note.length > 0, `absolute limits beyond the data are explained: "${note}"`);
      // lo ≥ hi is refused inline and not applied.
      const vBefore = await page.evaluate(() => window.stem4d.view().image.display.limits);
      await page.fill('#image-panel .display input.lo', String(vBefore.hi + 1));
      await page.press('#image-panel .display input.lo', 'Enter');
      const refused = await page.evaluate(() => ({ note: document.querySelector('#image-panel .display .note').textContent, lim: window.stem4d.view().image.display.limits }));
      check(/below/.test(refused.note) && refused.lim.lo === vBefore.lo, `lo ≥ hi is refused and said inline: ${JSON.stringify(refused)}`);
      // The limits are dragged on the histogram.
      await page.selectOption('#image-panel .display .mode', 'percentile');
      await page.selectOption('#image-panel .display .scale', 'linear');
      await rendered(page);
      await page.waitForTimeout(400);
      const hb = await page.locator('#image-panel canvas.hist').boundingBox();
      await page.mouse.move(hb.x + hb.width - 2, hb.y + hb.height / 2);
      await page.mouse.down();
      await page.mouse.move(hb.x + hb.width * 0.6, hb.y + hb.height / 2, { steps: 4 });
      await page.mouse.up();
      await rendered(page);
      const dragged = await page.evaluate(() => window.stem4d.view().image.display.limits);
      const st2 = await page.evaluate(() => window.stem4d.stats('image'));
      check(dragged.mode === 'absolute' && dragged.hi < st.max && dragged.hi > st.min, `dragging the upper marker on the histogram sets an absolute limit: ${JSON.stringify(dragged)} (data ${st.min}…${st.max})`);
      check(Math.abs(st2.hi - dragged.hi) <= 1e-3 * Math.abs(dragged.hi) + 1e-6, `the engine draws with the dragged limit: ${st2.hi}`);
      noErrors(page, 'limits');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 6. settings that apply
  await scenario('6 settings', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      await page.selectOption('#bin', '2');
      await page.waitForFunction(() => /re-reading/.test(window.stem4d.status().notice || ''), null, { timeout: 10000 }).catch(() => {});
      const notice = (await status(page)).notice;
      await page.waitForFunction(async () => !window.stem4d.status().loading && (await window.stem4d.profile()).bin === 2, null, { timeout: 60000 }).catch(() => {});
      let p = await page.evaluate(() => window.stem4d.profile());
      check(p.bin === 2 && /re-reading/.test(notice || ''), `changing the bin after a load re-reads with bin 2 and says so (bin ${p.bin}, "${notice}")`);
      await page.uncheck('#bad-pixels');
      await page.waitForFunction(async () => !window.stem4d.status().loading && (await window.stem4d.profile()).mask_bad_pixels === false, null, { timeout: 60000 }).catch(() => {});
      p = await page.evaluate(() => window.stem4d.profile());
      check(p.mask_bad_pixels === false, 'unticking bad-pixel masking after a load applies it');
      // A GPU memory budget re-reads within it: the plan is in the provenance, the image drawn.
      await page.selectOption('#memory-budget', '268435456');
      await page.waitForFunction(async () => !window.stem4d.status().loading && (await window.stem4d.profile()).memory_budget === 268435456, null, { timeout: 60000 }).catch(() => {});
      p = await page.evaluate(() => window.stem4d.profile());
      // The acquisition fits compressed: its counts at their bit widths, and the ratio said.
      await page.waitForFunction(() => /compressed resident/.test(document.getElementById('profile').textContent), null, { timeout: 30000 }).catch(() => {});
      const shown = await page.evaluate(() => document.getElementById('profile').textContent);
      check(p.memory_plan && p.memory_plan.kind === 'compressed' && p.compressed && p.compressed.ratio > 1
        && /memory plan/.test(shown) && /compressed resident/.test(shown),
        `choosing 256 MiB of GPU memory re-reads within it and says the plan (${p.memory_plan && p.memory_plan.kind})`);
      // Another plan picked in the load profile reads it again along that plan.
      await page.evaluate(() => { document.getElementById('profile-box').open = true; });
      await page.click('#profile button[data-plan="streaming"]');
      await page.waitForFunction(async () => !window.stem4d.status().loading && ((await window.stem4d.profile()).memory_plan || {}).kind === 'streaming', null, { timeout: 60000 }).catch(() => {});
      p = await page.evaluate(() => window.stem4d.profile());
      check(p.memory_plan && p.memory_plan.kind === 'streaming' && p.memory_budget === 268435456,
        `picking the streaming plan in the load profile re-reads along it (${p.memory_plan && p.memory_plan.kind})`);
      await rendered(page);
      // Cancel during a streamed image's pass over the files stops the pass, keeps the
      // acquisition open and says so; the next image is drawn. (A disk about the BF centre
      // comes from the ring sums at once: this one is moved off it.)
      const stopped = await page.evaluate(async () => {
        // Nothing in flight first (closing the profile may redraw): the redraw below is then
        // sent at once, before the cancel, and the cancel applies to it.
        await window.stem4d.rendered();
        const im = window.stem4d.view().image;
        const r = im.radius || 4;
        const off = [im.center[0] + 0.5, im.center[1] + 0.25];
        const pending = window.stem4d.setView({ image: { center: off, radius: r + 1 } });
        document.getElementById('cancel').click();
        let said = null;
        try { await pending; } catch (e) { said = e.message; }
        let next = null;
        try { await window.stem4d.setView({ image: { radius: r } }); } catch (e) { next = e.message; }
        return { said, next, s: window.stem4d.status() };
      });
      check(/^cancelled while/.test(stopped.said || '') && /cancelled/.test(stopped.s.notice || '')
        && stopped.s.open && !stopped.s.error && stopped.next === null,
        `Cancel stops a streamed image's pass and keeps the acquisition open: ${JSON.stringify(stopped)}`);
      await page.evaluate(() => { document.getElementById('profile-box').open = false; });
      await rendered(page);
      await page.selectOption('#memory-budget', '');
      await page.waitForFunction(async () => !window.stem4d.status().loading && (await window.stem4d.profile()).memory_budget == null, null, { timeout: 60000 }).catch(() => {});
      p = await page.evaluate(() => window.stem4d.profile());
      check(p.memory_plan && p.memory_plan.kind === 'resident', `all the GPU memory again: resident (${p.memory_plan && p.memory_plan.kind})`);
      // Scan-shape fields belong to the files they were typed for.
      await choose(page, '#open-files', [bad('empad_no_shape_in_name/empad_frames.raw')]);
      await page.waitForFunction(() => /scan/.test(window.stem4d.status().error || ''), null, { timeout: 30000 });
      await page.fill('#scan-rows', '1');
      await page.fill('#scan-cols', '2');
      await page.press('#scan-cols', 'Enter');
      await openedAs(page, 'empad_frames.raw');
      check((await status(page)).open.includes('empad_frames.raw'), 'a scan shape typed after the error opens the file it was typed for');
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      const after = await page.evaluate(() => ({ rows: document.getElementById('scan-rows').value, s: window.stem4d.status(), shape: null }));
      check(after.s.open && !after.s.error && after.rows === '', `the next files open with their own scan shape; the typed one is cleared: ${JSON.stringify(after)}`);
      noErrors(page, 'settings');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 7. layout and figures, 8. calibration
  await scenario('7 layout and figures', async () => {
    for (const [w, h] of [[1280, 800], [1600, 1000], [1920, 1080]]) {
      const page = await freshPage({ width: w, height: h });
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      await page.waitForTimeout(500);
      const lay = await page.evaluate(() => {
        const vis = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
        const out = [];
        for (const e of document.querySelectorAll('button, select, input:not([type=file]), canvas.hist, canvas.cbar, .stage')) {
          // Controls in a dialog or a closed disclosure (the load profile's plan buttons)
          // are not on screen, whatever boxes the browser keeps for them.
          const shut = e.closest('details:not([open])');
          if (!vis(e) || e.closest('dialog') || (shut && !e.closest('summary'))) continue;
          const r = e.getBoundingClientRect();
          if (r.left < -0.5 || r.top < -0.5 || r.right > innerWidth + 0.5 || r.bottom > innerHeight + 0.5) out.push(`${e.id || e.className || e.tagName} ${JSON.stringify([r.left, r.top, r.right, r.bottom].map(Math.round))}`);
        }
        const frames = ['image', 'pattern'].map((p) => {
          const f = document.getElementById(p + '-canvas').parentElement.getBoundingClientRect();
          const s = document.getElementById(p + '-canvas').parentElement.parentElement.getBoundingClientRect();
          return { f: [f.width, f.height], s: [s.width, s.height] };
        });
        return { out, scroll: document.scrollingElement.scrollHeight - innerHeight, frames };
      });
      check(lay.out.length === 0 && lay.scroll <= 0, `${w}×${h}: every control fits the window (outside: ${lay.out.join('; ') || 'none'}, scroll ${lay.scroll})`);
      // The frames have the planes' aspects (5 × 7 scan, 13 × 11 detector) and fill their stage
      // in one direction: no wasted band inside the image.
      const [fi, fp] = lay.frames;
      const aspectOk = (fr, rows, cols) => Math.abs(fr.f[0] / fr.f[1] - cols / rows) < 0.02 && (Math.abs(fr.f[0] - fr.s[0]) <= 1 || Math.abs(fr.f[1] - fr.s[1]) <= 1);
      check(aspectOk(fi, 5, 7) && aspectOk(fp, 13, 11), `${w}×${h}: images keep their aspect and fill their stage (${JSON.stringify(lay.frames)})`);
      await t.compareGolden(page, 'body', `layout-${w}x${h}`);
      if (w === 1280) {
        // The scale bar lies on the image: the overlay's bar is inside the frame.
        const bar = await page.evaluate(() => {
          const c = document.getElementById('image-overlay');
          const g = c.getContext('2d');
          const d = g.getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 0; i < d.length; i += 4) if (d[i] === 255 && d[i + 1] === 255 && d[i + 2] === 255 && d[i + 3] === 255) n++;
          return n;
        });
        check(bar > 20, `the scale bar is drawn on the image (${bar} white pixels on the overlay)`);
        // Colour bars carry ticks and units.
        const cbarInk = await page.evaluate(() => {
          const c = document.querySelector('#image-panel canvas.cbar');
          const d = c.getContext('2d').getImageData(0, 14, c.width, c.height - 14).data;
          const u = c.getContext('2d').getImageData(180, 0, c.width - 180, 14).data;
          let m = 0; for (let i = 3; i < u.length; i += 4) if (u[i] > 0) m++;
          if (m < 10) return 0;
          let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
          return n;
        });
        check(cbarInk > 50, `the colour bar has tick labels under it and units beside it (${cbarInk} pixels of ink)`);
        // A figure at a chosen size, from the dialog.
        await page.click('#export-figure');
        await page.fill('#figure-width', '900');
        await page.fill('#figure-title', 'BF of arina_u16');
        const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }).catch(() => null), page.click('#figure-save')]);
        check(dl && /figure\.png$/.test(dl.suggestedFilename()), `Figure… downloads a PNG (${dl && dl.suggestedFilename()})`);
        if (dl) {
          const file = path.join(tmp, 'figure.png');
          await dl.saveAs(file);
          const png = fs.readFileSync(file);
          const width = png.readUInt32BE(16), height = png.readUInt32BE(20);
          check(width === 900 && height > 600, `the figure is 900 px wide as chosen (${width}×${height})`);
        }
        // 8. Calibration from the files, each value with its source.
        const cal = await page.evaluate(() => [...document.querySelectorAll('#calibration span')].map((s) => [s.textContent, s.title]));
        const text = cal.map((c) => c[0]).join('');
        check(/300 kV/.test(text) && /CL 115 mm/.test(text) && /75 µm/.test(text) && /0\.25 nm/.test(text) && /mrad/.test(text) && cal.every((c) => /from|pixels/.test(c[1])),
          `calibration shown with sources: ${JSON.stringify(cal)}`);
        noErrors(page, 'layout');
      }
      await page.close();
    }
  });
  await scenario('8 calibration', async () => {
    {
      // The master's detector distance gives mrad without a companion; the companion's scan
      // rotation pre-fills the DPC rotation.
      const page = await freshPage();
      await page.fill('#scan-rows', '4'); await page.fill('#scan-cols', '6');
      await choose(page, '#open-files', filesOf('arina_u8'));
      await openedAs(page, 'arina_u8_master.h5');
      const info = await page.evaluate(() => ({ cal: [...document.querySelectorAll('#calibration span')].map((s) => [s.textContent, s.title]) }));
      const det = info.cal.find((c) => /det\. step/.test(c[0]));
      check(det && /mrad/.test(det[0]) && /detector_distance|distance/.test(det[1]), `without a companion, mrad come from the master's detector distance: ${JSON.stringify(info.cal)}`);
      for (const fx of manifest.fixtures.filter((f) => f.calibration && f.calibration.scan_rotation_deg != null)) {
        await choose(page, '#open-files', filesOf(fx.name));
        await openedAs(page, fx.files[0].split('/').pop());
        const rot = parseFloat(await page.inputValue('#rotation'));
        check(Math.abs(rot - fx.calibration.scan_rotation_deg) < 1e-9, `${fx.name}: the file's scan rotation pre-fills the DPC rotation (${rot})`);
      }
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 9. keyboard and accessibility
  await scenario('9 keyboard', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const untitled = await page.evaluate(() => [...document.querySelectorAll('button, select, input:not([type=file])')]
        .filter((e) => !e.closest('dialog') && !(e.title || e.closest('[title]')?.title)).map((e) => e.id || e.className || e.outerHTML.slice(0, 40)));
      check(untitled.length === 0, `every control has a tooltip (missing: ${untitled.join(', ')})`);
      // Tab reaches every visible control and both panels.
      const order = [];
      await page.focus('#open-files');
      for (let i = 0; i < 80; i++) {
        const id = await page.evaluate(() => { const e = document.activeElement; return e.id || (e.dataset.k ? e.dataset.k + (e.dataset.u || '') : '') || (e.className && String(e.className)) || e.tagName; });
        if (order.includes(id) && id === 'open-files' && i > 0) break;
        order.push(id);
        await page.keyboard.press('Tab');
      }
      const wanted = await page.evaluate(() => [...document.querySelectorAll('button, select, input:not([type=file]), canvas[tabindex="0"]')]
        .filter((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && !e.disabled && !e.closest('dialog') && !e.closest('details:not([open])'); })
        .map((e) => e.id || (e.dataset.k ? e.dataset.k + (e.dataset.u || '') : '') || String(e.className)));
      const missed = wanted.filter((w) => !order.includes(w));
      check(missed.length === 0, `Tab reaches every control and both panels (missed: ${missed.join(', ')}; order ${order.join(' ')})`);
      const canvases = await page.evaluate(() => ['image', 'pattern'].map((p) => { const c = document.getElementById(p + '-canvas'); return [c.tabIndex, c.getAttribute('aria-label')]; }));
      check(canvases.every(([ti, label]) => ti === 0 && label && label.length > 10), `the panels' canvases are focusable and labelled: ${JSON.stringify(canvases)}`);
      // Arrows move the cursor when a panel has focus, also the pattern panel; not in the preset menu.
      await page.focus('#pattern-canvas');
      const c0 = (await page.evaluate(() => window.stem4d.view())).image.cursor;
      await page.keyboard.press('ArrowLeft');
      const c1 = (await page.evaluate(() => window.stem4d.view())).image.cursor;
      check(c1[1] === Math.max(0, c0[1] - 1), `ArrowLeft on the focused pattern panel moves the cursor: ${c0} → ${c1}`);
      await page.focus('#image-kind');
      await page.keyboard.press('ArrowDown');
      const c2 = (await page.evaluate(() => window.stem4d.view())).image.cursor;
      check(c2[0] === c1[0] && c2[1] === c1[1], `arrows in the preset menu leave the cursor alone: ${c2}`);
      await page.focus('#image-canvas');
      await page.keyboard.press('a');
      await rendered(page);
      check((await page.evaluate(() => window.stem4d.view())).preset === 'abf', 'A selects the ABF preset');
      await page.keyboard.press('l');
      check((await page.evaluate(() => window.stem4d.view())).image.display.scale === 'log', 'L turns the focused panel to log scale');
      await page.evaluate(() => window.stem4d.setView({ image: { display: { zoom: 3, pan: [1, 1] } } }));
      await page.focus('#image-canvas');
      await page.keyboard.press('f');
      const z = (await page.evaluate(() => window.stem4d.view())).image.display;
      check(z.zoom === 1 && z.pan === null, `F fits the panels to their windows: ${JSON.stringify(z)}`);
      await page.keyboard.press('?');
      check(await page.evaluate(() => document.getElementById('shortcuts').open), '? shows the list of shortcuts');
      await page.keyboard.press('Escape');
      noErrors(page, 'keyboard');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 10. views peers have
  await scenario('10 views', async () => {
    {
      const page = await freshPage();
      const seen = [];
      await page.exposeFunction('stageSeen', (s) => seen.push(s));
      await page.evaluate(() => new MutationObserver(() => window.stageSeen(document.getElementById('progress-text').textContent))
        .observe(document.getElementById('progress-text'), { childList: true, characterData: true, subtree: true }));
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const stages = ['reading metadata', 'reading, decoding and uploading', 'finding the BF disk', 'drawing the first image'];
      const missing = stages.filter((s) => !seen.some((x) => x.startsWith(s)));
      check(missing.length === 0, `the progress names every stage until the first image (missing: ${missing.join(', ')}; seen ${[...new Set(seen.map((x) => x.split(':')[0]))].join(' | ')})`);
      // C-DPC-POLAR: the value under the cursor is |g| or θ of the DPC product there.
      for (const kind of ['commag', 'comdir']) {
        await page.selectOption('#image-kind', kind);
        await rendered(page);
        const r = await page.evaluate(async () => {
          const v = window.stem4d.view();
          const [cr, cc] = v.image.cursor;
          const dpc = await window.stem4d.product({ kind: 'dpc', rotation: v.image.rotation, flip: v.image.flip, maskBadPixels: true });
          const n = dpc.shape[1] * dpc.shape[2];
          const i = cr * dpc.shape[2] + cc;
          return { value: await window.stem4d.valueAt('image', cr, cc), gr: dpc.data[i], gc: dpc.data[n + i], stats: await window.stem4d.stats('image') };
        });
        const want = kind === 'commag' ? Math.hypot(r.gr, r.gc) : Math.atan2(r.gc, r.gr) * 180 / Math.PI;
        const tol = kind === 'commag' ? 1e-5 : 1e-3;
        const diff = kind === 'commag' ? Math.abs(r.value - want) : Math.abs(((r.value - want + 540) % 360) - 180);
        check(diff <= tol, `${kind}: the value under the cursor ${r.value} is ${want} from the DPC (${r.gr}, ${r.gc})`);
        check(r.stats.hi > r.stats.lo, `${kind} renders with limits ${r.stats.lo}…${r.stats.hi}`);
      }
      await page.selectOption('#image-kind', 'bf');
      await page.selectOption('#image-panel .display .scale', 'sqrt');
      await rendered(page);
      const sq = await page.evaluate(() => window.stem4d.stats('image'));
      check(sq.scale === 'sqrt' && sq.hi > sq.lo, `square-root scaling renders: ${JSON.stringify({ scale: sq.scale, lo: sq.lo, hi: sq.hi })}`);
      // C-MEM: the resident payload and the predicted peak are reported apart.
      await page.click('#profile-box summary');
      const prov = await page.evaluate(() => ({ text: document.getElementById('profile').innerText, peakTip: [...document.querySelectorAll('#profile tr')].find((r) => r.querySelector('th')?.textContent === 'peak during the load')?.title }));
      check(/resident payload/.test(prov.text) && /peak during the load/.test(prov.text) && /ms/.test(prov.text) && /read/.test(prov.text) && /payload plus/.test(prov.peakTip || ''),
        `the provenance panel is formatted, with units and what peak memory means (${prov.text.slice(0, 160).replace(/\s+/g, ' ')}…)`);
      noErrors(page, 'views');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 11. the DPC rotation found
  await scenario('11 DPC rotation', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      // C-DPC-ROTATION: what the engine finds for the ADF preset's annulus, asked through the API.
      const want = await page.evaluate(async () => {
        const f = window.stem4d.status().fit;
        const r = f.radius > 0 ? f.radius : 1;
        const round2 = (x) => Math.round(x * 100) / 100;
        const p = await window.stem4d.product({ kind: 'dpc-rotation', center: f.center, inner: round2(1.2 * r), outer: round2(Math.max(2.5 * r, 1.2 * r + 1)), maskBadPixels: true });
        return { shape: p.shape, dtype: p.dtype, data: Array.from(p.data) };
      });
      check(want.shape.join() === '3' && want.dtype === 'float64' && want.data[0] >= 0 && want.data[0] < 360 && (want.data[1] === 0 || want.data[1] === 1) && want.data[2] >= 0,
        `the dpc-rotation product is [theta_deg, flip, curl_energy]: ${JSON.stringify(want)}`);
      const found = async (page, what) => {
        try {
          await page.waitForFunction(() => /DPC rotation found/.test(window.stem4d.status().notice || ''), null, { timeout: 30000 });
        } catch (e) {
          throw new Error(`${what}: no rotation was found: ${JSON.stringify(await status(page))} ${page.errors.join(' | ')}`);
        }
      };
      const shown = (page) => page.evaluate(() => ({ v: window.stem4d.view(), field: document.getElementById('rotation').value, flip: document.getElementById('flip').checked }));
      const round2 = (x) => Math.round(x * 100) / 100;
      await page.click('#find-rotation');
      await found(page, 'find rot');
      await rendered(page);
      let s = await shown(page);
      check(s.v.image.rotation === round2(want.data[0]) && s.v.image.flip === (want.data[1] === 1) && s.v.preset === 'idpc'
        && parseFloat(s.field) === s.v.image.rotation && s.flip === s.v.image.flip,
        `find rot sets the rotation ${want.data[0]} and flip ${want.data[1]} on the iDPC view: ${JSON.stringify({ rotation: s.v.image.rotation, flip: s.v.image.flip, preset: s.v.preset, field: s.field })}`);
      const st = await page.evaluate(() => window.stem4d.stats('image'));
      check(st.hi > st.lo, `the iDPC with the rotation found is drawn (${st.lo}…${st.hi})`);
      // The keyboard: T finds it again after the rotation was typed away.
      await page.fill('#rotation', '0');
      await page.press('#rotation', 'Tab');
      await page.evaluate(() => document.getElementById('notice-close').click());
      await page.focus('#image-canvas');
      await page.keyboard.press('t');
      await found(page, 'T');
      s = await shown(page);
      check(s.v.image.rotation === round2(want.data[0]), `T finds the rotation again: ${s.v.image.rotation}`);
      // A scan cropped to one row has no cell to take a curl on: said, the view unchanged, and
      // the next search after the crop is removed works.
      await page.fill('#crop', '0:1,0:7');
      await page.press('#crop', 'Tab');
      await page.waitForFunction(async () => (await window.stem4d.profile()).scan_crop && !window.stem4d.status().loading, null, { timeout: 60000 });
      await rendered(page);
      await page.evaluate(() => window.stem4d.setView({ image: { rotation: 12.5 } }));
      await page.click('#find-rotation');
      await page.waitForFunction(() => window.stem4d.status().error, null, { timeout: 30000 }).catch(async () => {
        throw new Error(`the one-row search said nothing: ${JSON.stringify(await status(page))}`);
      });
      const failed = await status(page);
      s = await shown(page);
      check(/2 x 2/.test(failed.error) && /unchanged/.test(failed.error) && s.v.image.rotation === 12.5 && failed.open,
        `a one-row scan's search is refused and said, the view kept: ${JSON.stringify({ error: failed.error, rotation: s.v.image.rotation })}`);
      await page.fill('#crop', '');
      await page.press('#crop', 'Tab');
      await page.waitForFunction(async () => !(await window.stem4d.profile()).scan_crop && !window.stem4d.status().loading, null, { timeout: 60000 });
      await rendered(page);
      await page.click('#find-rotation');
      await found(page, 'after the refusal');
      s = await shown(page);
      check(s.v.image.rotation === round2(want.data[0]) && !(await status(page)).error, `after the refusal the uncropped scan's rotation is found again: ${s.v.image.rotation}`);
      noErrors(page, 'DPC rotation');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 12. the image as TIFF
  // A baseline TIFF read here, apart from the engine's writer: the first page's size, sample
  // type, values, pixels per unit and description.
  const readTiff = (b) => {
    if (b.toString('latin1', 0, 4) !== 'II*\0') throw new Error('not a little-endian TIFF');
    const ifd = b.readUInt32LE(4);
    const tags = {};
    const n = b.readUInt16LE(ifd);
    const size = { 1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 16: 8 };
    for (let i = 0; i < n; i++) {
      const e = ifd + 2 + 12 * i;
      const [tag, type, count] = [b.readUInt16LE(e), b.readUInt16LE(e + 2), b.readUInt32LE(e + 4)];
      const at = size[type] * count > 4 ? b.readUInt32LE(e + 8) : e + 8;
      const one = (k) => (type === 3 ? b.readUInt16LE(at + 2 * k) : type === 5 ? b.readUInt32LE(at + 8 * k) / b.readUInt32LE(at + 8 * k + 4) : b.readUInt32LE(at + 4 * k));
      tags[tag] = type === 2 ? b.toString('latin1', at, at + count - 1) : Array.from({ length: count }, (_, k) => one(k));
    }
    const [w, h, bits, format] = [tags[256][0], tags[257][0], tags[258][0], (tags[339] || [1])[0]];
    const raw = Buffer.concat(tags[273].map((o, k) => b.subarray(o, o + tags[279][k])));
    const read = { '1,32': (i) => raw.readUInt32LE(4 * i), '3,32': (i) => raw.readFloatLE(4 * i), '1,16': (i) => raw.readUInt16LE(2 * i) }[`${format},${bits}`];
    if (!read) throw new Error(`sample format ${format} of ${bits} bits`);
    return { w, h, bits, format, values: Array.from({ length: w * h }, (_, i) => read(i)), perUnit: tags[282] && tags[282][0], text: tags[270] };
  };
  const readNpy = (b) => {
    const len = b.readUInt16LE(8);
    const header = b.toString('latin1', 10, 10 + len);
    const data = b.subarray(10 + len);
    const descr = /'descr': '([^']+)'/.exec(header)[1];
    const k = { '<u8': 8, '<f4': 4, '<f8': 8 }[descr];
    const one = { '<u8': (i) => Number(data.readBigUInt64LE(8 * i)), '<f4': (i) => data.readFloatLE(4 * i), '<f8': (i) => data.readDoubleLE(8 * i) }[descr];
    return Array.from({ length: data.length / k }, (_, i) => one(i));
  };
  await scenario('12 TIFF', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const save = async (button) => {
        const [d] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click(button)]);
        return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
      };
      for (const preset of ['bf', 'idpc']) {
        await page.selectOption('#image-kind', preset);
        await rendered(page);
        const tif = await save('#export-tiff');
        const npy = await save('#export-npy');
        const t = readTiff(tif.bytes);
        const want = readNpy(npy.bytes);
        const float = preset === 'idpc';
        const same = t.values.length === want.length && t.values.every((v, i) => (float ? v === Math.fround(want[i]) : v === want[i]));
        check(/\.tif$/.test(tif.name) && t.w === 7 && t.h === 5 && t.format === (float ? 3 : 1) && t.bits === 32 && same,
          `${preset}: Image TIFF holds the image's values (${t.w}×${t.h}, format ${t.format}, ${t.bits} bits, same as .npy ${same})`);
        check(Math.abs(t.perUnit * 0.25 - 1) < 1e-8 && /^ImageJ=/.test(t.text) && /unit=nm/.test(t.text),
          `${preset}: the TIFF carries the 0.25 nm scan step for ImageJ (${t.perUnit} px per unit, "${t.text.replace(/\n/g, ' | ')}")`);
      }
      noErrors(page, 'TIFF');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 13. line profiles
  await scenario('13 line profile', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      // Along a row through pixel centres the profile is the exact values the hover reads.
      const api = await page.evaluate(async () => {
        const p = await window.stem4d.lineProfile('image', [2, 0], [2, 6]);
        const exact = [];
        for (let c = 0; c < 7; c++) exact.push(Number(await window.stem4d.valueAt('image', 2, c)));
        return { p, exact, open: document.getElementById('profile-dialog').open };
      });
      check(api.p.values.length === 7 && api.p.values.every((v, i) => v === api.exact[i]) && api.p.units === 'nm'
        && Math.abs(api.p.distance[6] - 1.5) < 1e-12 && api.open,
        `a profile along row 2 is the row's exact values over 6 × 0.25 nm: ${JSON.stringify(api)}`);
      // The mouse: the line button, a drag on the image, the plot, the CSV.
      const drawOn = async (panel) => {
        await page.click(`#line-${panel}`);
        const box = await page.locator(`#${panel}-canvas`).boundingBox();
        await page.mouse.move(box.x + box.width * 0.35, box.y + box.height * 0.4);
        await page.mouse.down();
        await page.mouse.move(box.x + box.width * 0.65, box.y + box.height * 0.6, { steps: 6 });
        await page.mouse.up();
        await page.waitForFunction((p) => document.getElementById('profile-caption').textContent.startsWith(p), panel, { timeout: 20000 });
        const [d] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), page.click('#profile-csv')]);
        return { name: d.suggestedFilename(), csv: fs.readFileSync(await d.path(), 'utf8') };
      };
      for (const [panel, unit] of [['image', 'nm'], ['pattern', 'mrad']]) {
        const { name, csv } = await drawOn(panel);
        const lines = csv.trim().split('\n');
        const rows = lines.slice(1).map((l) => l.split(',').map(Number));
        const plotted = await page.evaluate(() => {
          const c = document.getElementById('profile-plot');
          const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let lit = 0;
          for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0) lit++;
          return lit;
        });
        check(name.endsWith(`-${panel}-profile.csv`) && lines[0] === `distance_${unit},value` && rows.length >= 2
          && rows.every((r) => r.length === 2 && r.every(Number.isFinite)) && rows[0][0] === 0 && plotted > 100,
          `a line drawn on the ${panel} gives a plot and a CSV in ${unit} (${name}: ${lines.length - 1} samples, ${plotted} plotted pixels)`);
      }
      await page.click('#profile-close');
      const closed = await page.evaluate(() => !document.getElementById('profile-dialog').open);
      check(closed, 'Close removes the profile');
      noErrors(page, 'line profile');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 14. view files and reports
  await scenario('14 view and report', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      await page.selectOption('#image-kind', 'adf');
      await page.evaluate(() => window.stem4d.setView({ image: { cursor: [1, 5], display: { cmap: 'viridis', scale: 'sqrt' } }, pattern: { source: 'mean' } }));
      await rendered(page);
      const saved = await page.evaluate(() => JSON.stringify({ view: window.stem4d.view(), preset: document.getElementById('image-kind').value }));
      const save = async (button) => {
        const [d] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click(button)]);
        const file = path.join(tmp, d.suggestedFilename());
        fs.writeFileSync(file, fs.readFileSync(await d.path()));
        return file;
      };
      const viewFile = await save('#save-state');
      const report = await save('#save-report');
      const html = fs.readFileSync(report, 'utf8');
      check(/-report\.html$/.test(report) && (html.match(/src="data:image\/png;base64,/g) || []).length === 2
        && /annulus/.test(html) && /viridis, sqrt scale/.test(html) && /Provenance/.test(html) && /id="stem4d-view"/.test(html),
        `the report holds both panels, the detector, the display and the provenance (${html.length} bytes)`);
      for (const file of [viewFile, report]) {
        await page.selectOption('#image-kind', 'bf');
        await page.evaluate(() => window.stem4d.setView({ image: { cursor: [0, 0], display: { cmap: 'inferno', scale: 'linear' } }, pattern: { source: 'cursor' } }));
        await rendered(page);
        const [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 10000 }), page.click('#load-state-button')]);
        await chooser.setFiles(file);
        await page.waitForFunction((want) => JSON.stringify({ view: window.stem4d.view(), preset: document.getElementById('image-kind').value }) === want, saved, { timeout: 20000 })
          .catch(() => {});
        const back = await page.evaluate(() => JSON.stringify({ view: window.stem4d.view(), preset: document.getElementById('image-kind').value }));
        check(back === saved && !(await status(page)).error, `Load view… on the ${path.extname(file)} restores the view exactly${back === saved ? '' : `: ${back} vs ${saved}`}`);
      }
      // Another file is refused by name and the view kept.
      const stray = path.join(tmp, 'notes.html');
      fs.writeFileSync(stray, '<html><body>notes</body></html>');
      const [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 10000 }), page.click('#load-state-button')]);
      await chooser.setFiles(stray);
      await page.waitForFunction(() => window.stem4d.status().error, null, { timeout: 10000 }).catch(() => {});
      const refused = await status(page);
      check(/notes\.html/.test(refused.error || '') && /not a stem4d report/.test(refused.error || '') && refused.open,
        `an HTML file that is no report is refused by name: ${refused.error}`);
      noErrors(page, 'view and report');
      await page.close();
    }
  });

  // ---------------------------------------------------------------- 15. prepared acquisitions
  await scenario('15 prepared', async () => {
    {
      const page = await freshPage();
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      await rendered(page);
      const asked = [{ kind: 'total' }, { kind: 'bf', center: [6.5, 5.5], radius: 3 }, { kind: 'com' }, { kind: 'mean-dp' }];
      const products = () => page.evaluate(async (asked) => {
        const out = [];
        for (const p of asked) {
          const a = await window.stem4d.product(p);
          out.push(Array.from(new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength)).join(','));
        }
        return out;
      }, asked);
      const want = await products();
      // Where the browser has no file picker (or it is not wanted), the file downloads.
      await page.evaluate(() => { window.showSaveFilePicker = undefined; });
      const [d] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#save-prepared')]);
      const file = path.join(tmp, d.suggestedFilename());
      fs.writeFileSync(file, fs.readFileSync(await d.path()));
      const native = fs.readFileSync(path.join(ROOT, 'tests/fixtures/data/arina_u16.stem4d'));
      // The container's description: at the offset and length the header holds (docs/PREPARED.md).
      const described = (buf) => {
        const off = Number(buf.readBigUInt64LE(16)), len = Number(buf.readBigUInt64LE(24));
        return { off, json: JSON.parse(buf.subarray(off, off + len).toString('utf8')) };
      };
      const saved = fs.readFileSync(file);
      const [a, b] = [described(saved), described(native)];
      const { session, ...rest } = a.json;
      check(/arina_u16_master\.stem4d$/.test(file) && a.off === b.off && saved.subarray(0, 16).equals(native.subarray(0, 16))
        && saved.subarray(4096, a.off).equals(native.subarray(4096, b.off)) && JSON.stringify(rest) === JSON.stringify(b.json),
        `Prepared .stem4d downloads the blocks and description stem4d prepare writes (${d.suggestedFilename()}, ${saved.length} bytes)`);
      // (The products above asked for no masking: the acquisition is resident unmasked now.)
      const fit = (await status(page)).fit;
      const near = (x, y) => Math.abs(x - y) <= 0.005;
      check(session && session.bin === 1 && session.mask_bad_pixels === false && session.bf_fit
        && near(session.bf_fit[0], fit.center[0]) && near(session.bf_fit[1], fit.center[1]) && near(session.bf_fit[2], fit.radius),
        `and the view's settings: bin, masking and the fitted BF disk (${JSON.stringify(session)}, fit ${JSON.stringify(fit)})`);
      await choose(page, '#open-files', [file]);
      await openedAs(page, 'arina_u16_master.stem4d');
      await rendered(page);
      const info = await page.evaluate(async () => (await window.stem4d.profile()).files);
      const back = await products();
      check(back.every((b, k) => b === want[k]),
        `the prepared file reopens with the products of its files, byte for byte (${JSON.stringify(info)})`);
      // Saved with bin 2: reopened alone (the bin set back to 1 meanwhile), it is viewed binned
      // again, and the header says so.
      await choose(page, '#open-files', filesOf('arina_u16'));
      await openedAs(page, 'arina_u16_master.h5');
      // (The first file reopened unmasked, as saved, and set the box so: masking on again.)
      await page.check('#bad-pixels');
      await page.waitForFunction(() => !window.stem4d.status().loading && /bad pixels masked/.test(document.getElementById('drop-hint').textContent), null, { timeout: 60000 });
      await page.selectOption('#bin', '2');
      await page.waitForFunction(() => !window.stem4d.status().loading && /bin 2/.test(document.getElementById('drop-hint').textContent), null, { timeout: 60000 });
      await rendered(page);
      const binned = await page.evaluate(() => window.stem4d.stats('image'));
      const [d2] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#save-prepared')]);
      const file2 = path.join(tmp, 'binned_' + d2.suggestedFilename());
      fs.writeFileSync(file2, fs.readFileSync(await d2.path()));
      await page.selectOption('#bin', '1');
      await page.waitForFunction(() => !window.stem4d.status().loading && !/bin 2/.test(document.getElementById('drop-hint').textContent), null, { timeout: 60000 });
      await choose(page, '#open-files', [file2]);
      await openedAs(page, path.basename(file2));
      await rendered(page);
      const profile = await page.evaluate(() => window.stem4d.profile());
      const again = await page.evaluate(() => window.stem4d.stats('image'));
      const s2 = await status(page);
      check(profile.bin === 2 && profile.mask_bad_pixels === true && await page.inputValue('#bin') === '2' && /opened with the settings it was saved with: bin 2/.test(s2.notice || '')
        && again.lo === binned.lo && again.hi === binned.hi && again.max === binned.max,
        `a file saved binned reopens binned, as the header shows: bin ${profile.bin}, control ${await page.inputValue('#bin')}, "${s2.notice}", image ${again.lo}…${again.hi} (was ${binned.lo}…${binned.hi})`);
      noErrors(page, 'prepared');
      await page.close();
    }
  });
  // ---------------------------------------------------------------- 16. a compare grid
  await scenario('16 compare', async () => {
    {
      const page = await freshPage({ width: 1600, height: 1000 });
      // A folder of three acquisitions of one 13 × 11 detector: the Arina files, their
      // prepared copy and a prepared crop of scan rows 1..4 (a 3 × 5 scan), with a note.
      const dir = path.join(tmp, 'compare_folder');
      fs.mkdirSync(dir);
      for (const f of filesOf('arina_u16')) fs.copyFileSync(f, path.join(dir, path.basename(f)));
      fs.copyFileSync(path.join(FIX, 'data/arina_u16.stem4d'), path.join(dir, 'copy.stem4d'));
      fs.copyFileSync(path.join(FIX, 'data/arina_u16_crop.stem4d'), path.join(dir, 'crop.stem4d'));
      fs.writeFileSync(path.join(dir, 'notes.txt'), 'same specimen, three reads\n');
      // Unmasked: each acquisition finds its own hot pixels in its own mean pattern, so the
      // crop's masked image is not the whole one's rows.
      await page.uncheck('#bad-pixels');
      await choose(page, '#open-folder', dir);
      await openedAs(page, 'arina_u16_master.h5');
      await page.waitForFunction(() => window.stem4d.status().compared.length === 2 && !window.stem4d.status().loading, null, { timeout: 60000 });
      await rendered(page);
      let s = await status(page);
      const names = s.compared.map((c) => c[0]);
      check(names.includes('copy.stem4d') && names.includes('crop.stem4d') && s.open.length === 4 && !s.error,
        `a folder of three acquisitions opens as a compare grid: ${JSON.stringify(s)}`);
      check(/Left out: notes\.txt/.test(s.notice || ''), `the file of no acquisition is said: ${s.notice}`);
      const copy = names.indexOf('copy.stem4d'), crop = names.indexOf('crop.stem4d');
      // Every panel is its own acquisition's exact image of the one detector.
      const compared = (bf) => page.evaluate(async ({ bf, copy, crop }) => {
        const p = await window.stem4d.product({ kind: 'bf', center: bf.center, radius: bf.radius });
        const whole = Array.from(p.data, Number);
        const bad = [];
        for (let r = 0; r < 5; r++) for (let c = 0; c < 7; c++) {
          const got = await window.stem4d.comparedValueAt(copy, r, c);
          if (got !== whole[r * 7 + c]) bad.push(`copy (${r},${c}) ${got} != ${whole[r * 7 + c]}`);
          if (r >= 1 && r < 4 && c < 5) {
            const g = await window.stem4d.comparedValueAt(crop, r - 1, c);
            if (g !== whole[r * 7 + c]) bad.push(`crop (${r - 1},${c}) ${g} != ${whole[r * 7 + c]}`);
          }
        }
        return { bad, spread: Math.max(...whole) - Math.min(...whole) };
      }, { bf, copy, crop });
      await page.evaluate(() => window.stem4d.setView({ image: { kind: 'bf', center: [6.3, 4.6], radius: 2.7, cursor: [4, 6] } }));
      let got = await compared({ center: [6.3, 4.6], radius: 2.7 });
      check(got.bad.length === 0 && got.spread > 0, `each compared panel is its acquisition's exact BF image: ${got.bad.slice(0, 3).join('; ')}`);
      const drawn = (await page.evaluate(() => window.stem4d.lastRender())).drawn || [];
      check(['compared0', 'compared1'].every((k) => drawn.includes(k)), `one render draws every compared panel: ${JSON.stringify(drawn)}`);
      // Dragging the detector on the pattern moves it for every panel.
      const v0 = await page.evaluate(() => window.stem4d.view());
      const pbox = await page.locator('#pattern-canvas').boundingBox();
      const [kr, kc] = [13, 11];
      const scale = Math.min(pbox.width / kc, pbox.height / kr);
      const at = (r, c) => [pbox.x + pbox.width / 2 + (c + 0.5 - kc / 2) * scale, pbox.y + pbox.height / 2 + (r + 0.5 - kr / 2) * scale];
      await page.mouse.move(...at(v0.image.center[0], v0.image.center[1]));
      await page.mouse.down();
      await page.mouse.move(...at(v0.image.center[0] - 1, v0.image.center[1] + 1), { steps: 4 });
      await page.mouse.up();
      await rendered(page);
      const v1 = await page.evaluate(() => window.stem4d.view());
      check(Math.abs(v1.image.center[0] - v0.image.center[0] + 1) < 0.2 && Math.abs(v1.image.center[1] - v0.image.center[1] - 1) < 0.2,
        `the detector was dragged: ${v0.image.center} → ${v1.image.center}`);
      got = await compared({ center: v1.image.center, radius: v1.image.radius });
      check(got.bad.length === 0, `a detector drag updates every compared panel exactly: ${got.bad.slice(0, 3).join('; ')}`);
      // The linked cursor: clamped to the crop's 3 × 5 scan, said under it.
      await page.waitForFunction((k) => /cursor \(2, 4\)/.test(document.querySelectorAll('figure.compared .readout')[k].textContent), crop, { timeout: 5000 }).catch(() => {});
      const cropReadout = await page.evaluate((k) => document.querySelectorAll('figure.compared .readout')[k].textContent, crop);
      check(/cursor \(2, 4\) = /.test(cropReadout), `the cursor (4, 6) is linked, clamped to the crop's scan: "${cropReadout}"`);
      // A click on a compared panel moves the one cursor; arrow keys move it from there.
      const cbox = await page.locator('figure.compared canvas:not(.plain):not(.overlay)').nth(crop).boundingBox();
      await page.mouse.click(cbox.x + cbox.width * (3.5 / 5), cbox.y + cbox.height * (0.5 / 3));
      await rendered(page);
      let cursor = (await page.evaluate(() => window.stem4d.view())).image.cursor;
      check(cursor[0] === 0 && cursor[1] === 3, `a click on a compared panel moves the linked cursor: ${cursor}`);
      await page.keyboard.press('ArrowDown');
      await rendered(page);
      cursor = (await page.evaluate(() => window.stem4d.view())).image.cursor;
      check(cursor[0] === 1 && cursor[1] === 3, `the arrow keys move it on a focused compared panel: ${cursor}`);
      // One display mapping: the colour map and scale of the image apply to every panel.
      await page.evaluate(() => window.stem4d.setView({ image: { display: { cmap: 'viridis', scale: 'sqrt' } } }));
      const st = await page.evaluate((k) => window.stem4d.comparedStats(k), copy);
      check(st.cmap === 'viridis' && st.scale === 'sqrt', `the display mapping is shared: ${st.cmap}, ${st.scale}`);
      // At a laptop's size every panel still has room.
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.waitForTimeout(300);
      await rendered(page);
      const sizes = await page.evaluate(() => [...document.querySelectorAll('#image-canvas, #pattern-canvas, figure.compared canvas:not(.plain):not(.overlay)')].map((c) => [c.clientWidth, c.clientHeight]));
      check(sizes.length === 4 && sizes.every(([w, h]) => w >= 40 && h >= 40), `at 1280 × 800 every panel has room: ${JSON.stringify(sizes)}`);
      // Close: the viewed acquisition stays and draws.
      await page.click('#compare-close');
      await rendered(page);
      s = await status(page);
      check(s.compared.length === 0 && s.open.length === 4 && await page.isHidden('#compare'), `Close compare keeps the viewed acquisition: ${JSON.stringify(s)}`);
      // Another detector shape is refused by name; the viewed one opens and works.
      await choose(page, '#open-files', [...filesOf('arina_u16'), ...filesOf('emd_u16_contig')]);
      await openedAs(page, 'arina_u16_master.h5');
      await page.waitForFunction(() => !window.stem4d.status().loading && window.stem4d.status().error, null, { timeout: 60000 }).catch(() => {});
      s = await status(page);
      check(s.compared.length === 0 && /Not compared: emd_u16_contig\.h5: .*8×9 pixels.*13×11/.test(s.error || ''),
        `an acquisition of another detector shape is refused by name: ${JSON.stringify(s)}`);
      await page.evaluate(() => window.stem4d.setView({ image: { kind: 'total' } }));
      const st2 = await page.evaluate(() => window.stem4d.stats('image'));
      check(st2.hi > st2.lo, 'after the refusal the viewed acquisition still draws');
      noErrors(page, 'compare');
      await page.close();
    }
  });
  fs.rmSync(tmp, { recursive: true, force: true });
}
