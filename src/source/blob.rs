//! Local files in the browser: random access to a `File` through `Blob.slice` and
//! `FileReaderSync`, which only a dedicated Worker has. Read-only by construction.

use std::sync::atomic::{AtomicU64, Ordering};

use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};
use crate::source::in_flight::{ReadKey, ReadsInFlight};
use crate::source::{check_range, ByteSource, JsPiece, JsRead, LocalFuture};

/// Microseconds spent in file reads since the page loaded (the profile's "read" stage).
static READ_MICROS: AtomicU64 = AtomicU64::new(0);

pub fn read_ms() -> f64 {
    READ_MICROS.load(Ordering::Relaxed) as f64 / 1e3
}

pub struct BlobSource {
    name: String,
    len: u64,
    file: web_sys::File,
    reader: web_sys::FileReaderSync,
    /// `readRanges(file, offsets, lengths)` → Promise of ArrayBuffers, read by the page's
    /// Worker pool in parallel; without it, several `Blob.arrayBuffer()` calls in flight.
    pool: Option<js_sys::Function>,
    /// `walkPieces(buffers, walks)` → Promise of walked answers: the same pool walks chunk
    /// headers in buffers read already (leaf spans, whose chunks are known once read).
    walker: Option<js_sys::Function>,
    /// The pool's answers to reads in flight, for a read let go unawaited (decision 0046).
    in_flight: ReadsInFlight,
}

// SAFETY: this crate is built for wasm32 without the `atomics` target feature, so there is
// exactly one thread and the JS handles can never be shared across threads.
#[cfg(not(target_feature = "atomics"))]
unsafe impl Send for BlobSource {}
#[cfg(not(target_feature = "atomics"))]
unsafe impl Sync for BlobSource {}

impl BlobSource {
    pub fn new(
        file: web_sys::File,
        pool: Option<js_sys::Function>,
        walker: Option<js_sys::Function>,
    ) -> Result<BlobSource> {
        let name = file.name();
        let reader = web_sys::FileReaderSync::new().map_err(|_| Error::Io {
            file: name.clone(),
            message: "FileReaderSync is unavailable: files are read in the viewer's Worker".into(),
        })?;
        Ok(BlobSource {
            len: file.size() as u64,
            name,
            file,
            reader,
            pool,
            walker,
            in_flight: Default::default(),
        })
    }
}

impl ByteSource for BlobSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_range(&self.name, self.len, offset, buf.len() as u64)?;
        let t = crate::clock::now_ms();
        let bytes = self
            .reader
            .read_as_array_buffer(&self.slice(offset, buf.len())?)
            .map_err(|_| self.io("reading", offset, buf.len()))?;
        self.copy_out(&bytes, offset, buf)?;
        count_read_time(t);
        Ok(())
    }

    /// Through the pool's Workers; a page without a pool reads into wasm memory instead.
    fn read_js(&self, pieces: Vec<JsPiece>) -> Option<JsReads<'_>> {
        let pool = self.pool.as_ref()?;
        Some(Box::pin(self.read_pieces(pool, pieces)))
    }

    fn forget_reads_in_flight(&self) {
        self.in_flight.clear();
    }

    fn walk_js(&self, pieces: Vec<(js_sys::Uint8Array, Vec<u32>)>) -> Option<JsReads<'_>> {
        let walker = self.walker.as_ref()?;
        // A buffer goes to a Worker and back whole: a view of part of one cannot.
        let whole =
            |p: &js_sys::Uint8Array| p.byte_offset() == 0 && p.length() == p.buffer().byte_length();
        if !pieces.iter().all(|(p, _)| whole(p)) {
            return None;
        }
        Some(Box::pin(self.walk_pieces(walker, pieces)))
    }

    /// All reads in flight at once: through the page's pool Workers, or as
    /// `Blob.arrayBuffer()` calls. Chromium streams several ranges of a file in parallel,
    /// where `FileReaderSync` takes them one by one.
    fn read_many<'a>(&'a self, reads: Vec<(u64, &'a mut [u8])>) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            let t = crate::clock::now_ms();
            let (first, len) = reads.first().map_or((0, 0), |(o, b)| (*o, b.len()));
            let (offsets, lens) = (js_sys::Array::new(), js_sys::Array::new());
            let pending = js_sys::Array::new();
            for (offset, buf) in &reads {
                check_range(&self.name, self.len, *offset, buf.len() as u64)?;
                if self.pool.is_some() {
                    offsets.push(&(*offset as f64).into());
                    lens.push(&(buf.len() as f64).into());
                } else {
                    pending.push(&self.slice(*offset, buf.len())?.array_buffer());
                }
            }
            let all = match &self.pool {
                Some(pool) => {
                    self.pool_call(
                        pool,
                        &[self.file.as_ref(), offsets.as_ref(), lens.as_ref()],
                        first,
                        len,
                    )
                    .await?
                }
                None => {
                    let all = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::all(&pending))
                        .await
                        .map_err(|_| self.io("reading", first, len))?;
                    js_sys::Array::from(&all)
                }
            };
            for (i, (offset, buf)) in reads.into_iter().enumerate() {
                self.copy_out(&all.get(i as u32), offset, buf)?;
            }
            count_read_time(t);
            Ok(())
        })
    }
}

/// Pieces as the pool delivers them.
type JsReads<'a> = LocalFuture<'a, Result<Vec<JsRead>>>;

impl BlobSource {
    /// The chunks of `pieces` walked by `walker`'s Workers, a piece whose job list is empty
    /// kept here. A piece comes back unwalked where its Worker could not walk (the viewer's
    /// Worker then walks the window).
    async fn walk_pieces(
        &self,
        walker: &js_sys::Function,
        pieces: Vec<(js_sys::Uint8Array, Vec<u32>)>,
    ) -> Result<Vec<JsRead>> {
        // Taken before the buffers go: a view of a buffer sent away has length 0.
        let lens: Vec<u32> = pieces.iter().map(|(p, _)| p.length()).collect();
        let (buffers, walks) = (js_sys::Array::new(), js_sys::Array::new());
        for (p, jobs) in pieces.iter().filter(|(_, jobs)| has_jobs(jobs)) {
            buffers.push(&p.buffer());
            walks.push(&js_sys::Uint32Array::from(&jobs[..]));
        }
        let fail = || Error::Io {
            file: self.name.clone(),
            message: "the pool Workers did not walk the chunk headers of a span read".into(),
        };
        let answers = walker
            .call2(&JsValue::NULL, &buffers, &walks)
            .map(|p| js_sys::Promise::resolve(&p))
            .map_err(|_| fail())?;
        let answers = js_sys::Array::from(
            &wasm_bindgen_futures::JsFuture::from(answers)
                .await
                .map_err(|_| fail())?,
        );
        let mut walked = answers.iter();
        let mut out = Vec::with_capacity(pieces.len());
        for ((p, jobs), len) in pieces.into_iter().zip(lens) {
            let read = if !has_jobs(&jobs) {
                let walk = crate::decode::walk::PieceWalk {
                    words: Vec::new(),
                    failed: None,
                };
                JsRead {
                    bytes: p,
                    walk: Some(walk),
                    checked: None,
                }
            } else {
                let got = walked.next().ok_or_else(fail)?;
                match walked_answer(&got) {
                    Some((bytes, walk)) => JsRead {
                        bytes,
                        walk: Some(walk),
                        checked: None,
                    },
                    None if got.is_instance_of::<js_sys::ArrayBuffer>() => JsRead {
                        bytes: js_sys::Uint8Array::new(&got),
                        walk: None,
                        checked: None,
                    },
                    None => return Err(fail()),
                }
            };
            if read.bytes.length() != len {
                return Err(fail());
            }
            out.push(read);
        }
        Ok(out)
    }

    /// `pieces` read (and walked) by `pool`.
    async fn read_pieces(
        &self,
        pool: &js_sys::Function,
        pieces: Vec<JsPiece>,
    ) -> Result<Vec<JsRead>> {
        let t = crate::clock::now_ms();
        let (offsets, lens, walks, checks) = (
            js_sys::Array::new(),
            js_sys::Array::new(),
            js_sys::Array::new(),
            js_sys::Array::new(),
        );
        for p in &pieces {
            check_range(&self.name, self.len, p.offset, p.len)?;
            offsets.push(&(p.offset as f64).into());
            lens.push(&(p.len as f64).into());
            walks.push(&match &p.walk {
                Some(jobs) => js_sys::Uint32Array::from(&jobs[..]).into(),
                None => JsValue::UNDEFINED,
            });
            checks.push(&match &p.check {
                Some(c) => check_job(c),
                None => JsValue::UNDEFINED,
            });
        }
        let (first, len) = pieces
            .first()
            .map_or((0, 0), |p| (p.offset, p.len as usize));
        let key = ReadKey::of(&pieces);
        let args = [
            self.file.as_ref(),
            offsets.as_ref(),
            lens.as_ref(),
            walks.as_ref(),
            checks.as_ref(),
        ];
        let promise = self
            .in_flight
            .promise(&key, || self.pool_promise(pool, &args, first, len))?;
        let all = self.pool_answers(promise, first, len).await;
        self.in_flight.answered(&key);
        let all = all?;
        let mut out = Vec::with_capacity(pieces.len());
        for (i, p) in pieces.iter().enumerate() {
            let got = all.get(i as u32);
            // A piece comes unwalked where it was not asked to be walked, or its Worker
            // could not walk it (then the viewer's Worker does).
            let read = match &p.walk {
                _ if got.is_instance_of::<js_sys::ArrayBuffer>() => JsRead {
                    bytes: js_sys::Uint8Array::new(&got),
                    walk: None,
                    checked: None,
                },
                None if p.check.is_some() => {
                    let (bytes, checked) = checked_answer(&got)
                        .ok_or_else(|| self.io("checking", p.offset, p.len as usize))?;
                    JsRead {
                        bytes,
                        walk: None,
                        checked: Some(checked),
                    }
                }
                None => return Err(self.io("reading", p.offset, p.len as usize)),
                Some(_) => {
                    let (bytes, walk) = walked_answer(&got).ok_or_else(|| {
                        self.io("walking the chunks of", p.offset, p.len as usize)
                    })?;
                    JsRead {
                        bytes,
                        walk: Some(walk),
                        checked: None,
                    }
                }
            };
            if read.bytes.length() as u64 != p.len {
                return Err(self.io("short read of", p.offset, p.len as usize));
            }
            out.push(read);
        }
        count_read_time(t);
        Ok(out)
    }

    /// `readRanges(file, offsets, lens[, walks, checks])` awaited: an answer a range. A
    /// failure names the file and the first range, `first` and `len`.
    async fn pool_call(
        &self,
        pool: &js_sys::Function,
        args: &[&JsValue],
        first: u64,
        len: usize,
    ) -> Result<js_sys::Array> {
        let promise = self.pool_promise(pool, args, first, len)?;
        self.pool_answers(promise, first, len).await
    }

    /// `readRanges(…)` called: its reads are posted to the Workers now.
    fn pool_promise(
        &self,
        pool: &js_sys::Function,
        args: &[&JsValue],
        first: u64,
        len: usize,
    ) -> Result<js_sys::Promise> {
        let args: js_sys::Array = args.iter().copied().collect();
        pool.apply(&JsValue::NULL, &args)
            .map(|p| js_sys::Promise::resolve(&p))
            .map_err(|_| self.io("reading", first, len))
    }

    /// The answers of a [`BlobSource::pool_promise`].
    async fn pool_answers(
        &self,
        promise: js_sys::Promise,
        first: u64,
        len: usize,
    ) -> Result<js_sys::Array> {
        let all = wasm_bindgen_futures::JsFuture::from(promise)
            .await
            .map_err(|_| self.io("reading", first, len))?;
        Ok(js_sys::Array::from(&all))
    }

    /// A failed File API step on `len` bytes at `offset`, named by file.
    fn io(&self, what: &str, offset: u64, len: usize) -> Error {
        Error::Io {
            file: self.name.clone(),
            message: format!(
                "{what} {len} bytes at offset {offset} failed (was the file moved or changed?)"
            ),
        }
    }

    fn slice(&self, offset: u64, len: usize) -> Result<web_sys::Blob> {
        let end = offset + len as u64;
        self.file
            .slice_with_f64_and_f64(offset as f64, end as f64)
            .map_err(|_| self.io("slicing", offset, len))
    }

    /// Copy a read's ArrayBuffer into `buf`; a short read is an error.
    fn copy_out(&self, bytes: &JsValue, offset: u64, buf: &mut [u8]) -> Result<()> {
        let view = js_sys::Uint8Array::new(bytes);
        if view.length() as usize != buf.len() {
            return Err(self.io("short read of", offset, buf.len()));
        }
        view.copy_to(buf);
        Ok(())
    }
}

fn count_read_time(since_ms: f64) {
    READ_MICROS.fetch_add(
        ((crate::clock::now_ms() - since_ms) * 1e3) as u64,
        Ordering::Relaxed,
    );
}

/// Whether a `decode::walk` job list names a chunk (its first word is the element size).
fn has_jobs(jobs: &[u32]) -> bool {
    jobs.len() > 1
}

/// A check's job for `web/pool_worker.js`: `{index, hash}`, the packed index's `[bits,
/// det_len, tiles]` or undefined (SHA-256 alone), and `hash: false` where the GPU hashes.
fn check_job(c: &crate::source::PieceCheck) -> JsValue {
    let job = js_sys::Object::new();
    if let Some((bits, det_len, tiles)) = c.index {
        let index: js_sys::Array = [bits as f64, det_len as f64, tiles as f64]
            .iter()
            .map(|&v| JsValue::from(v))
            .collect();
        let _ = js_sys::Reflect::set(&job, &"index".into(), &index);
    }
    if !c.hash {
        let _ = js_sys::Reflect::set(&job, &"hash".into(), &JsValue::FALSE);
    }
    job.into()
}

/// A checked read's answer from `web/pool_worker.js`, `{bytes, digest, malformed}` (the
/// piece, and what `web::check_block` found: its SHA-256, and where its index was checked
/// the reason it failed or null; undefined where it was not);
/// `None` if the answer is not one.
fn checked_answer(answer: &JsValue) -> Option<(js_sys::Uint8Array, crate::source::PieceChecked)> {
    let get = |key: &str| js_sys::Reflect::get(answer, &key.into()).ok();
    let bytes = get("bytes")?.dyn_into::<js_sys::ArrayBuffer>().ok()?;
    let digest = get("digest")?.dyn_into::<js_sys::Uint8Array>().ok()?;
    let index = match get("malformed") {
        Some(m) if m.is_undefined() => None,
        Some(m) if m.is_null() => Some(Ok(())),
        Some(m) => Some(Err(m.as_string()?)),
        None => None,
    };
    let checked = crate::source::PieceChecked {
        digest: digest.to_vec(),
        index,
    };
    Some((js_sys::Uint8Array::new(&bytes), checked))
}

/// A walked read's answer from `web/pool_worker.js`, `{bytes, tables, failed, message}`
/// (what `web::walk_chunks` gave, and the piece): the piece and its walks; `None` if the
/// answer is not one.
pub fn walked_answer(
    answer: &JsValue,
) -> Option<(js_sys::Uint8Array, crate::decode::walk::PieceWalk)> {
    let field = |k: &str| js_sys::Reflect::get(answer, &k.into()).ok();
    let bytes = field("bytes").filter(|b| b.is_instance_of::<js_sys::ArrayBuffer>())?;
    let tables = field("tables").filter(|t| t.is_instance_of::<js_sys::Uint32Array>())?;
    let failed = match field("failed")?.as_f64()? {
        k if k >= 0.0 => {
            let why = field("message")
                .and_then(|m| m.as_string())
                .unwrap_or_default();
            Some((k as usize, why))
        }
        _ => None,
    };
    let walk = crate::decode::walk::PieceWalk {
        words: js_sys::Uint32Array::from(tables).to_vec(),
        failed,
    };
    Some((js_sys::Uint8Array::new(&bytes), walk))
}
