// The viewer's Worker: owns the wasm engine, the GPU device, the file handles (read with
// FileReaderSync) and the panels' canvases (OffscreenCanvas). The page only sends requests.
import init, { createViewer, groupFiles, judge } from './stem4d.js';

let viewer = null;

// A pool of Workers, one a spare core, started with this Worker: they read file ranges in
// parallel (`readRanges`) and decode the chunks the WGSL decoder does not take (deflate,
// shuffle; `decodeChunks`, jobs `{filters, mask, raw, expected, elem}`). A job's answer is
// its bytes or an error string.
const POOL_WORKERS = Math.max(1, Math.min(16, (self.navigator.hardwareConcurrency || 2) - 1));
let pool = null;
let jobSeq = 0;

function startPool() {
  return Array.from({ length: POOL_WORKERS }, () => {
    const w = new Worker('./pool_worker.js', { type: 'module' });
    w.pending = new Map();
    w.onmessage = ({ data }) => {
      const done = w.pending.get(data.id);
      w.pending.delete(data.id);
      if (done) done(data.error === undefined ? data.out : data.error);
    };
    w.onerror = (e) => {
      // A Worker that cannot start or dies answers every job it holds, and every later
      // one, with the reason: the load fails with it instead of waiting forever.
      w.dead = 'pool Worker failed: ' + (e.message || 'it could not start');
      for (const done of w.pending.values()) done(w.dead);
      w.pending.clear();
    };
    return w;
  });
}

// Post `job` to the least busy pool Worker; resolves to its answer.
function post(job, transfer) {
  if (!pool) pool = startPool();
  return new Promise((done) => {
    const w = pool.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    if (w.dead) return done(w.dead);
    const id = jobSeq++;
    w.pending.set(id, done);
    w.postMessage({ id, ...job }, transfer);
  });
}

function decodeChunks(jobs) {
  return Promise.all(jobs.map((job) => post(job, [job.raw.buffer])));
}

// Ranges of `file` read by the pool, in parallel: an ArrayBuffer each (a failed read
// rejects, and the engine names the file and range). Many small ranges (an index's B-tree
// nodes) go as one job per Worker, so that a message and a File per range are not paid
// thousands of times; each large range stays a job of its own to spread over the Workers.
const BATCH_BELOW = 1 << 20;
// A batch of small ranges is read one by one with FileReaderSync in each of several Workers
// (on the H200 machine, 4,100 node-sized reads in 0.98 s over 15 Workers, 1.34 s all in
// flight with Blob.arrayBuffer()); a pool of one to three reads them all in flight, which
// was faster with a single Worker (2.2 s against 3.3 s: decision 0013).
const SYNC_SMALL_READS = POOL_WORKERS >= 4;
// `walks[i]`, if given, is the job list of the chunks range i holds: its Worker walks their
// headers, and the answer is `{bytes, tables, failed, message}`. Where `checks[i]` is given
// its Worker checks the range (a prepared file's block: `{index}` of pool_worker.js's
// checkAndAnswer), and the answer is `{bytes, digest, malformed}`.
function readRanges(file, offsets, lengths, walks, checks) {
  const small = [];
  const jobs = offsets.map((offset, i) => {
    const walk = walks && walks[i];
    const check = checks && checks[i];
    if (walk || check || lengths[i] >= BATCH_BELOW) return post({ op: 'read', file, offset, len: lengths[i], walk, check }, []);
    small.push(i);
    return null;
  });
  const workers = Math.max(1, Math.min(POOL_WORKERS, small.length));
  const per = Math.ceil(small.length / workers);
  for (let w = 0; w < workers; w++) {
    const mine = small.slice(w * per, (w + 1) * per);
    if (!mine.length) continue;
    const batch = post({ op: 'reads', file, sync: SYNC_SMALL_READS, offsets: mine.map((i) => offsets[i]), lens: mine.map((i) => lengths[i]) }, []);
    mine.forEach((i, k) => { jobs[i] = batch.then((outs) => (Array.isArray(outs) ? outs[k] : outs)); });
  }
  return Promise.all(jobs.map((job) => job
    .then((out) => (out instanceof ArrayBuffer || out.bytes instanceof ArrayBuffer ? out : Promise.reject(new Error(out))))));
}
// The header walks of chunks in buffers read already (`walks[i]` is buffer i's job list):
// each buffer goes to a pool Worker and comes back as `{bytes, tables, failed, message}`
// (or as it went, where that Worker could not walk).
function walkPieces(buffers, walks) {
  return Promise.all(buffers.map((bytes, i) => post({ op: 'walk', bytes, walk: walks[i] }, [bytes])));
}

const ready = (async () => {
  try {
    // Started now, not on the first open: their start and their wasm module's compile would
    // otherwise fall in the first load (the index waited for them, and the first leaf
    // span's walks for the module). Where they cannot start, the first job says why.
    pool = pool || startPool();
  } catch (e) {
    pool = null;
  }
  try {
    if (!self.navigator.gpu) throw new Error('navigator.gpu is missing');
    await init();
    // wgpu's WebGPU backend leaves the adapter name empty: take it from GPUAdapterInfo.
    const raw = await self.navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    const i = (raw && raw.info) || {};
    const hint = {
      name: i.description || [i.vendor, i.architecture].filter(Boolean).join(' ') || 'WebGPU adapter',
      software: !!i.isFallbackAdapter || /swiftshader/i.test((i.architecture || '') + (i.description || '')),
    };
    viewer = await createViewer(JSON.stringify(hint), decodeChunks, readRanges, POOL_WORKERS, walkPieces);
    viewer.watchWork((stage, done, total) => self.postMessage({ type: 'progress', stage, done, total }));
    const adapter = { ...JSON.parse(viewer.adapter()), vendor: i.vendor, architecture: i.architecture, description: i.description };
    self.postMessage({
      type: 'ready',
      adapter,
      colormaps: JSON.parse(viewer.colormaps()),
    });
  } catch (e) {
    self.postMessage({ type: 'ready', error: String(e && e.message ? e.message : e) });
  }
})();

// One request at a time, in arrival order: the engine's calls never overlap. A cancel is
// not queued: it stops every request sent before it (ids up to `upTo`) at its next block
// (a streamed product's pass over the files), whether it runs now or has not started;
// those already answered are not touched.
let chain = Promise.resolve();
let running = null;
let cancelUpTo = 0;
self.onmessage = (ev) => {
  if (ev.data.op === 'cancel') {
    cancelUpTo = Math.max(cancelUpTo, ev.data.upTo);
    if (running !== null && running <= cancelUpTo && viewer) viewer.cancelWork();
    return;
  }
  chain = chain.then(() => handle(ev.data));
};

async function handle(m) {
  await ready;
  running = m.id;
  if (m.id <= cancelUpTo && viewer) viewer.cancelWork();
  try {
    if (!viewer) throw new Error('WebGPU is not available');
    let result;
    let transfer = [];
    switch (m.op) {
      case 'open':
        result = JSON.parse(await viewer.open(m.files, JSON.stringify(m.options || {}),
          (stage, done, total) => self.postMessage({ type: 'progress', stage, done, total })));
        break;
      case 'product':
        result = await viewer.product(JSON.stringify(m.params));
        transfer = [result.data.buffer];
        break;
      case 'products':
        result = await viewer.products(JSON.stringify(m.params));
        transfer = result.map((r) => r.data.buffer);
        break;
      case 'parity':
        result = JSON.parse(await viewer.parity(!!m.maskBadPixels));
        break;
      case 'judge':
        result = JSON.parse(judge(m.kind, m.got, m.reference, m.against));
        break;
      case 'attach':
        viewer.attach(m.panel, m.canvas, m.plain);
        break;
      case 'calibratePresent':
        result = JSON.parse(await viewer.calibratePresent(JSON.stringify(m.sizes)));
        break;
      case 'prepareUploads':
        viewer.prepareUploads();
        break;
      case 'setPresent':
        result = JSON.parse(viewer.setPresent(m.mode));
        break;
      case 'render':
        result = JSON.parse(await viewer.render(JSON.stringify(m.state), JSON.stringify(m.sizes)));
        break;
      case 'prepare':
        await viewer.prepare();
        break;
      case 'compute':
        result = JSON.parse(await viewer.compute(JSON.stringify(m.state)));
        break;
      case 'timePasses':
        result = viewer.timePasses(m.on);
        break;
      case 'stats':
        result = JSON.parse(await viewer.stats(m.panel));
        break;
      case 'valueAt':
        result = await viewer.valueAt(m.panel, m.r, m.c);
        break;
      case 'png':
        result = await viewer.png(m.panel);
        transfer = [result.buffer];
        break;
      case 'npy':
        result = await viewer.imageNpy();
        transfer = [result.buffer];
        break;
      case 'lineProfile':
        result = JSON.parse(await viewer.lineProfile(m.panel, m.from[0], m.from[1], m.to[0], m.to[1]));
        break;
      case 'tiff':
        result = await viewer.imageTiff();
        transfer = [result.buffer];
        break;
      case 'profile':
        result = JSON.parse(viewer.profile());
        break;
      case 'preparedPiece':
        result = viewer.preparedPiece(!!m.start);
        transfer = [result.bytes.buffer];
        break;
      case 'isOpen':
        result = viewer.isOpen();
        break;
      case 'groupFiles':
        result = JSON.parse(groupFiles(JSON.stringify(m.names)));
        break;
      case 'openCompared':
        result = JSON.parse(await viewer.openCompared(m.files, JSON.stringify(m.options || {}),
          (stage, done, total) => self.postMessage({ type: 'progress', stage, done, total })));
        break;
      case 'closeCompared':
        viewer.closeCompared();
        break;
      case 'attachCompared':
        viewer.attachCompared(m.index, m.canvas, m.plain);
        break;
      case 'comparedValueAt':
        result = await viewer.comparedValueAt(m.index, m.r, m.c);
        break;
      case 'comparedStats':
        result = JSON.parse(await viewer.comparedStats(m.index));
        break;
      case 'comparedNpy':
        result = await viewer.comparedNpy(m.index);
        transfer = [result.buffer];
        break;
      default:
        throw new Error('unknown request ' + m.op);
    }
    self.postMessage({ type: 'reply', id: m.id, result }, transfer);
  } catch (e) {
    self.postMessage({ type: 'reply', id: m.id, error: String(e && e.message ? e.message : e) });
  } finally {
    running = null;
    if (viewer) viewer.workDone();
  }
}
