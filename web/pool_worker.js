// A pool Worker of the viewer's Worker. Two jobs: read ranges of a File (a large range with
// FileReaderSync: several Workers stream one file faster than one Worker; many small ones,
// an index's B-tree nodes, one after another with FileReaderSync when the pool is large, or
// all in flight with `Blob.arrayBuffer()` when it is not), and decode a stored chunk the
// WGSL decoder does not take (deflate, shuffle) with the crate's own filter pipeline (the
// same wasm module). Several run at once, one a CPU core.
import init, { decodeChunk } from './stem4d.js';

let ready = null;
let reader = null;

self.onmessage = async ({ data: job }) => {
  try {
    if (job.op === 'read') {
      reader = reader || new FileReaderSync();
      const out = reader.readAsArrayBuffer(job.file.slice(job.offset, job.offset + job.len));
      self.postMessage({ id: job.id, out }, [out]);
      return;
    }
    if (job.op === 'reads') {
      let out;
      if (job.sync) {
        reader = reader || new FileReaderSync();
        out = job.offsets.map((o, k) => reader.readAsArrayBuffer(job.file.slice(o, o + job.lens[k])));
      } else {
        out = await Promise.all(job.offsets.map((o, k) => job.file.slice(o, o + job.lens[k]).arrayBuffer()));
      }
      self.postMessage({ id: job.id, out }, out);
      return;
    }
    await (ready = ready || init());
    const out = decodeChunk(job.filters, job.mask, job.raw, job.expected, job.elem);
    self.postMessage({ id: job.id, out }, [out.buffer]);
  } catch (e) {
    self.postMessage({ id: job.id, error: String(e && e.message ? e.message : e) });
  }
};
