// A pool Worker of the viewer's Worker. Two jobs: read ranges of a File (a large range with
// FileReaderSync: several Workers stream one file faster than one Worker; many small ones,
// an index's B-tree nodes, one after another with FileReaderSync when the pool is large, or
// all in flight with `Blob.arrayBuffer()` when it is not), walking the headers of the
// chunks a large range holds when asked (`walkChunks`, so that the viewer's Worker does
// not), or of a piece read before its chunks were known, or checking a range it read
// (`checkBlock`: a prepared file's block), and decode a stored chunk the WGSL decoder does not take (deflate, shuffle) with
// the crate's own filter pipeline. Both run the same wasm module, loaded at once. Several
// run at once, one a CPU core.
import init, { checkBlock, decodeChunk, walkChunks } from './stem4d.js';

const ready = init();
// A module that cannot load fails the jobs that need it, each with the reason.
ready.catch(() => {});
let reader = null;

// Answer job `id` with the piece `bytes` and the header walks of its chunks `walk`.
async function walkAndAnswer(id, bytes, walk) {
  let walked;
  try {
    await ready;
    walked = walkChunks(new Uint8Array(bytes), walk);
  } catch (e) {
    // This Worker cannot walk (its wasm did not load): the piece goes unwalked, and the
    // viewer's Worker walks it.
    self.postMessage({ id, out: bytes }, [bytes]);
    return;
  }
  const { tables, failed, message } = walked;
  self.postMessage({ id, out: { bytes, tables, failed, message } }, [bytes, tables.buffer]);
}

// Answer job `id` with the piece `bytes` checked as `check` asks (a prepared file's payload
// block: the Workers check side by side, where crypto.subtle runs all of a page's digests
// on one thread; decision 0045): its SHA-256 (not with `check.hash` false: the GPU hashes
// it where it is copied, decision 0056), and with `check.index` ([bits, detLen,
// tiles]) the structure of its packed index (`malformed`: null where it passed, else why
// not). A Worker whose wasm did not load answers with the piece alone, and the viewer's
// Worker checks it.
async function checkAndAnswer(id, bytes, check) {
  let out;
  try {
    await ready;
    out = { bytes, ...checkBlock(new Uint8Array(bytes), check.index, check.hash !== false) };
  } catch (e) {
    self.postMessage({ id, out: bytes }, [bytes]);
    return;
  }
  self.postMessage({ id, out }, [bytes, out.digest.buffer]);
}

self.onmessage = async ({ data: job }) => {
  try {
    if (job.op === 'read') {
      reader = reader || new FileReaderSync();
      const out = reader.readAsArrayBuffer(job.file.slice(job.offset, job.offset + job.len));
      if (job.check) {
        await checkAndAnswer(job.id, out, job.check);
        return;
      }
      if (!job.walk) {
        self.postMessage({ id: job.id, out }, [out]);
        return;
      }
      await walkAndAnswer(job.id, out, job.walk);
      return;
    }
    if (job.op === 'walk') {
      // A piece read before its chunks were known (a span of B-tree leaves and their
      // chunks), sent here to be walked and sent back.
      await walkAndAnswer(job.id, job.bytes, job.walk);
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
