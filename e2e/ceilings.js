// Ceilings of the browser under the loader (BENCHMARKS.md, load table; decision 0013): how fast
// Chromium's File API reads `file` with N Workers, by piece size and API, how fast its small
// reads go, and how fast bytes reach the GPU by each upload route. Run by e2e/h200.py with
// CEILINGS=1 on its LOCAL_FILE; no part of the viewer is involved.
const MiB = 1 << 20;
const GiB = 1024 * MiB;
export const READS = [
  { api: 'sync', workers: 1, piece: 4 * MiB, total: GiB },
  { api: 'sync', workers: 4, piece: 4 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 4 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 16 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 32 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 64 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 8, piece: 64 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 16 * MiB, total: 2 * GiB, perJob: true, deliver: true },
  { api: 'blob', workers: 15, piece: 16 * MiB, total: 2 * GiB, inflight: 2 },
  { api: 'stream', workers: 8, piece: 64 * MiB, total: 2 * GiB },
  { api: 'sync', workers: 15, piece: 64 * MiB, total: 6 * GiB },
];

export async function run(file, which = 'all') {
  if (which === 'small') return { reads: await smallTest(file), uploads: [] };
  return { reads: await readTest(file, READS), uploads: await uploadTest() };
}

// 4,100 node-sized reads spread over `file` (`nodes` Workers, `api`, `per` ranges a
// composite read), alone or while 15 Workers read 2 GiB of it in 32 MiB pieces: how much
// the two kinds of read slow each other (a deferred index reads its leaves during the load).
export async function smallTest(file) {
  const out = [];
  const offs = Array.from({ length: 4100 }, (_, k) => Math.floor(k * (file.size - 8192) / 4100));
  const small = async (workers, api, per) => {
    const ws = Array.from({ length: workers }, () => new Worker('/e2e/ceiling_worker.js'));
    await Promise.all(ws.map((w) => new Promise((r) => { w.onmessage = r; w.postMessage({ op: 'ping', file }); })));
    const t0 = performance.now();
    await Promise.all(ws.map((w, i) => new Promise((r) => { w.onmessage = ({ data }) => r(data); w.postMessage({ op: 'small', api, per, len: 3136, offs: offs.filter((_, k) => k % workers === i) }); })));
    ws.forEach((w) => w.terminate());
    return performance.now() - t0;
  };
  const big = [{ api: 'sync', workers: 15, piece: 32 * MiB, total: 2 * GiB }];
  for (const [workers, api, per] of [[4, 'sync', 1], [1, 'composite', 32], [1, 'composite', 256], [4, 'composite', 32], [1, 'composite', 4100]]) {
    const alone = await small(workers, api, per);
    const both = await Promise.all([small(workers, api, per), readTest(file, big, true)]);
    out.push({ small_nodes: 4100, workers, api, per, alone_ms: alone, with_big_ms: both[0], big_with_small: both[1][0] });
  }
  out.push({ big_alone: (await readTest(file, big, true))[0] });
  return out;
}

export async function readTest(file, configs, bigOnly = false) {
  const out = [];
  const sink = new Uint8Array(256 << 20);
  for (const cfg of configs) {
    const { workers, piece, total, api, inflight = 1, perJob = false, deliver = false } = cfg;
    const ws = Array.from({ length: workers }, () => new Worker('/e2e/ceiling_worker.js'));
    await Promise.all(ws.map((w) => new Promise((r) => { w.onmessage = r; w.postMessage({ op: 'ping', file: perJob ? undefined : file }); })));
    const pieces = [];
    for (let o = 0; o < Math.min(total, file.size); o += piece) pieces.push([o, Math.min(piece, file.size - o)]);
    let next = 0, bytes = 0, errs = [], copyMs = 0, at = 0;
    const t0 = performance.now();
    await Promise.all(ws.map((w) => new Promise((done) => {
      let active = 0;
      const feed = () => {
        while (active < inflight && next < pieces.length) {
          const [o, l] = pieces[next++]; active++;
          w.postMessage({ op: 'read', file: perJob ? file : undefined, o, l, api, deliver });
        }
        if (active === 0) done();
      };
      w.onmessage = ({ data }) => {
        active--; bytes += data.n; if (data.err) errs.push(data.err);
        if (data.b) {
          const c0 = performance.now();
          const v = new Uint8Array(data.b);
          if (at + v.length > sink.length) at = 0;
          sink.set(v, at); at += v.length;
          copyMs += performance.now() - c0;
        }
        feed();
      };
      feed();
    })));
    const ms = performance.now() - t0;
    out.push({ ...cfg, ms, gbps: bytes / ms / 1e6, copyMs, errs: errs.slice(0, 3) });
    ws.forEach((w) => w.terminate());
  }
  if (bigOnly) return out;
  // 4,100 node-sized reads spread over the file, shared by W Workers.
  for (const [workers, api] of [[15, 'sync'], [15, 'blob'], [4, 'sync'], [8, 'sync']]) {
    const ws = Array.from({ length: workers }, () => new Worker('/e2e/ceiling_worker.js'));
    await Promise.all(ws.map((w) => new Promise((r) => { w.onmessage = r; w.postMessage({ op: 'ping', file }); })));
    const offs = Array.from({ length: 4100 }, (_, k) => Math.floor(k * (file.size - 8192) / 4100));
    const t0 = performance.now();
    await Promise.all(ws.map((w, i) => new Promise((r) => { w.onmessage = ({ data }) => r(data); w.postMessage({ op: 'small', api, len: 3600, offs: offs.filter((_, k) => k % workers === i) }); })));
    out.push({ small_nodes: 4100, workers, api, ms: performance.now() - t0 });
    ws.forEach((w) => w.terminate());
  }
  // Small reads (an index's B-tree nodes): latency one by one, and 2,000 in flight.
  const t1 = performance.now();
  for (let k = 0; k < 100; k++) await file.slice(k * 65536, k * 65536 + 4096).arrayBuffer();
  const seq = (performance.now() - t1) / 100;
  const t2 = performance.now();
  await Promise.all(Array.from({ length: 2000 }, (_, k) => file.slice(k * 2.5e6, k * 2.5e6 + 4096).arrayBuffer()));
  const par = performance.now() - t2;
  out.push({ small_seq_ms_each: seq, small_2000_parallel_ms: par });
  return out;
}

// Upload ceiling through Chromium's GPU process: 2 GiB into the GPU by several routes.
export async function uploadTest() {
  let adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) { await new Promise((r) => setTimeout(r, 600)); adapter = await navigator.gpu.requestAdapter(); }
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: 1 << 30, maxStorageBufferBindingSize: 1 << 30 } });
  const out = [{ adapter: adapter.info && adapter.info.description }];
  const TOTAL = 2 * GiB;
  const src = new Uint8Array(64 << 20);
  for (let i = 0; i < src.length; i += 4096) src[i] = i & 255;
  const dst = [0, 1, 2].map(() => device.createBuffer({ size: 64 << 20, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC }));
  const q = device.queue;
  // writeBuffer of `piece` bytes, keeping at most `depth` pieces in flight.
  for (const [piece, depth] of [[64 << 20, 2], [16 << 20, 4], [4 << 20, 8], [64 << 20, 6]]) {
    const t0 = performance.now();
    const pend = [];
    for (let done = 0, k = 0; done < TOTAL; done += piece, k++) {
      q.writeBuffer(dst[k % 3], (k * piece) % (64 << 20), src, 0, piece);
      pend.push(q.onSubmittedWorkDone());
      if (pend.length >= depth) await pend.shift();
    }
    await Promise.all(pend);
    const ms = performance.now() - t0;
    out.push({ route: 'writeBuffer', piece, depth, ms, gbps: TOTAL / ms / 1e6 });
  }
  // A ring of MAP_WRITE staging buffers: map, fill from `src`, unmap, copy into dst.
  for (const ring of [2, 4]) {
    const st = Array.from({ length: ring }, () => device.createBuffer({ size: 64 << 20, usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC }));
    const t0 = performance.now();
    let fillMs = 0;
    const maps = st.map((b) => b.mapAsync(GPUMapMode.WRITE));
    for (let done = 0, k = 0; done < TOTAL; done += 64 << 20, k++) {
      const b = st[k % ring];
      await maps[k % ring];
      const f0 = performance.now();
      new Uint8Array(b.getMappedRange()).set(src);
      fillMs += performance.now() - f0;
      b.unmap();
      const enc = device.createCommandEncoder();
      enc.copyBufferToBuffer(b, 0, dst[k % 3], 0, 64 << 20);
      q.submit([enc.finish()]);
      maps[k % ring] = b.mapAsync(GPUMapMode.WRITE);
    }
    await Promise.all(maps);
    const ms = performance.now() - t0;
    out.push({ route: 'mapWrite ring', ring, ms, gbps: TOTAL / ms / 1e6, fillMs });
    st.forEach((b) => b.destroy());
  }
  // A buffer mapped at creation per 64 MiB.
  {
    const t0 = performance.now();
    const pend = [];
    for (let done = 0, k = 0; done < TOTAL; done += 64 << 20, k++) {
      const b = device.createBuffer({ size: 64 << 20, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
      new Uint8Array(b.getMappedRange()).set(src);
      b.unmap();
      const enc = device.createCommandEncoder();
      enc.copyBufferToBuffer(b, 0, dst[k % 3], 0, 64 << 20);
      q.submit([enc.finish()]);
      pend.push(q.onSubmittedWorkDone().then(() => b.destroy()));
      if (pend.length >= 3) await pend.shift();
    }
    await Promise.all(pend);
    const ms = performance.now() - t0;
    out.push({ route: 'mappedAtCreation', ms, gbps: TOTAL / ms / 1e6 });
  }
  device.destroy();
  return out;
}
