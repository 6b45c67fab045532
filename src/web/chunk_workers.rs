//! The page's pool Workers as chunk decoders, seen from the engine: chunks the WGSL decoder
//! does not take (deflate, shuffle) go to Workers that run this same wasm module's
//! [`decode_chunk`], so they inflate in parallel on the CPU's cores instead of one by one in
//! the engine's Worker. `web/worker.js` owns the pool; this side only posts and awaits.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::frames::{ChunkDecoder, ChunkJob, LocalFuture};

pub struct WorkerPool {
    /// `decodeChunks(jobs)` → Promise of one `Uint8Array` (decoded) or string (error) a job.
    decode: js_sys::Function,
    workers: usize,
}

// SAFETY: this crate is built for wasm32 without the `atomics` target feature, so there is
// exactly one thread and the JS handle can never be shared across threads.
#[cfg(not(target_feature = "atomics"))]
unsafe impl Send for WorkerPool {}
#[cfg(not(target_feature = "atomics"))]
unsafe impl Sync for WorkerPool {}

impl WorkerPool {
    pub fn new(decode: js_sys::Function, workers: usize) -> WorkerPool {
        WorkerPool {
            decode,
            workers: workers.max(1),
        }
    }

    async fn post(&self, jobs: Vec<ChunkJob>) -> Result<js_sys::Array, String> {
        let list = js_sys::Array::new();
        for j in jobs {
            let filters = serde_json::to_string(&*j.filters).map_err(|e| e.to_string())?;
            let job = js_sys::Object::new();
            let set = |k: &str, v: JsValue| js_sys::Reflect::set(&job, &k.into(), &v);
            let raw = js_sys::Uint8Array::from(j.raw.as_slice());
            let ok = set("filters", filters.into())
                .and(set("mask", j.filter_mask.into()))
                .and(set("raw", raw.into()))
                .and(set("expected", (j.expected as f64).into()))
                .and(set("elem", (j.elem as u32).into()));
            ok.map_err(|_| "a decode job could not be built".to_string())?;
            list.push(&job);
        }
        let promise = self
            .decode
            .call1(&JsValue::NULL, &list)
            .map_err(|e| format!("the decode Workers refused the jobs: {e:?}"))?;
        let answers = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&promise))
            .await
            .map_err(|e| format!("the decode Workers failed: {e:?}"))?;
        Ok(js_sys::Array::from(&answers))
    }
}

impl ChunkDecoder for WorkerPool {
    fn decode<'a>(&'a self, jobs: Vec<ChunkJob>) -> LocalFuture<'a, Vec<Result<Vec<u8>, String>>> {
        let n = jobs.len();
        Box::pin(async move {
            match self.post(jobs).await {
                Ok(answers) => answers
                    .iter()
                    .map(|a| match a.dyn_ref::<js_sys::Uint8Array>() {
                        Some(bytes) => Ok(bytes.to_vec()),
                        None => Err(a
                            .as_string()
                            .unwrap_or_else(|| "the decode Worker gave no answer".into())),
                    })
                    .collect(),
                Err(why) => vec![Err(why); n],
            }
        })
    }

    fn workers(&self) -> usize {
        self.workers
    }
}

/// What a decode Worker runs: one stored chunk through the filter pipeline (`filters` as
/// the JSON of [`crate::decode::Filter`]s), to its `expected` logical bytes.
#[wasm_bindgen(js_name = decodeChunk)]
pub fn decode_chunk(
    filters: &str,
    mask: u32,
    raw: &[u8],
    expected: usize,
    elem: usize,
) -> Result<Vec<u8>, JsValue> {
    let filters: Vec<crate::decode::Filter> = serde_json::from_str(filters)
        .map_err(|e| JsValue::from_str(&format!("bad filter list: {e}")))?;
    crate::decode::decode_chunk(&filters, mask, raw, expected, elem)
        .map_err(|e| JsValue::from_str(&e.0))
}

/// Run in a pool Worker on a piece it read: the header walks of the chunks `jobs` names in
/// `piece` (`decode::walk`), as `{tables: Uint32Array, failed, message}`; `failed` is the
/// first failing chunk's place in `jobs` (its `message` says why), or -1. The headers are
/// read where the piece lies, through a `DataView`: copying every piece into this Worker's
/// wasm memory would grow it by a piece for good, in each Worker of the pool.
#[wasm_bindgen(js_name = walkChunks)]
pub fn walk_chunks(piece: js_sys::Uint8Array, jobs: &[u32]) -> Result<js_sys::Object, JsValue> {
    let read = crate::source::JsRead {
        bytes: piece,
        walk: None,
        checked: None,
    };
    let bytes =
        crate::upload::window_bytes::JsBytes::new(vec![read], 0).map_err(|e| e.to_string())?;
    let (words, failed) = crate::decode::walk::walk(&bytes, jobs);
    let out = js_sys::Object::new();
    let (k, message) = match failed {
        Some((k, e)) => (k as f64, e.0),
        None => (-1.0, String::new()),
    };
    let set = |key: &str, v: JsValue| js_sys::Reflect::set(&out, &key.into(), &v);
    set("tables", js_sys::Uint32Array::from(&words[..]).into())
        .and(set("failed", k.into()))
        .and(set("message", message.into()))?;
    Ok(out)
}

/// Run in a pool Worker on a prepared file's payload block it read (decision 0045): the
/// block's SHA-256 and, with `index` (`[bits, det_len, tiles]` of a packed block), the
/// structure check of its index as the viewer's Worker would run it (`IndexCheck`), as
/// `{digest, malformed}` (`malformed`: null where the index passed, else why not; absent
/// without `index`). The Workers check their blocks side by side, where the browser's
/// `crypto.subtle` runs every digest of the page on one thread.
#[wasm_bindgen(js_name = checkBlock)]
pub fn check_block(
    piece: js_sys::Uint8Array,
    index: Option<Vec<f64>>,
    hash: bool,
) -> Result<js_sys::Object, JsValue> {
    let index = match index.as_deref() {
        None => None,
        Some(&[bits, det_len, tiles]) => Some((bits as u32, det_len as usize, tiles as u64)),
        Some(_) => {
            return Err(JsValue::from_str(
                "an index check takes [bits, detLen, tiles]",
            ))
        }
    };
    let checked = check_piece(&piece, index, hash);
    let out = js_sys::Object::new();
    let digest = js_sys::Uint8Array::from(&checked.digest[..]);
    let set = |key: &str, v: JsValue| js_sys::Reflect::set(&out, &key.into(), &v);
    set("digest", digest.into())?;
    if let Some(judged) = checked.index {
        set(
            "malformed",
            judged.err().map_or(JsValue::NULL, JsValue::from),
        )?;
    }
    Ok(out)
}

/// What [`check_block`] finds of `piece`, in one pass through a buffer of [`HASH_STEP`]
/// bytes (so that the Worker's wasm memory does not grow by a block): its SHA-256 and, with
/// `index` (sample bits, detector pixels, tiles), the outcome of its packed index's check.
pub fn check_piece(
    piece: &js_sys::Uint8Array,
    index: Option<(u32, usize, u64)>,
    hash: bool,
) -> crate::source::PieceChecked {
    use crate::formats::prepared::packed_sectors::IndexCheck;
    use sha2::{Digest, Sha256};
    let n = piece.length();
    // The index check (it reads the index, and passes over the data), and its first failure.
    let mut check = index.map(|(bits, det_len, tiles)| {
        (IndexCheck::of_block(bits, det_len, tiles, n as u64), Ok(()))
    });
    let mut step = vec![0u8; HASH_STEP.min(n) as usize];
    let mut digest = hash.then(Sha256::new);
    let mut at = 0u32;
    while at < n {
        let end = at.saturating_add(HASH_STEP).min(n);
        let part = &mut step[..(end - at) as usize];
        piece.subarray(at, end).copy_to(part);
        if let Some(h) = digest.as_mut() {
            h.update(&*part);
        }
        if let Some((c, judged @ Ok(()))) = check.as_mut() {
            *judged = c.feed(part);
        }
        at = end;
    }
    let index = check.map(|(c, judged)| judged.and_then(|_| c.finish()).map_err(|m| m.0));
    crate::source::PieceChecked {
        digest: digest.map_or_else(Vec::new, |h| h.finalize().to_vec()),
        index,
    }
}

/// The bytes [`check_piece`] copies into wasm memory at a time: within the CPU's caches.
const HASH_STEP: u32 = 1 << 20;
