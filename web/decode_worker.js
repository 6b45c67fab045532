// A decode Worker: the viewer's Worker posts it stored chunks the WGSL decoder does not take
// (deflate, shuffle); it decodes them with the crate's own filter pipeline (the same wasm
// module) and posts the bytes back. Several run at once, one a CPU core.
import init, { decodeChunk } from './stem4d.js';

const ready = init();

self.onmessage = async ({ data: job }) => {
  try {
    await ready;
    const out = decodeChunk(job.filters, job.mask, job.raw, job.expected, job.elem);
    self.postMessage({ id: job.id, out }, [out.buffer]);
  } catch (e) {
    self.postMessage({ id: job.id, error: String(e && e.message ? e.message : e) });
  }
};
