// A pool Worker of the viewer's Worker. Two jobs: read ranges of a File (a large range with
// FileReaderSync: several Workers stream one file faster than one Worker; many small ones,
// an index's B-tree nodes, one after another with FileReaderSync when the pool is large, or
// all in flight with `Blob.arrayBuffer()` when it is not), walking the headers of the
// chunks a large range holds when asked (`walkChunks`, so that the viewer's Worker does
// not), and decode a stored chunk the WGSL decoder does not take (deflate, shuffle) with
// the crate's own filter pipeline. Both run the same wasm module, loaded at once. Several
// run at once, one a CPU core.
import init, { decodeChunk, walkChunks } from './stem4d.js';

const ready = init();
// A module that cannot load fails the jobs that need it, each with the reason.
ready.catch(() => {});
let reader = null;

self.onmessage = async ({ data: job }) => {
  try {
    if (job.op === 'read') {
      reader = reader || new FileReaderSync();
      const out = reader.readAsArrayBuffer(job.file.slice(job.offset, job.offset + job.len));
      if (!job.walk) {
        self.postMessage({ id: job.id, out }, [out]);
        return;
      }
      let walked;
      try {
        await ready;
        walked = walkChunks(new Uint8Array(out), job.walk);
      } catch (e) {
        // This Worker cannot walk (its wasm did not load): the piece goes unwalked, and the
        // viewer's Worker walks it.
        self.postMessage({ id: job.id, out }, [out]);
        return;
      }
      const { tables, failed, message } = walked;
      self.postMessage({ id: job.id, out: { bytes: out, tables, failed, message } }, [out, tables.buffer]);
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
    await ready;
    const out = decodeChunk(job.filters, job.mask, job.raw, job.expected, job.elem);
    self.postMessage({ id: job.id, out }, [out.buffer]);
  } catch (e) {
    self.postMessage({ id: job.id, error: String(e && e.message ? e.message : e) });
  }
};
