//! In the browser: a prepared reopen's blocks read, checked and copied to the GPU.
//!
//! Where the page has its pool of Workers and the payload is of counts, the Workers read the
//! blocks side by side, each hashing the blocks it read and checking a packed block's index
//! (`web::check_block`), while the viewer's Worker compares each
//! digest, takes each verdict and copies the blocks through the staging ring of the bslz4
//! upload into their block buffers or segments; blocks are posted up to [`AHEAD_BYTES`]
//! ahead of their copy (decision 0045). Otherwise (float32, whose range the viewer's Worker
//! takes from the bytes, or no pool) the viewer's Worker reads the blocks one at a time and
//! the browser's Web Crypto hashes them (decision 0042).

use std::ops::Range;

use super::Destination;
use crate::error::Result;
use crate::formats::prepared::TiledPayload;
use crate::gpu::{Engine, UploadTimes};
use crate::kernels::sha256::BlockHashes;
use crate::source::{ByteSource, JsPiece, JsRead, PieceCheck, Started};
use crate::upload::plan::{FloatRange, DECODE_WINDOW};
use crate::upload::window_bytes::{JsBytes, Staging, WindowBytes};

/// The reads of a few blocks by the pool's Workers, posted.
type PooledReads<'a> = Started<'a, Result<Vec<JsRead>>>;

/// Bytes of blocks posted to the pool and not yet copied: about four packed blocks of the
/// benchmark acquisition a Worker, so that no Worker idles while the viewer's Worker
/// copies. With one batch of 16 blocks posted at a time, the 15 Workers of the H100
/// machine finished each batch two blocks deep and the reopen waited 5.3 s on them
/// (decision 0045).
const AHEAD_BYTES: u64 = 1 << 30;

/// Blocks posted to the pool in one call.
const POSTED_TOGETHER: usize = 4;

/// The blocks of one reopen, batch by batch.
pub(super) struct BlockReads<'a> {
    engine: &'a Engine,
    payload: &'a TiledPayload,
    src: &'a dyn ByteSource,
    /// Where the pool reads: the staging ring the blocks go through, and the reads ahead.
    pooled: Option<(Staging, Ahead<'a>)>,
}

/// The blocks read ahead by the pool: posted (oldest first), and read but not yet copied;
/// the next block to post and where posting ends.
struct Ahead<'a> {
    posted: std::collections::VecDeque<(Range<usize>, PooledReads<'a>)>,
    read: std::collections::VecDeque<(usize, JsRead)>,
    next: usize,
    end: usize,
    /// Whether the Workers hash the blocks (not where the GPU does, decision 0056).
    hash: bool,
}

impl<'a> Ahead<'a> {
    /// Post blocks until [`AHEAD_BYTES`] are in flight or none is left.
    fn top_up(&mut self, payload: &TiledPayload, src: &'a dyn ByteSource) {
        let bytes = |ks: Range<usize>| -> u64 { payload.blocks[ks].iter().map(|b| b.bytes).sum() };
        let held = |a: &Ahead| {
            let first = a.read.front().map(|(k, _)| *k);
            let first = first.or(a.posted.front().map(|(ks, _)| ks.start));
            first.map_or(0, |k| bytes(k..a.next))
        };
        while self.next < self.end && held(self) < AHEAD_BYTES {
            let ks = self.next..(self.next + POSTED_TOGETHER).min(self.end);
            let Some(reads) = pooled_reads(payload, src, ks.clone(), self.hash) else {
                return;
            };
            self.next = ks.end;
            self.posted.push_back((ks, reads));
        }
    }

    /// Block `k`'s read, the posted reads awaited as far as it.
    async fn take(
        &mut self,
        k: usize,
        payload: &TiledPayload,
        src: &'a dyn ByteSource,
    ) -> Result<JsRead> {
        while self.read.is_empty() {
            let Some((ks, reads)) = self.posted.pop_front() else {
                break;
            };
            let reads = reads.finish().await?;
            self.read.extend(ks.zip(reads));
            self.top_up(payload, src);
        }
        match self.read.pop_front() {
            Some((j, read)) if j == k => Ok(read),
            _ => Err(crate::error::Error::Gpu(format!(
                "the read of prepared block {k} went missing"
            ))),
        }
    }
}

impl<'a> BlockReads<'a> {
    /// The reads of a reopen of `blocks`: the first posted to the pool now where it takes
    /// them; the Workers leave the blocks' SHA-256 to the GPU where `gpu_hashes`.
    pub fn new(
        engine: &'a Engine,
        payload: &'a TiledPayload,
        src: &'a dyn ByteSource,
        blocks: Range<usize>,
        (float, gpu_hashes): (bool, bool),
    ) -> BlockReads<'a> {
        let mut ahead = Ahead {
            posted: Default::default(),
            read: Default::default(),
            next: blocks.start,
            end: blocks.end,
            hash: !gpu_hashes,
        };
        if !float {
            ahead.top_up(payload, src);
        }
        let pooled = (!ahead.posted.is_empty()).then(|| (engine.take_staging(), ahead));
        BlockReads {
            engine,
            payload,
            src,
            pooled,
        }
    }

    /// Whether the pool reads the blocks and leaves their SHA-256 to the GPU (`hashes` of
    /// [`BlockReads::copy`]): else every block is hashed on the CPU.
    pub fn gpu_hashes(&self) -> bool {
        self.pooled.as_ref().is_some_and(|(_, a)| !a.hash)
    }

    /// Read, check and copy blocks `ks` into their places in `dest`, each hashed on the GPU
    /// by `hashes` where [`BlockReads::gpu_hashes`]; the range of float32 samples merged
    /// into `float`.
    pub async fn copy(
        &mut self,
        times: &mut UploadTimes,
        ks: Range<usize>,
        (dest, hashes): (&mut Destination<'_>, Option<&BlockHashes>),
        float: Option<&mut FloatRange>,
    ) -> Result<()> {
        let mut t = crate::clock::now_ms();
        let Some((staging, ahead)) = self.pooled.as_mut() else {
            let read = read_blocks(self.payload, self.src, ks.clone(), float.is_some()).await;
            times.lap("read + check", &mut t);
            return self.write_blocks(ks, dest, read, float, times, &mut t);
        };
        let (payload, src, file) = (self.payload, self.src, self.src.name());
        // Checked blocks staged together, up to a staging buffer's worth: one map of the
        // ring and one submission for several packed blocks.
        let mut group: Vec<(usize, JsRead)> = Vec::new();
        for k in ks {
            let read = ahead.take(k, payload, src).await?;
            times.lap("read + check in the pool (waited)", &mut t);
            let read = checked(payload, file, k, read, hashes.is_some()).await?;
            times.lap("check", &mut t);
            let held: u64 = group.iter().map(|(j, _)| payload.blocks[*j].bytes).sum();
            let words = |j: usize| payload.blocks[j].bytes % 4 == 0;
            let joins = group.last().is_some_and(|(j, _)| words(*j)) && words(k);
            if !joins || held + payload.blocks[k].bytes > DECODE_WINDOW {
                Self::stage(
                    (self.engine, payload),
                    staging,
                    (&mut *dest, hashes),
                    std::mem::take(&mut group),
                    times,
                    &mut t,
                )
                .await?;
            }
            group.push((k, read));
        }
        let to = (dest, hashes);
        Self::stage((self.engine, payload), staging, to, group, times, &mut t).await
    }

    /// Copy the checked blocks of `group` (consecutive, each of whole words but perhaps the
    /// last) through one staging buffer into their places in `dest`, in one submission.
    async fn stage(
        (engine, payload): (&Engine, &TiledPayload),
        staging: &mut Staging,
        (dest, hashes): (&mut Destination<'_>, Option<&BlockHashes>),
        group: Vec<(usize, JsRead)>,
        times: &mut UploadTimes,
        t: &mut f64,
    ) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let ks: Vec<usize> = group.iter().map(|(k, _)| *k).collect();
        let bytes = JsBytes::new(group.into_iter().map(|(_, r)| r).collect(), 0)?;
        let mut enc = engine.device.create_command_encoder(&Default::default());
        let mut from = 0u64;
        match staging.fill(&engine.device, &bytes, times, t).await? {
            Some((staged, _)) => {
                for k in ks {
                    let staged = BlockBytes::Staged(&staged, from);
                    place_block(engine, payload, &mut enc, (dest, hashes), k, staged)?;
                    from += payload.blocks[k].bytes;
                }
            }
            None => {
                // The buffers are not WebGPU's own: through the queue, from wasm memory.
                let whole = WindowBytes::Js(bytes);
                for k in ks {
                    let n = payload.blocks[k].bytes as usize;
                    let host = whole
                        .copy_out(from as usize, n)
                        .ok_or_else(|| crate::error::Error::Gpu("a block's bytes".into()))?;
                    let host = BlockBytes::Host(&host);
                    place_block(engine, payload, &mut enc, (dest, hashes), k, host)?;
                    dest.finish(engine, &mut enc, payload, hashes)?;
                    // Queue writes land at the next submission: one a block, so that a
                    // block buffer is expanded before it is written again.
                    engine.queue.submit([std::mem::replace(
                        &mut enc,
                        engine.device.create_command_encoder(&Default::default()),
                    )
                    .finish()]);
                    from += n as u64;
                }
            }
        }
        // The copies out of the staging buffer are a submission of their own, so that the
        // buffer is mapped again once they are done, not once the hashes and rebases of
        // kept blocks are too (decision 0057).
        engine.queue.submit([enc.finish()]);
        staging.release();
        if dest.placing.unfinished() {
            let mut after = engine.device.create_command_encoder(&Default::default());
            dest.finish(engine, &mut after, payload, hashes)?;
            engine.queue.submit([after.finish()]);
        }
        times.lap("copy to the GPU", t);
        Ok(())
    }

    /// The blocks read by the viewer's Worker, written through the queue.
    fn write_blocks(
        &self,
        ks: Range<usize>,
        dest: &mut Destination<'_>,
        read: Vec<Read>,
        mut float: Option<&mut FloatRange>,
        times: &mut UploadTimes,
        t: &mut f64,
    ) -> Result<()> {
        for (k, block) in ks.zip(read) {
            let (bytes, range) = block?;
            if let (Some(all), Some(r)) = (float.as_deref_mut(), range) {
                all.merge(r);
            }
            let mut enc = self
                .engine
                .device
                .create_command_encoder(&Default::default());
            let host = BlockBytes::Host(&bytes);
            let to = (&mut *dest, None);
            place_block(self.engine, self.payload, &mut enc, to, k, host)?;
            dest.finish(self.engine, &mut enc, self.payload, None)?;
            self.engine.queue.submit([enc.finish()]);
        }
        times.lap("write to the GPU", t);
        Ok(())
    }
}

impl Drop for BlockReads<'_> {
    /// The staging ring goes back to the engine for the next upload, whatever this one's
    /// outcome, if it is left whole.
    fn drop(&mut self) {
        if let Some((ring, _)) = self.pooled.take() {
            self.engine.keep_staging(ring);
        }
    }
}

/// Blocks `ks` read and hashed by the pool's Workers, posted now; `None` where the source
/// has no pool.
fn pooled_reads<'a>(
    payload: &TiledPayload,
    src: &'a dyn ByteSource,
    ks: Range<usize>,
    hash: bool,
) -> Option<PooledReads<'a>> {
    let pieces = ks
        .map(|k| JsPiece {
            offset: payload.blocks[k].offset,
            len: payload.blocks[k].bytes,
            walk: None,
            check: Some(PieceCheck {
                index: payload.index_check_of(k),
                hash,
            }),
        })
        .collect();
    src.read_js(pieces).map(Started::new)
}

/// Block `k` as its Worker read it, once its SHA-256 matched and its packed index passed,
/// as the Worker found them; where it could not, hashed here by Web Crypto and its index
/// (alone) copied into wasm memory and checked here. The block stays in the buffer it was
/// read into.
async fn checked(
    payload: &TiledPayload,
    file: &str,
    k: usize,
    read: JsRead,
    on_gpu: bool,
) -> Result<JsRead> {
    let worker = read.checked.as_ref();
    let index = worker.and_then(|c| c.index.clone());
    // The Worker's digest where it hashed; none where the GPU hashes the block (decision
    // 0056), unless its index failed (hashed here, so a corrupted block is said to be one);
    // else the browser's.
    let digest = match worker {
        Some(c) if !c.digest.is_empty() => Some(c.digest.clone()),
        Some(_) if on_gpu && !matches!(index, Some(Err(_))) => None,
        _ => Some(finish_sha256(file, start_sha256(file, &read.bytes)?).await?),
    };
    let hashed = digest.is_some();
    if let Some(d) = digest {
        payload.check_digest(file, k, &d)?;
    }
    match index {
        Some(judged) if payload.index_check_of(k).is_some() => match hashed {
            true => payload.accept_judged(file, k, judged)?,
            false => payload.judged_structure(file, k, judged)?,
        },
        _ => {
            let n = (payload.accepted_prefix_bytes(k) as u32).min(read.bytes.length());
            let mut index = vec![0u8; n as usize];
            read.bytes.subarray(0, n).copy_to(&mut index);
            match hashed {
                true => payload.accept(file, k, &index)?,
                false => payload.check_structure(file, k, &index)?,
            }
        }
    }
    Ok(read)
}

/// Where a checked block's bytes are: in a staging buffer from a byte on, or in wasm memory.
enum BlockBytes<'b> {
    Staged(&'b wgpu::Buffer, u64),
    Host(&'b [u8]),
}

/// Record the copy of block `k` into its place in `dest` and what the GPU does with it
/// there. Bytes in wasm memory are written through the queue, landing at the next
/// submission, before what `enc` records.
fn place_block(
    engine: &Engine,
    payload: &TiledPayload,
    enc: &mut wgpu::CommandEncoder,
    (dest, hashes): (&mut Destination<'_>, Option<&BlockHashes>),
    k: usize,
    bytes: BlockBytes<'_>,
) -> Result<()> {
    let mut put =
        |enc: &mut wgpu::CommandEncoder, to: &wgpu::Buffer, at: u64, r: Range<usize>| match bytes {
            BlockBytes::Staged(from, start) => {
                // A copy between buffers moves whole words (staged with its padding).
                let len = (r.end - r.start).next_multiple_of(4) as u64;
                enc.copy_buffer_to_buffer(from, start + r.start as u64, to, at, len)
            }
            BlockBytes::Host(host) => engine.queue.write_buffer(to, at, &host[r]),
        };
    dest.place(engine, enc, payload, k, &mut put, hashes)
}

/// A block read and checked, and the range of its samples where they are float32 (the
/// exact sums' bounds, as the frame upload takes them).
type Read = Result<(Vec<u8>, Option<FloatRange>)>;

/// A checked block with the range of its float32 samples (`float`).
fn with_range(bytes: Vec<u8>, float: bool) -> (Vec<u8>, Option<FloatRange>) {
    let range = float.then(|| FloatRange::of_bytes(&bytes));
    (bytes, range)
}

/// Read blocks `ks` of `payload` in turn, each checked by the browser's Web Crypto (native
/// code, faster than SHA-256 in wasm on one thread, but one thread for all of a page's
/// digests: the pool's Workers hash in wasm side by side instead). A block's digest is started as soon
/// as it is read and awaited only `DIGESTS_AHEAD` blocks later, so the browser hashes off
/// this thread while the reads go on; each started digest holds a copy of its block in
/// JavaScript memory, hence the bound.
async fn read_blocks(
    payload: &TiledPayload,
    src: &dyn ByteSource,
    ks: std::ops::Range<usize>,
    float: bool,
) -> Vec<Read> {
    const DIGESTS_AHEAD: usize = 4;
    let file = src.name();
    let start = |k: usize| {
        let one = payload.read_unchecked(src, k).and_then(|bytes| {
            let promise = start_sha256(file, &js_sys::Uint8Array::from(&bytes[..]))?;
            Ok((bytes, promise))
        });
        (k, one)
    };
    let finish = |(k, one): (usize, Result<(Vec<u8>, js_sys::Promise)>)| async move {
        let (bytes, promise) = one?;
        let digest = finish_sha256(file, promise).await?;
        payload.check_digest(file, k, &digest)?;
        payload.accept(file, k, &bytes)?;
        Ok(with_range(bytes, float))
    };
    crate::upload::ahead::finished_in_order(ks, DIGESTS_AHEAD, start, finish).await
}

/// Why a payload block could not be checked in the browser.
fn sha256_failed(file: &str, what: &str) -> crate::error::Error {
    crate::error::Error::format(file, format!("cannot check a payload block: {what}"))
}

/// Start the SHA-256 of `bytes` by the browser's `crypto.subtle` (the Worker's global
/// scope): the promise of its digest.
fn start_sha256(file: &str, bytes: &js_sys::Uint8Array) -> Result<js_sys::Promise> {
    use wasm_bindgen::JsCast;
    let get = |on: &wasm_bindgen::JsValue, key: &str| {
        js_sys::Reflect::get(on, &key.into()).map_err(|_| sha256_failed(file, key))
    };
    let subtle = get(&get(&js_sys::global(), "crypto")?, "subtle")?;
    let digest: js_sys::Function = get(&subtle, "digest")?
        .dyn_into()
        .map_err(|_| sha256_failed(file, "no crypto.subtle.digest"))?;
    digest
        .call2(&subtle, &"SHA-256".into(), bytes)
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest refused it"))?
        .dyn_into()
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest gave no promise"))
}

/// The digest a started SHA-256 resolves to.
async fn finish_sha256(file: &str, promise: js_sys::Promise) -> Result<Vec<u8>> {
    let hashed = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest failed"))?;
    Ok(js_sys::Uint8Array::new(&hashed).to_vec())
}
