//! The upload of a prepared acquisition (`formats::prepared`, decision 0037): its payload is
//! the resident's own layout, so each block is read, checked against its SHA-256 and copied
//! into the segments it covers; nothing is decoded, packed or tiled. Taken where the
//! resident is the payload or a run of its tiles (no bin; the whole scan, or blocks of
//! whole scan rows on tile boundaries, as streaming and the compressed build read), bad-pixel
//! masking then applied on the GPU (the file's pixels and sentinel samples zeroed);
//! otherwise the frames are read back out of the tiles on the CPU
//! and uploaded as any raw frames are.

use crate::error::Result;
use crate::formats::prepared::TiledPayload;
use crate::formats::{Acquisition, Part, PartKind};
use crate::frames::Correction;
use crate::gpu::{Engine, Resident, UploadTimes};
use crate::source::ByteSource;
use crate::upload::plan::{FloatRange, ResidentPlan};

/// Blocks read (and checked) together before they are copied: natively one per core.
const BLOCKS_AT_ONCE: usize = 16;

/// A block read and checked, and the range of its samples where they are float32 (the
/// exact sums' bounds, as the frame upload takes them).
#[cfg(target_arch = "wasm32")]
type Read = Result<(Vec<u8>, Option<FloatRange>)>;

/// A checked block with the range of its float32 samples (`float`).
#[cfg(target_arch = "wasm32")]
fn with_range(bytes: Vec<u8>, float: bool) -> (Vec<u8>, Option<FloatRange>) {
    let range = float.then(|| FloatRange::of_bytes(&bytes));
    (bytes, range)
}

/// A resident segment: its first and last tile in the payload.
type Segment = (u64, u64);

/// Where block `k`'s tiles go: per segment it overlaps, the byte range of the block and the
/// byte in the segment's buffer it starts at.
fn block_targets(
    payload: &TiledPayload,
    k: usize,
    segments: &[Segment],
    tile_bytes: u64,
) -> Vec<(std::ops::Range<usize>, usize, u64)> {
    let b = &payload.blocks[k];
    let (b0, b1) = (b.first_tile, b.first_tile + b.tiles);
    let mut out = Vec::new();
    for (i, (s0, s1)) in segments.iter().enumerate() {
        let (a, z) = (b0.max(*s0), b1.min(*s1));
        if a < z {
            let bytes = ((a - b0) * tile_bytes) as usize..((z - b0) * tile_bytes) as usize;
            out.push((bytes, i, (a - s0) * tile_bytes));
        }
    }
    out
}

/// Natively: blocks `ks` read, checked and staged on every core, each block by one thread
/// in pieces that go from the read through the hash into the staging ring while they are in
/// the CPU's caches; then, every block checked, copied on the GPU into the segments they
/// cover (nothing of a block that fails its SHA-256 reaches a segment). Every batch takes
/// the same slots, one per block: where the adapter maps them in device memory they count
/// in the plan's peak as the queue's staging of a batch did, and their copies are between
/// GPU buffers. Before, blocks were read whole, hashed, and copied into the queue's fresh
/// staging memory (decision 0043). The float32 range of each block where `float`.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
fn copy_blocks(
    engine: &Engine,
    ring: &mut crate::upload::host_staging::HostStaging,
    payload: &TiledPayload,
    src: &dyn ByteSource,
    ks: std::ops::Range<usize>,
    segments: &[Segment],
    buffers: &[wgpu::Buffer],
    tile_bytes: u64,
    float: bool,
) -> Result<Vec<Option<FloatRange>>> {
    use rayon::prelude::*;
    /// Bytes read, hashed and staged at a time: within a core's L2 cache.
    const PIECE: usize = 1 << 20;
    let mut lent = Vec::with_capacity(ks.len());
    for (i, k) in ks.clone().enumerate() {
        let bytes = payload.blocks[k].bytes.next_multiple_of(4);
        lent.push((k, ring.take(engine, i, bytes)?));
    }
    let ranges = lent
        .par_iter_mut()
        .map(|(k, l)| {
            let mut range = float.then(FloatRange::default);
            payload.read_block_in_pieces(src, *k, PIECE, |at, piece| {
                l.view.slice(at..at + piece.len()).copy_from_slice(piece);
                if let Some(r) = range.as_mut() {
                    r.merge(FloatRange::of_bytes(piece));
                }
            })?;
            Ok(range)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let mut slots = Vec::with_capacity(lent.len());
    for (k, l) in lent {
        slots.push(l.slot);
        let staged = ring.written(l);
        for (bytes, seg, at) in block_targets(payload, k, segments, tile_bytes) {
            let len = bytes.len() as u64;
            enc.copy_buffer_to_buffer(&staged, bytes.start as u64, &buffers[seg], at, len);
        }
    }
    let index = engine.queue.submit([enc.finish()]);
    for k in slots {
        ring.submitted(k, index.clone());
    }
    Ok(ranges)
}

/// Read blocks `ks` of `payload` in turn, each checked by the browser's Web Crypto (native
/// code, several times faster than SHA-256 in wasm). A block's digest is started as soon
/// as it is read and awaited only `DIGESTS_AHEAD` blocks later, so the browser hashes off
/// this thread while the reads go on; each started digest holds a copy of its block in
/// JavaScript memory, hence the bound.
#[cfg(target_arch = "wasm32")]
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
            let promise = start_sha256(file, &bytes)?;
            Ok((bytes, promise))
        });
        (k, one)
    };
    let finish = |(k, one): (usize, Result<(Vec<u8>, js_sys::Promise)>)| async move {
        let (bytes, promise) = one?;
        let digest = finish_sha256(file, promise).await?;
        payload.check_digest(file, k, &digest)?;
        Ok(with_range(bytes, float))
    };
    crate::upload::ahead::finished_in_order(ks, DIGESTS_AHEAD, start, finish).await
}

/// Why a payload block could not be checked in the browser.
#[cfg(target_arch = "wasm32")]
fn sha256_failed(file: &str, what: &str) -> crate::error::Error {
    crate::error::Error::format(file, format!("cannot check a payload block: {what}"))
}

/// Start the SHA-256 of `bytes` by the browser's `crypto.subtle` (the Worker's global
/// scope): the promise of its digest.
#[cfg(target_arch = "wasm32")]
fn start_sha256(file: &str, bytes: &[u8]) -> Result<js_sys::Promise> {
    use wasm_bindgen::JsCast;
    let get = |on: &wasm_bindgen::JsValue, key: &str| {
        js_sys::Reflect::get(on, &key.into()).map_err(|_| sha256_failed(file, key))
    };
    let subtle = get(&get(&js_sys::global(), "crypto")?, "subtle")?;
    let digest: js_sys::Function = get(&subtle, "digest")?
        .dyn_into()
        .map_err(|_| sha256_failed(file, "no crypto.subtle.digest"))?;
    let data = js_sys::Uint8Array::from(bytes);
    digest
        .call2(&subtle, &"SHA-256".into(), &data)
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest refused it"))?
        .dyn_into()
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest gave no promise"))
}

/// The digest a started SHA-256 resolves to.
#[cfg(target_arch = "wasm32")]
async fn finish_sha256(file: &str, promise: js_sys::Promise) -> Result<Vec<u8>> {
    let hashed = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|_| sha256_failed(file, "crypto.subtle.digest failed"))?;
    Ok(js_sys::Uint8Array::new(&hashed).to_vec())
}

impl Engine {
    /// The resident of a prepared acquisition copied from its blocks along `plan`; `None`
    /// where this path does not take it (see the module).
    pub(crate) async fn upload_prepared(
        &self,
        acq: &Acquisition,
        corr: Correction,
        plan: &ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Resident>> {
        let [Part {
            kind: PartKind::Tiled(payload),
            source,
            ..
        }] = acq.parts.as_slice()
        else {
            return Ok(None);
        };
        let tile_bytes = plan.tile_words as u64 * 4;
        let tile = plan.tile as u64;
        if corr.bin != 1
            || payload.layout.bits != plan.bits
            || payload.layout.tile_bytes != tile_bytes
        {
            return Ok(None);
        }
        // The payload's tile the resident's tile 0 is: 0, or that of a block of whole scan
        // rows (a streaming or compressed build) that starts on a tile and ends on one or at
        // the end of the scan (whose last tile the payload pads with zeros, as a resident).
        let first_tile = match &acq.crop {
            None => 0,
            Some(c) => {
                let cols = c.stored_scan[1] as u64;
                let full_rows = c.region.c0 == 0 && c.region.c1 == c.stored_scan[1];
                let (f0, f1) = (c.region.r0 as u64 * cols, c.region.r1 as u64 * cols);
                let ends = f1 % tile == 0 || c.region.r1 == c.stored_scan[0];
                if !full_rows || f0 % tile != 0 || !ends {
                    return Ok(None);
                }
                f0 / tile
            }
        };
        let total = plan.shape.frames();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        // Each segment's first and last tile in the payload.
        let segments: Vec<Segment> = plan
            .segments
            .iter()
            .map(|s| {
                let first = first_tile + s.first_frame as u64 / tile;
                (first, first + s.bytes / tile_bytes)
            })
            .collect();
        let mut times = UploadTimes::default();
        let mut float = acq.dtype.is_float().then(FloatRange::default);
        // The blocks holding the resident's tiles (in tile order, as the open checked).
        let (lo, hi) = (
            segments.first().map_or(0, |s| s.0),
            segments.last().map_or(0, |s| s.1),
        );
        let blocks = &payload.blocks;
        let (Some(first_block), Some(last_block)) = (
            blocks.iter().position(|b| b.first_tile + b.tiles > lo),
            blocks.iter().rposition(|b| b.first_tile < hi),
        ) else {
            return Ok(None);
        };
        let n = last_block + 1;
        // The segments' buffers, taken as the blocks reach them.
        let mut made = self.resident_buffers("resident", plan);
        let mut buffers = Vec::with_capacity(segments.len());
        #[cfg(not(target_arch = "wasm32"))]
        let mut ring = crate::upload::host_staging::HostStaging::new("prepared staging", 0);
        let mut k0 = first_block;
        while k0 < n {
            let k1 = (k0 + BLOCKS_AT_ONCE).min(n);
            let b = &payload.blocks[k1 - 1];
            let reach = (b.first_tile + b.tiles).min(hi);
            while buffers.len() < segments.len() && segments[buffers.len()].0 < reach {
                buffers.push(made.next(self)?);
            }
            let mut t = crate::clock::now_ms();
            #[cfg(not(target_arch = "wasm32"))]
            {
                let ranges = copy_blocks(
                    self,
                    &mut ring,
                    payload,
                    source.as_ref(),
                    k0..k1,
                    &segments,
                    &buffers,
                    tile_bytes,
                    float.is_some(),
                )?;
                if let Some(all) = float.as_mut() {
                    ranges.into_iter().flatten().for_each(|r| all.merge(r));
                }
                times.lap("read + check + stage", &mut t);
            }
            #[cfg(target_arch = "wasm32")]
            {
                let read = read_blocks(payload, source.as_ref(), k0..k1, float.is_some()).await;
                times.lap("read + check", &mut t);
                for (k, block) in (k0..k1).zip(read) {
                    let (bytes, range) = block?;
                    if let (Some(all), Some(r)) = (float.as_mut(), range) {
                        all.merge(r);
                    }
                    for (from_to, seg, at) in block_targets(payload, k, &segments, tile_bytes) {
                        self.queue.write_buffer(&buffers[seg], at, &bytes[from_to]);
                    }
                }
                self.queue.submit([]);
                times.lap("write to the GPU", &mut t);
            }
            k0 = k1;
            self.note_memory();
            let done = ((b.first_tile + b.tiles).min(hi) - lo) * tile;
            crate::watch::report(
                progress,
                crate::watch::UPLOAD,
                (done as usize).min(total),
                total,
            )?;
        }
        while buffers.len() < segments.len() {
            buffers.push(made.next(self)?);
        }
        let mut res = self
            .finish_resident(scope, plan.clone(), buffers, corr)
            .await?;
        res.float = float;
        if corr.mask_bad_pixels {
            // As the decode masks (C-BAD): the file's bad pixels, and sentinel samples.
            let mut t = crate::clock::now_ms();
            if let Some(mask) = &acq.pixel_mask {
                self.zero_pixels(&mut res, &crate::contract::mask_pixels(mask))?;
            }
            if acq.dtype.sentinel().is_some() {
                self.zero_sentinels(&mut res)?;
            }
            times.lap("bad pixels zeroed", &mut t);
        }
        res.upload_times = times;
        Ok(Some(res))
    }
}
