// The in-page part of the end-to-end suite: parity of window.stem4d.product against the CPU
// reference files, the bad-input corpus, and the interaction benchmark. It runs inside the
// viewer page, so Playwright (e2e/run.mjs) and the plain-CDP driver used on the H200
// (e2e/h200.py) share it. Fixtures and references are fetched from the test server:
// /fixtures/ = tests/fixtures, /shared/ = ../shared/data (fixtures that 404 are skipped).

export function parseNpy(buf) {
  const b = new Uint8Array(buf);
  const dv = new DataView(buf);
  const v1 = b[6] === 1;
  const hlen = v1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  const off = v1 ? 10 : 12;
  const header = new TextDecoder('latin1').decode(b.subarray(off, off + hlen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  return { shape, dtype: NPY_NAME[descr.slice(1)], data: typed(NPY_NAME[descr.slice(1)], buf.slice(off + hlen)) };
}
const NPY_NAME = { b1: 'bool', u1: 'uint8', u2: 'uint16', u4: 'uint32', u8: 'uint64', f4: 'float32', f8: 'float64' };
const TYPES = { bool: Uint8Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array };
function typed(dtype, buf) {
  const T = TYPES[dtype];
  if (!T) throw new Error('unsupported npy dtype ' + dtype);
  return new T(buf);
}

// The contract's one judge (`products::judge`, run in the Worker): the numpy references are
// an independent float64 implementation (C-BOUND-INDEPENDENT). Null when `got` passes.
async function judged(kind, got, want) {
  const v = await window.stem4d.judge(kind.replace(/-f32$/, ''), got, want);
  return v.pass ? null : v.failure;
}

// The parity matrix of the open acquisition (`products::parity`, as `stem4d parity` runs
// it): every product on the CPU reference and on this adapter, with and without bad-pixel
// masking, each backend row one check.
async function parityMatrix(name, check) {
  for (const maskBadPixels of [false, true]) {
    const rows = await window.stem4d.parity({ maskBadPixels });
    const gpu = rows.filter((r) => r.backend !== 'cpu');
    check(gpu.length > 0, `${name} parity matrix (masked ${maskBadPixels}): a backend row`);
    for (const r of gpu) {
      check(r.outcome.is !== 'fail', `${name} parity ${r.product} ${r.backend} (masked ${maskBadPixels}): ${r.outcome.why}`);
    }
  }
}

async function fetchBuf(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.arrayBuffer();
}

export async function apiParams(kind, p) {
  const out = { kind: kind.replace(/-f32$/, '') };
  const map = { scan_roi: 'scanRoi', mask_bad_pixels: 'maskBadPixels' };
  for (const [k, v] of Object.entries(p)) {
    if (v === null || v === undefined) continue;
    if (k === 'mask') {
      const m = parseNpy(await fetchBuf('/fixtures/' + v));
      out.mask = ['bool', 'uint8'].includes(m.dtype) ? Array.from(m.data, (x) => x !== 0) : Array.from(m.data);
    } else out[map[k] || k] = v;
  }
  return out;
}

// Two products the same bytes: shape, dtype and every value's bits.
function sameProduct(a, b) {
  const bytes = (d) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  const [x, y] = [bytes(a.data), bytes(b.data)];
  return JSON.stringify(a.shape) === JSON.stringify(b.shape) && a.dtype === b.dtype
    && x.length === y.length && x.every((v, i) => v === y[i]);
}

// The fixture opened again within a GPU memory budget of 256 KiB (`memoryBudget`): the plan
// taken is said in the profile, its peak within the budget, and every product is the bytes
// the open without a budget gave (`unbudgeted`) where the plan is on the GPU (compressed,
// streamed, or resident where it fits), within the contract's bound of the reference on the
// CPU's. Where the engine compresses, a few products are also picked streamed (`memoryPlan`).
async function withinBudget(fx, files, unbudgeted, check, memoryPlan, aboutCentre = null) {
  const budget = 262144;
  const shape = fx.scan_shape ? { scanShape: fx.scan_shape } : {};
  await window.stem4d.open(files, { ...shape, memoryBudget: budget, ...(memoryPlan ? { memoryPlan } : {}) });
  const prof = await window.stem4d.profile();
  const plan = prof.memory_plan || {};
  // A compressed plan's peak is an upper bound until built: its built sizes must fit.
  const held = plan.kind === 'compressed' && prof.compressed
    ? prof.compressed.packed_bytes + prof.compressed.scratch_bytes : plan.peak_bytes;
  check(prof.memory_budget === budget && held <= budget && prof.memory_plans.length >= 3
    && (!memoryPlan || plan.kind === memoryPlan),
    `${fx.name} within ${budget} bytes: the plan taken is said (${JSON.stringify(plan)})`);
  const gpuDecoded = fx.filters.includes('bitshuffle-lz4') || fx.filters.includes('lz4');
  check(!(gpuDecoded && plan.kind === 'resident'), `${fx.name} within ${budget} bytes: not resident (GPU decode windows alone are larger): ${plan.kind}`);
  if (plan.kind === 'compressed' && !memoryPlan) {
    // Streaming stays covered where the engine compresses: the same products picked streamed.
    await withinBudget(fx, files, unbudgeted.slice(0, 4), check, 'streaming', aboutCentre);
    await window.stem4d.open(files, { ...shape, memoryBudget: budget });
  }
  if (plan.kind === 'streaming' && unbudgeted.length) {
    // A streamed product cancelled as it starts stops at its first block, and the same
    // product asked again is whole.
    const [p, want] = unbudgeted[0];
    const params = await apiParams(p.kind, p.params);
    const pending = window.stem4d.product(params);
    window.stem4d.cancel();
    let said = null;
    try { await pending; } catch (e) { said = e.message; }
    check(/^cancelled while/.test(said || ''), `${fx.name} ${p.ref} streamed: cancel stops the pass (${said})`);
    check(sameProduct(await window.stem4d.product(params), want), `${fx.name} ${p.ref} streamed after a cancel: the same bytes as without a budget`);
  }
  if (plan.kind === 'streaming' && aboutCentre) await fromRingSums(fx, aboutCentre, check);
  if (plan.kind === 'streaming' && unbudgeted.length > 1) {
    // Asked together, the products take one pass over the files, and are the same bytes.
    // (One correction a call: those with the first product's bin and masking.)
    const all = await Promise.all(unbudgeted.map(async ([p, want]) => [await apiParams(p.kind, p.params), want]));
    const corr = ([q]) => `${q.bin ?? 1} ${q.maskBadPixels ?? ''}`;
    const list = all.filter((x) => corr(x) === corr(all[0])).slice(0, 6);
    const before = (await window.stem4d.profile()).streamed_passes;
    const got = await window.stem4d.products(list.map(([q]) => q));
    const passes = (await window.stem4d.profile()).streamed_passes - before;
    check(passes <= 1 && got.length === list.length && list.every(([, want], i) => sameProduct(got[i], want)),
      `${fx.name} ${list.length} products asked together (streaming): ${passes} pass, the same bytes as without a budget`);
  }
  for (const [p, want] of unbudgeted) {
    const got = await window.stem4d.product(await apiParams(p.kind, p.params));
    if (plan.kind === 'cpu') {
      const err = await judged(p.kind, got, parseNpy(await fetchBuf('/fixtures/' + p.ref)));
      check(err === null, `${fx.name} ${p.ref} within ${budget} bytes (cpu): ${err}`);
    } else {
      check(sameProduct(got, want), `${fx.name} ${p.ref} within ${budget} bytes (${plan.kind}): the same bytes as without a budget`);
    }
  }
}

// Detectors about the fitted BF centre, CoM and iDPC, as the open without a budget gave them:
// a streamed session's first look (ring sums and CoM moments, decision 0036) gives the same
// bytes with no pass over the files.
async function aboutFittedCentre(fx) {
  const fit = window.stem4d.status().fit;
  if (fx.dtype === 'float32' || !fit || fit.warning || !(fit.radius > 0)) return null;
  const center = fit.center;
  const products = [];
  for (const params of [{ kind: 'bf', center, radius: 2 }, { kind: 'df', center, radius: 3 },
    { kind: 'adf', center, inner: 1, outer: 3 }, { kind: 'total' }, { kind: 'com' },
    { kind: 'idpc', rotation: 20, flip: true }]) {
    products.push([params, await window.stem4d.product(params)]);
  }
  return { center, products };
}

async function fromRingSums(fx, about, check) {
  const prof = await window.stem4d.profile();
  const rings = prof.streamed_ring_sums;
  check(rings && rings.center[0] === about.center[0] && rings.center[1] === about.center[1],
    `${fx.name} streamed: ring sums about the fitted centre ${about.center} (${JSON.stringify(rings)}; ${prof.warnings})`);
  if (!rings) return;
  const passes = prof.streamed_passes;
  for (const [params, want] of about.products) {
    check(sameProduct(await window.stem4d.product(params), want),
      `${fx.name} streamed ${params.kind} from the first look: the same bytes as without a budget`);
  }
  // The page's detector about the centre snaps to whole-pixel radii and redraws from them.
  await window.stem4d.setView({ preset: 'bf' });
  await window.stem4d.setView({ image: { center: about.center, radius: 2.4 } });
  const radius = window.stem4d.view().image.radius;
  const after = (await window.stem4d.profile()).streamed_passes;
  check(radius === 2 && after === passes,
    `${fx.name} streamed: a disk about the centre snaps to r = 2 (${radius}) and takes no pass (${after - passes})`);
}

// A prepared acquisition (`stem4d prepare` of the arina_u16 fixture, decision 0037) opens
// in the page with the products of its files, byte for byte; with a byte of its payload
// changed it is refused by name and block, and the page opens the next file as before.
async function preparedAcquisition(manifest, check) {
  const fx = manifest.fixtures.find((f) => f.name === 'arina_u16');
  const asked = [{ kind: 'total' }, { kind: 'bf', center: [6.5, 5.5], radius: 3 },
    { kind: 'com' }, { kind: 'max-dp' }, { kind: 'pattern', at: [3, 4] }];
  await window.stem4d.open(await filesFrom(fixtureUrls(fx)));
  const want = [];
  for (const p of asked) want.push(await window.stem4d.product(p));
  const bytes = new Uint8Array(await fetchBuf('/fixtures/data/arina_u16.stem4d'));
  const info = await window.stem4d.open([new File([bytes], 'arina_u16.stem4d')]);
  check(info.format === 'prepared' && JSON.stringify(info.shape) === JSON.stringify(fx.shape),
    `prepared acquisition opens as one (${info.format} ${info.shape})`);
  // Its blocks were read and checked by the pool's Workers (decision 0045), not one by one.
  const stages = (await window.stem4d.profile()).stages.map((s) => s.name);
  check(stages.includes('of which read + check in the pool (waited)'),
    `a prepared acquisition's blocks are read and checked in the pool (${stages.join(', ')})`);
  // Expanded into the raw resident (this small one's plan), its blocks' SHA-256 is checked
  // by the pool's Workers, not on the GPU (decision 0057).
  check(!stages.includes("of which blocks' SHA-256 on the GPU (waited)"),
    `an expanded prepared acquisition's blocks are hashed by the Workers (${stages.join(', ')})`);
  for (let k = 0; k < asked.length; k++) {
    check(sameProduct(await window.stem4d.product(asked[k]), want[k]),
      `prepared acquisition ${asked[k].kind}: the same bytes as from its files`);
  }
  // Its packed payload kept packed as a compressed resident (decision 0055): copied from
  // the pool's reads into the segments, nothing decoded, the same products.
  await window.stem4d.open([new File([bytes], 'arina_u16.stem4d')], { memoryPlan: 'compressed' });
  const kept = await window.stem4d.profile();
  check(kept.memory_plan.kind === 'compressed' && kept.memory_plan.note.includes('kept packed')
    && kept.stages.some((s) => s.name === 'of which read + check in the pool (waited)'),
    `a prepared acquisition's packed payload is kept (${JSON.stringify(kept.memory_plan)})`);
  // Kept, its blocks' SHA-256 is checked on the GPU where they were copied (decisions 0056,
  // 0057).
  const keptStages = kept.stages.map((s) => s.name);
  check(keptStages.includes("of which blocks' SHA-256 on the GPU (waited)"),
    `a kept prepared acquisition's blocks are hashed on the GPU (${keptStages.join(', ')})`);
  for (let k = 0; k < asked.length; k++) {
    check(sameProduct(await window.stem4d.product(asked[k]), want[k]),
      `prepared acquisition kept packed ${asked[k].kind}: the same bytes as from its files`);
  }
  const damaged = bytes.slice();
  damaged[4096 + 100] ^= 0x40;
  let said = null;
  try { await window.stem4d.open([new File([damaged], 'damaged.stem4d')]); } catch (e) { said = e.message; }
  check(said && said.includes('damaged.stem4d') && said.includes('payload block 0'),
    `a damaged prepared acquisition is refused by name and block (${said})`);
  said = null;
  try {
    await window.stem4d.open([new File([damaged], 'damaged.stem4d')], { memoryPlan: 'compressed' });
  } catch (e) { said = e.message; }
  check(said && said.includes('damaged.stem4d') && said.includes('payload block 0'),
    `a damaged prepared acquisition kept packed is refused by name and block (${said})`);
  const again = await window.stem4d.open([new File([bytes], 'arina_u16.stem4d')]);
  check(again.format === 'prepared', 'the page opens a prepared acquisition after refusing a damaged one');
}

export function fixtureUrls(fx) {
  const base = fx.root === 'shared' ? '/shared/' : '/fixtures/data/';
  return fx.files.map((f) => base + f);
}

async function filesFrom(urls) {
  return Promise.all(urls.map(async (u) => new File([await fetchBuf(u)], u.split('/').pop())));
}

export async function runSuite(opts = {}) {
  const parts = opts.parts || ['parity', 'bad', 'bench'];
  const res = { pass: 0, fail: 0, skipped: [], failures: [], figures: {} };
  const check = (ok, what) => { if (ok) res.pass++; else { res.fail++; res.failures.push(what); } };
  const adapter = window.stem4d.adapter();
  res.figures.adapter = adapter;
  if (!adapter || adapter.error) { check(false, 'WebGPU adapter: ' + JSON.stringify(adapter)); return res; }
  // The engine asks for `subgroups` apart from wgpu (src/gpu/web_subgroups.rs): where the
  // browser's adapter has them, the masked sums must meet through them.
  const gpuAdapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  const hasSubgroups = !!(gpuAdapter && gpuAdapter.features.has('subgroups'));
  check((adapter.masked_sums === 'through subgroups') === hasSubgroups,
    `masked sums meet ${adapter.masked_sums} on an adapter ${hasSubgroups ? 'with' : 'without'} subgroups`);

  if (parts.includes('parity')) {
    const manifest = await (await fetch('/fixtures/manifest.json')).json();
    const kinds = new Set();
    for (const fx of manifest.fixtures) {
      let files;
      try { files = await filesFrom(fixtureUrls(fx)); } catch (e) { res.skipped.push(`${fx.name}: ${e.message}`); continue; }
      let info;
      try { info = await window.stem4d.open(files, fx.scan_shape ? { scanShape: fx.scan_shape } : {}); } catch (e) {
        check(false, `${fx.name}: open: ${e.message}`); continue;
      }
      check(JSON.stringify(info.shape) === JSON.stringify(fx.shape) && info.dtype === fx.dtype, `${fx.name}: info ${info.shape} ${info.dtype}`);
      if (fx.filters.includes('bitshuffle-lz4')) {
        const prof = await window.stem4d.profile();
        check(prof.gpu_inflated_in_place_blocks === 0,
          `${fx.name}: every 8 KiB block inflated from its parsed sequences (${prof.gpu_inflated_in_place_blocks} in place)`);
        if (prof.products_on === 'gpu' && prof.decode_workers > 0) {
          check(prof.file_buffer_windows > 0,
            `${fx.name}: decode windows uploaded from the File API's buffers (${prof.file_buffer_windows})`);
          check(prof.worker_walked_windows === prof.file_buffer_windows,
            `${fx.name}: every such window's headers walked by the Workers that read it (${prof.worker_walked_windows})`);
        }
      }
      if (fx.filters.includes('deflate')) {
        const prof = await window.stem4d.profile();
        check(prof.worker_decoded_chunks > 0 && prof.decode_workers >= 1,
          `${fx.name}: deflate chunks inflated in ${prof.decode_workers} decode Workers (${prof.worker_decoded_chunks} chunks)`);
      }
      const unbudgeted = [];
      for (const p of fx.products) {
        const what = `${fx.name} ${p.ref}`;
        try {
          const got = await window.stem4d.product(await apiParams(p.kind, p.params));
          const err = await judged(p.kind, got, parseNpy(await fetchBuf('/fixtures/' + p.ref)));
          check(err === null, `${what}: ${err}`);
          kinds.add(p.kind.replace(/-f32$/, ''));
          unbudgeted.push([p, got]);
        } catch (e) { check(false, `${what}: ${e.message}`); }
      }
      let about = null;
      try { about = await aboutFittedCentre(fx); } catch (e) { check(false, `${fx.name} detectors about the centre: ${e.message}`); }
      try { await parityMatrix(fx.name, check); } catch (e) { check(false, `${fx.name} parity matrix: ${e.message}`); }
      try { await withinBudget(fx, files, unbudgeted, check, undefined, about); } catch (e) { check(false, `${fx.name} memoryBudget: ${e.message}`); }
    }
    // B-trees with a level above their leaves: the page's open leaves the leaves to the GPU
    // upload, which reads them alongside the chunks before them.
    // Each way of reading them (open option `leaves`): batches of leaves read as the file
    // spans of their chunks (the default; frames written one by one keep them there), read
    // alone, or read by the open. Whether windows come from leaf spans, where it is known.
    let refused = null;
    try {
      await window.stem4d.open(await filesFrom(['/fixtures/index/stream_k32_bslz4.h5']), { leaves: 'sometimes' });
    } catch (e) { refused = e.message; }
    check(refused && refused.includes('leaves') && refused.includes('sometimes'), `open option leaves: 'sometimes' refused (${refused})`);
    const arina = ['arina_stream_master', 'arina_stream_data_000001', 'arina_stream_data_000002'];
    const deferred = [
      ['btree_k4_bslz4', [], { scanShape: [13, 23], leaves: 'reads' }, [13, 23], false],
      ['btree_k4_lz4', [], { scanShape: [13, 23] }, [13, 23], null],
      ['stream_k32_bslz4', [], {}, [12, 40], true],
      ['stream_k32_bslz4', [], { leaves: 'spans' }, [12, 40], true],
      ['stream_k32_bslz4', [], { leaves: 'reads' }, [12, 40], false],
      ['stream_k32_bslz4', [], { leaves: 'open' }, [12, 40], false],
      // Two parts, each a tree of two levels, fed in frame order across them.
      ['arina_stream', arina, { scanShape: [20, 24] }, [20, 24], true],
      ['arina_stream', arina, { scanShape: [20, 24], leaves: 'reads' }, [20, 24], false],
    ];
    let before = null;
    for (const [name, files, options, scan, spans] of deferred) {
      const label = `${name} ${JSON.stringify(options)}`;
      const again = before === name;
      before = name;
      try {
        const urls = (files.length ? files : [name]).map((f) => `/fixtures/index/${f}.h5`);
        const info = await window.stem4d.open(await filesFrom(urls), options);
        const prof = await window.stem4d.profile();
        const stages = prof.stages.map((st) => st.name);
        const fed = stages.includes('of which chunk index (not overlapped)');
        check(prof.products_on === 'gpu' && fed === (options.leaves !== 'open'),
          `${label}: the leaves read by the GPU upload unless the open reads them (${prof.products_on}; ${stages.join(', ')})`);
        if (spans !== null) {
          check((prof.leaf_span_windows > 0) === spans,
            `${label}: windows read as leaf spans ${spans ? 'by default or when asked' : 'only when asked'} (${prof.leaf_span_windows})`);
        }
        if (again) {
          // The same file again: its resident buffers are the last acquisition's, cleared.
          check(prof.reused_resident_buffers === prof.resident_buffers,
            `${label}: the last resident's buffers reused (${prof.reused_resident_buffers} of ${prof.resident_buffers})`);
        }
        // Leaf spans too: their pieces go back to the Workers once the leaves are parsed.
        check(prof.worker_walked_windows === prof.file_buffer_windows,
          `${label}: every File API window's headers walked by the Workers (${prof.worker_walked_windows} of ${prof.file_buffer_windows}, ${prof.leaf_span_windows} leaf spans)`);
        check(JSON.stringify(info.shape.slice(0, 2)) === JSON.stringify(scan), `${label}: info ${info.shape}`);
        for (const kind of ['total', 'sum-dp']) {
          const got = await window.stem4d.product(await apiParams(kind, {}));
          const err = await judged(kind, got, parseNpy(await fetchBuf(`/fixtures/index/${name}_${kind}.npy`)));
          check(err === null, `${label} ${kind}: ${err}`);
        }
      } catch (e) { check(false, `${label}: ${e.message}`); }
    }
    // Streamed (one block of the whole scan, decoded on the GPU), the first pass reads the
    // leaves as the resident upload does, and so does a compressed build's block (decision
    // 0047): no stage reads them before it.
    for (const [name, files, options] of [
      ['stream_k32_bslz4', [], { memoryPlan: 'streaming' }],
      ['stream_k32_bslz4', [], { memoryPlan: 'streaming', leaves: 'reads' }],
      ['arina_stream', arina, { scanShape: [20, 24], memoryPlan: 'streaming' }],
      ['stream_k32_bslz4', [], { memoryPlan: 'compressed' }],
      ['arina_stream', arina, { scanShape: [20, 24], memoryPlan: 'compressed' }],
    ]) {
      const label = `${name} ${JSON.stringify(options)}`;
      try {
        const urls = (files.length ? files : [name]).map((f) => `/fixtures/index/${f}.h5`);
        await window.stem4d.open(await filesFrom(urls), options);
        const prof = await window.stem4d.profile();
        const stages = prof.stages.map((st) => st.name);
        const on = options.memoryPlan === 'compressed' ? 'gpu, compressed' : 'gpu, streamed';
        check(prof.products_on === on && prof.memory_plan.gpu_decode
          && !stages.includes('chunk index leaves'),
          `${label}: ${on}, the leaves read by its blocks (${prof.products_on}; ${stages.join(', ')})`);
        for (const kind of ['total', 'sum-dp']) {
          const got = await window.stem4d.product(await apiParams(kind, {}));
          const err = await judged(kind, got, parseNpy(await fetchBuf(`/fixtures/index/${name}_${kind}.npy`)));
          check(err === null, `${label} ${kind}: ${err}`);
        }
      } catch (e) { check(false, `${label}: ${e.message}`); }
    }
    res.figures.kinds = [...kinds].sort();
    check(kinds.size === 16 || res.skipped.length > 0, `every product kind checked (${res.figures.kinds.join(', ')})`);
    try { await preparedAcquisition(manifest, check); } catch (e) { check(false, `prepared acquisition: ${e.message}`); }
  }

  if (parts.includes('bad')) {
    const bad = await (await fetch('/fixtures/bad/manifest.json')).json();
    for (const c of bad.cases) {
      let msg = null;
      try {
        await window.stem4d.open(await filesFrom(c.files.map((f) => '/fixtures/bad/' + f)), c.scan_shape ? { scanShape: c.scan_shape } : {});
      } catch (e) { msg = e.message; }
      const names = c.files.map((f) => f.split('/').pop().replace(/_data_\d+\.h5$/, ''));
      check(msg && msg.toLowerCase().includes(c.expect.toLowerCase()) && names.some((n) => msg.includes(n)),
        `bad input ${c.name}: ${msg || 'opened without error'}`);
      const shown = !document.getElementById('error').hidden && document.getElementById('error-text').textContent;
      check(!!shown, `bad input ${c.name}: the error is shown on the page`);
    }
  }

  if (parts.includes('bench')) {
    const b = await bench(opts.benchShape || [48, 64, 96, 96], opts.reps || 30);
    res.figures.bench = b;
    for (const what of checkFrames(b)) check(what.ok, what.text);
  }
  return res;
}

// Interaction latency (request → GPU done, as the page measures it) on a synthetic
// acquisition generated on the GPU.
export async function bench(dims, reps) {
  const t0 = performance.now();
  const info = await window.stem4d.open([], { synthetic: dims });
  const out = { shape: info.shape, load_ms: performance.now() - t0, reps };
  out.profile = await window.stem4d.profile();
  const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  const [kr, kc] = [dims[2], dims[3]];
  const r = 0.16 * Math.min(kr, kc);
  // Each interaction twice: drawn (view change → canvases presented, GPU done) and computed
  // only (→ image, pattern and limits on the GPU), which tells the engine from presentation.
  // `presented`: which canvases the steps drew (a canvas whose content did not change is not,
  // so a step that changed nothing, such as a first step to where the preset put the
  // detector, draws none and is left out).
  const presented = {};
  const drawn = async (step, name) => {
    const t = [];
    const canvases = new Set();
    for (let k = 0; k < reps; k++) {
      await window.stem4d.setView(step(k));
      const r = window.stem4d.lastRender();
      t.push(r.ms);
      if (r.drawn.length) canvases.add(r.drawn.join('+'));
    }
    if (name) presented[name] = [...canvases].sort().join(', ');
    return med(t);
  };
  const timedPlan = [];
  const series = async (name, preset, step) => {
    timedPlan.push([name.replace(/_ms$/, ''), preset, step]);
    const start = { preset, pattern: { source: 'cursor' }, image: { roi: null } };
    await window.stem4d.setView(start);
    out[name] = await drawn(step, name.replace(/_ms$/, ''));
    await window.stem4d.setView(start);
    const c = [];
    const sub = [];
    for (let k = 0; k < reps; k++) {
      c.push(await window.stem4d.computeView(step(reps + k)));
      sub.push(window.stem4d.lastCompute().submit_ms);
    }
    out[name.replace(/_ms$/, '_compute_ms')] = med(c);
    out[name.replace(/_ms$/, '_submit_ms')] = med(sub);
  };
  const disk = (k) => ({ image: { center: [kr / 2 + (k % 5) * 0.25, kc / 2 - (k % 3) * 0.25], radius: r } });
  await series('bf_drag_ms', 'bf', disk);
  await series('adf_drag_ms', 'adf', (k) => ({ image: { center: [kr / 2 + (k % 5) * 0.25, kc / 2], inner: 1.2 * r, outer: 2.5 * r } }));
  await series('df_drag_ms', 'df', disk);
  await series('dpc_rotate_ms', 'dpc0', (k) => ({ image: { rotation: k } }));
  await series('idpc_rotate_ms', 'idpc', (k) => ({ image: { rotation: k } }));
  const cursor = (k) => ({ image: { cursor: [(7 * k) % dims[0], (11 * k) % dims[1]] } });
  const cmap = (k) => ({ pattern: { display: { cmap: k % 2 ? 'inferno' : 'viridis' } } });
  await series('pattern_cursor_ms', 'bf', cursor);
  await series('mean_pattern_roi_ms', 'bf', (k) => ({ pattern: { source: 'mean' }, image: { roi: [0, 1 + (k % dims[0]), 0, dims[1]] } }));
  // A colour-map change redraws the pattern canvas and computes nothing: drawn, it is what
  // presenting a canvas costs (on the headless H200 a readback); computed only, the bare
  // round trip to the GPU process. Each step changes the map; the last leaves inferno.
  await series('pattern_cmap_ms', 'bf', cmap);
  // The same redraw, and the cursor move, with the pattern panel at a few widths: whether
  // presenting a canvas costs by its pixels or by the present alone. Keys are the device
  // pixels the panel is drawn at (that of the canvas in use: the WebGPU one keeps its size
  // while frames go to the 2D one).
  const patternCanvas = document.getElementById('pattern-canvas');
  out.pattern_by_width = {};
  for (const w of [96, 768]) {
    patternCanvas.parentElement.style.width = `${w}px`;
    await window.stem4d.setView(cmap(1));
    const cmapMs = await drawn(cmap);
    const px = Math.round(patternCanvas.clientWidth * (window.devicePixelRatio || 1));
    out.pattern_by_width[px] = { cmap_ms: cmapMs, cursor_ms: await drawn(cursor) };
  }
  patternCanvas.parentElement.style.width = '';
  // The interactions whose drawn figure is mostly presentation, with frames presented the
  // other way (the page keeps the way it measured faster when its canvases were attached).
  out.present = window.stem4d.present();
  const otherWay = out.present.mode === 'surface' ? 'readback' : 'surface';
  await window.stem4d.setPresent(otherWay);
  out.other_present = { mode: otherWay };
  for (const [name, step] of [['bf_drag', disk], ['pattern_cursor', cursor], ['pattern_cmap', cmap]]) {
    await window.stem4d.setView({ preset: 'bf', pattern: { source: 'cursor' }, image: { roi: null } });
    out.other_present[name + '_ms'] = await drawn(step, `${name}@${otherWay}`);
  }
  await window.stem4d.setPresent(out.present.mode);
  out.presented = presented;
  out.gpu = await gpuTimes(timedPlan, Math.min(reps, 10), med);
  // Dragging: one detector move a frame, as pointer events come, for a second. Moves that
  // come while a render is in flight collapse into the next one.
  await window.stem4d.setView({ preset: 'bf', pattern: { source: 'cursor' } });
  let dragError = null;
  out.drag = await framesWith(1000, (k) => {
    window.stem4d.setView(disk(k)).catch((e) => { dragError = e.message; });
  });
  await window.stem4d.rendered();
  out.drag.error = dragError;
  // Idle: once the view is drawn and its histograms fetched, the page asks nothing more.
  out.idle = await framesWith(1000, null);
  return out;
}

// What a user does next in an acquisition opened from its files (e2e/h200.py with
// LOCAL_BENCH=1), under whatever memory plan its open took (`memoryBudget`, issue #30): a
// resident or compressed one drags its detectors as `bench` does; a streamed one resizes
// a BF disk and an ADF annulus about the fitted BF centre (its ring sums) and moves one BF
// disk off it, which takes one pass over the files. Medians of `reps` steps, drawn.
export async function benchOpened(shape, reps) {
  const prof = await window.stem4d.profile();
  const plan = (prof.memory_plan || {}).kind;
  const fit = window.stem4d.status().fit;
  const [kr, kc] = [shape[2], shape[3]];
  const r = 0.16 * Math.min(kr, kc);
  const med = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  const out = {
    plan, reps,
    predicted_peak_bytes: (prof.memory_plan || {}).peak_bytes ?? null,
    measured_peak_bytes: prof.measured_peak_bytes ?? null,
  };
  const drawn = async (preset, step) => {
    await window.stem4d.setView({ preset, pattern: { source: 'cursor' }, image: { roi: null } });
    const t = [];
    for (let k = 0; k < reps; k++) {
      await window.stem4d.setView(step(k));
      t.push(window.stem4d.lastRender().ms);
    }
    return med(t);
  };
  if (plan !== 'streaming') {
    const c = [kr / 2, kc / 2];
    const disk = (k) => ({ image: { center: [c[0] + (k % 5) * 0.25, c[1] - (k % 3) * 0.25], radius: r } });
    out.bf_drag_ms = await drawn('bf', disk);
    out.adf_drag_ms = await drawn('adf', (k) => ({ image: { center: [c[0] + (k % 5) * 0.25, c[1]], inner: 1.2 * r, outer: 2.5 * r } }));
    out.df_drag_ms = await drawn('df', disk);
    out.pattern_cursor_ms = await drawn('bf', (k) => ({ image: { cursor: [(7 * k) % shape[0], (11 * k) % shape[1]] } }));
    return out;
  }
  if (!fit || !fit.center) {
    out.error = 'no fitted BF centre: a streamed session has no ring sums to drag from';
    return out;
  }
  const c = fit.center;
  const passes = () => window.stem4d.profile().then((p) => p.streamed_passes);
  const before = await passes();
  // Whole-pixel radii: a streamed disk about the centre snaps to them (decision 0036).
  const whole = Math.round(r);
  out.bf_resize_ms = await drawn('bf', (k) => ({ image: { center: c, radius: whole + 1 + (k % 5) } }));
  out.adf_resize_ms = await drawn('adf', (k) => ({ image: { center: c, inner: whole + 2 + (k % 5), outer: 2 * whole + 4 } }));
  out.passes_while_resizing = (await passes()) - before;
  await window.stem4d.setView({ preset: 'bf' });
  const t0 = performance.now();
  await window.stem4d.setView({ image: { center: [c[0] + 3.5, c[1] - 2.5], radius: whole } });
  out.off_centre_disk_ms = performance.now() - t0;
  out.passes_off_centre = (await passes()) - before - out.passes_while_resizing;
  return out;
}

// One call for the six products `stem4d bench gpu` streams in one pass (total, a BF disk
// and an ADF annulus about the detector's middle, CoM, sum and max patterns) on the
// acquisition opened last (e2e/h200.py with LOCAL_PASS=1): its time, and the passes over the
// files it took (a streamed session's first look gives the total and CoM without one).
export async function passOpened(shape) {
  const [kr, kc] = [shape[2], shape[3]];
  const c = [kr / 2 - 0.5, kc / 2 - 0.5];
  const r = 0.16 * Math.min(kr, kc);
  const list = [{ kind: 'total' }, { kind: 'bf', center: c, radius: r },
    { kind: 'adf', center: c, inner: 1.5 * r, outer: 3 * r }, { kind: 'com' },
    { kind: 'sum-dp' }, { kind: 'max-dp' }];
  const passes = async () => (await window.stem4d.profile()).streamed_passes;
  const before = await passes();
  const t0 = performance.now();
  const got = await window.stem4d.products(list);
  const ms = performance.now() - t0;
  return { ms, passes: (await passes()) - before, products: got.map((a) => a.shape) };
}

// The GPU's own time for each interaction of `plan` ([name, preset, step]), by pass
// timestamps where the adapter has `timestamp-query`: drawn and computed only, the median
// over `reps` steps of the passes' sum (busy), their span and each kernel's time in a step
// (a kernel dispatched several times in one step counts once, summed). Timed passes are
// one per dispatch, so these are not the untimed figures' work split up but the kernels'.
async function gpuTimes(plan, reps, med) {
  const out = { timed: await window.stem4d.timePasses(true) };
  if (!out.timed) return out;
  const step = (g) => {
    const kernels = {};
    for (const [name, ms] of g.passes) kernels[name] = (kernels[name] || 0) + ms;
    return { busy: g.busy_ms, span: g.span_ms, untimed: g.untimed, kernels };
  };
  const summary = (steps) => {
    const kernels = {};
    for (const name of new Set(steps.flatMap((s) => Object.keys(s.kernels)))) {
      kernels[name] = med(steps.map((s) => s.kernels[name] || 0));
    }
    return {
      steps: steps.length,
      busy_ms: med(steps.map((s) => s.busy)),
      span_ms: med(steps.map((s) => s.span)),
      untimed: Math.max(...steps.map((s) => s.untimed)),
      kernels,
    };
  };
  try {
    for (const [name, preset, at] of plan) {
      const start = { preset, pattern: { source: 'cursor' }, image: { roi: null } };
      await window.stem4d.setView(start);
      const drawn = [];
      for (let k = 0; k < reps; k++) {
        await window.stem4d.setView(at(k));
        const r = window.stem4d.lastRender();
        if (r.drawn.length && r.gpu) drawn.push(step(r.gpu));
      }
      await window.stem4d.setView(start);
      const computed = [];
      for (let k = 0; k < reps; k++) {
        await window.stem4d.computeView(at(reps + k));
        const g = window.stem4d.lastCompute().gpu;
        if (g) computed.push(step(g));
      }
      out[name] = { drawn: summary(drawn), computed: summary(computed) };
    }
  } finally {
    await window.stem4d.timePasses(false);
  }
  return out;
}

// Frames (requestAnimationFrame) over `ms` once the page has gone quiet, `each(k)` run at
// each: frames a second, the longest frame, and the engine calls and renders in that time.
async function framesWith(ms, each) {
  let seen = window.stem4d.activity().calls;
  for (let quiet = 0, waited = 0; quiet < 400 && waited < 3000; waited += 50) {
    await new Promise((r) => setTimeout(r, 50));
    const now = window.stem4d.activity().calls;
    quiet = now === seen ? quiet + 50 : 0;
    seen = now;
  }
  const a0 = window.stem4d.activity();
  const times = await new Promise((resolve) => {
    const t = [];
    const step = (now) => {
      t.push(now);
      if (each) each(t.length);
      if (now - t[0] < ms) requestAnimationFrame(step); else resolve(t);
    };
    requestAnimationFrame(step);
  });
  const a1 = window.stem4d.activity();
  let worst = 0;
  for (let k = 1; k < times.length; k++) worst = Math.max(worst, times[k] - times[k - 1]);
  const secs = (times[times.length - 1] - times[0]) / 1000;
  return {
    fps: (times.length - 1) / secs,
    worst_frame_ms: worst,
    engine_calls: a1.calls - a0.calls,
    renders_per_s: (a1.renders - a0.renders) / secs,
  };
}

// What the frame figures must show whatever the adapter's speed: dragging draws images and
// fails none; an idle page makes no call to the engine.
export function checkFrames(b) {
  // Dragging a detector or turning DPC changes the image alone (the detector's outline is
  // on the pattern's 2D overlay); moving the cursor or the pattern's map, the pattern alone.
  const only = (name, canvas) => ({
    ok: b.presented[name] === canvas,
    text: `each step of ${name} presents the ${canvas} canvas alone (${b.presented[name]})`,
  });
  return [
    only('bf_drag', 'image'), only('adf_drag', 'image'), only('df_drag', 'image'),
    only('dpc_rotate', 'image'), only('idpc_rotate', 'image'),
    only('pattern_cursor', 'pattern'), only('pattern_cmap', 'pattern'),
    only(`bf_drag@${b.other_present.mode}`, 'image'), only(`pattern_cursor@${b.other_present.mode}`, 'pattern'),
    { ok: b.drag.renders_per_s > 0 && !b.drag.error, text: `dragging draws images (${b.drag.renders_per_s.toFixed(1)}/s; ${b.drag.error})` },
    { ok: b.idle.engine_calls === 0, text: `an idle page asks nothing of the engine (${b.idle.engine_calls} calls in 1 s)` },
    ...gpuTimeChecks(b.gpu),
  ];
}

// Where passes were timed: a BF step ran its masked sum and display limits, and drew the
// image; a DPC turn read no detector pixels; nothing went untimed.
function gpuTimeChecks(g) {
  if (!g.timed) return [];
  const kernels = (name, how) => Object.keys(g[name][how].kernels).sort().join(', ');
  const has = (name, how, re) => Object.keys(g[name][how].kernels).some((k) => re.test(k));
  return [
    { ok: has('bf_drag', 'computed', /^masked_sum|^ring_sum/) && has('bf_drag', 'computed', /^display_stats$/), text: `a timed BF step runs its masked sum and the limits (${kernels('bf_drag', 'computed')})` },
    { ok: !has('bf_drag', 'computed', /^display$/) && has('bf_drag', 'drawn', /^display$/), text: `a timed BF step draws only when drawn (${kernels('bf_drag', 'drawn')})` },
    { ok: !has('dpc_rotate', 'computed', /^masked_sum|^ring_sum/), text: `a timed DPC turn reads no detector pixels (${kernels('dpc_rotate', 'computed')})` },
    { ok: Object.keys(g).every((n) => n === 'timed' || (g[n].drawn.untimed === 0 && g[n].computed.untimed === 0 && g[n].computed.steps > 0)), text: 'every timed step was timed whole' },
  ];
}

// A digest of each of a few products of the open acquisition (integer sums, CoM, patterns):
// an acquisition opened from a file of the synthetic data (`stem4d bench export-chunks
// --synthetic … --compressed` + scripts/synthetic_h5.py) must give the digests of the same
// acquisition generated on the GPU, byte for byte, however its windows were read.
export async function digests(dims) {
  const [r, c, kr, kc] = dims;
  const params = [
    { kind: 'bf', center: [kr / 2, kc / 2], radius: 0.16 * Math.min(kr, kc) },
    { kind: 'adf', center: [kr / 2 - 0.5, kc / 2 + 1], inner: 0.3 * kr, outer: 0.45 * kr },
    { kind: 'sum-dp' },
    { kind: 'max-dp' },
    { kind: 'com' },
    { kind: 'pattern', at: [r - 1, Math.floor(c / 3)] },
  ];
  const out = {};
  for (const p of params) {
    const got = await window.stem4d.product(p);
    const parts = Array.isArray(got.data) ? got.data : [got.data];
    let h = 0x811c9dc5;
    for (const a of parts) {
      const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193) >>> 0;
    }
    out[p.kind] = `${got.dtype} ${got.shape} ${h.toString(16)}`;
  }
  return out;
}
