//! Product-first streaming: products of an acquisition larger than the GPU's budget, in one
//! pass over its files. Blocks of whole scan rows are uploaded one at a time (a block is the
//! acquisition cropped to its rows, `Acquisition::scan_rows_crop`), every product asked for
//! takes its part of the block, and the block is let go before the next. Parts are exact
//! (integer sums, exact CoM, sample maxima), so they join without rounding, and each product
//! is then finished by the same code as on a resident acquisition: the results equal the
//! resident's bit for bit (decision 0023). With bad-pixel masking, a first pass finds the
//! hot and dead pixels in the mean pattern, as the resident's upload does.

use crate::contract::mask_pixels;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::Correction;
use crate::gpu::{Engine, Resident, UploadTimes};
use crate::kernels::ring_sum::RadialCache;
use crate::products::gpu::found_in_mean;
use crate::products::{ProductArray, ProductKind, ProductParams};

mod parts;
use parts::{empty_part, finish, needs, take_part, Part};

/// How a pass reads the acquisition: blocks of `rows` scan rows, each uploaded through the
/// GPU decoder where `gpu_decode` allows (else packed on the CPU: no decode windows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    pub rows: usize,
    pub gpu_decode: bool,
}

impl Blocks {
    /// The blocks of a streaming memory plan.
    pub fn of(plan: &crate::upload::memory::MemoryPlan) -> Blocks {
        Blocks {
            rows: plan.rows_per_block.unwrap_or(1),
            gpu_decode: plan.gpu_decode,
        }
    }

    /// The blocks a pass for `p` alone reads: the pattern at one position, from a block of
    /// the one scan row that holds it (smaller than the plan's, so within its budget). A
    /// plan of one block reads the whole file for it otherwise: the page's first image of
    /// the 1024²×192² uint8 file waited 6.4 s for that pattern.
    pub fn for_product(self, p: &ProductParams) -> Blocks {
        match p.kind {
            ProductKind::Pattern => Blocks { rows: 1, ..self },
            _ => self,
        }
    }
}

/// What one pass reads: `acq` under `corr` in blocks of `blocks`, the detector pixels
/// `found` zeroed in each block, and, where `rings` is given, each block's ring sums written
/// into it (decision 0036). Where the open deferred `acq`'s B-tree leaves, `feed` lists
/// them and the blocks' uploads read them as they go (decision 0047).
#[derive(Clone, Copy)]
struct Over<'a> {
    acq: &'a Acquisition,
    corr: Correction,
    found: Option<&'a [bool]>,
    blocks: Blocks,
    rings: Option<&'a RadialCache>,
    feed: Option<&'a IndexFeed>,
}

/// One pass `over` the acquisition, computing every product of `ps`;
/// `progress(rows_done, rows)` is called after each block.
async fn pass(
    engine: &Engine,
    over: Over<'_>,
    ps: &[ProductParams],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<ProductArray>> {
    let (acq, shape) = (over.acq, over.acq.shape.binned(over.corr.bin));
    let read = read_parts(engine, over, ps, progress).await;
    let result = async {
        let (parts, res) = read?;
        let mut out = Vec::with_capacity(ps.len());
        for (p, part) in ps.iter().zip(parts) {
            out.push(finish(engine, acq, &res, p, part, shape).await?);
        }
        Ok(out)
    }
    .await;
    engine.release_set_aside();
    result
}

/// The blocks of [`pass`], read and taken apart: every product's part, and the last block's
/// resident (it stands for the acquisition's correction when the parts are finished). The
/// caller releases the buffers set aside (`Engine::release_set_aside`), with the decode
/// slots the blocks' uploads pass on to each other.
async fn read_parts(
    engine: &Engine,
    over: Over<'_>,
    ps: &[ProductParams],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Part>, Resident)> {
    if over.blocks.gpu_decode {
        engine.keep_decode_slots();
    }
    let out = read_blocks(engine, over, ps, progress).await;
    // Reads started ahead that a stopped pass never took.
    #[cfg(target_arch = "wasm32")]
    for part in &over.acq.parts {
        part.source.forget_reads_in_flight();
    }
    out
}

/// [`read_parts`], block by block.
async fn read_blocks(
    engine: &Engine,
    over: Over<'_>,
    ps: &[ProductParams],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Part>, Resident)> {
    let Over {
        acq,
        corr,
        found,
        blocks,
        rings,
        mut feed,
    } = over;
    let shape = acq.shape.binned(corr.bin);
    let [rows, _] = shape.scan;
    let float = acq.dtype.is_float();
    let mut parts: Vec<Part> = ps.iter().map(|p| empty_part(p, float)).collect();
    let step = blocks.rows.max(1);
    // Two copies of the acquisition serve every block, one uploading while the other's
    // parts are taken: copying its chunk index per block cost as much as the block's own
    // bookkeeping.
    let mut both = [acq.clone(), acq.clone()];
    // The next block read, whose first windows are read while this one uploads.
    let mut next = blocks.gpu_decode.then(|| acq.clone());
    let wanted = |b0: usize| {
        let b1 = (b0 + step).min(rows);
        rings.is_some() || ps.iter().any(|p| needs(p, shape.scan, b0, b1))
    };
    let read: Vec<usize> = (0..rows).step_by(step).filter(|&b0| wanted(b0)).collect();
    // The block uploaded last, whose parts are not taken yet: its resident and rows.
    let mut held: Option<Held> = None;
    // The open's feed until a block gives it up; then the other copies complete their index.
    let mut given = feed;
    let mut reported = 0usize;
    // A pass cancelled before it starts reads nothing.
    crate::watch::step(crate::watch::STREAM, 0, rows as u64)?;
    for (k, b0) in read.iter().copied().enumerate() {
        let b1 = (b0 + step).min(rows);
        let (mine, other) = mine_and_other(&mut both, k % 2);
        mine.set_crop(acq.scan_rows_crop(b0, b1)?);
        if let Some(next) = next.as_mut() {
            let crop = read
                .get(k + 1)
                .map(|&n0| acq.scan_rows_crop(n0, (n0 + step).min(rows)));
            read_ahead(engine, (mine, k == 0), next, crop, (corr, feed)).await;
        }
        // This block uploads while the parts of the one before are taken: the viewer's
        // copies of one overlap the GPU's work on the other, where waiting for each block
        // in turn left either idle (decision 0046). The two residents are the plan's two
        // payloads; the block before that one left its buffers for this one.
        let upload = upload_block(engine, mine, (corr, &mut feed), blocks, found);
        let over = (held.take(), shape.scan, rings);
        let before = take_parts(engine, other, over, ps, &mut parts);
        let (res, before) = futures_util::future::join(upload, before).await;
        // A failed part stops the pass first: its block was read before this one.
        let before = before?;
        let res = res?;
        if let Some(fed) = given.filter(|_| feed.is_none()) {
            // The block gave the feed up (`Engine::upload_block`): so do the other copies.
            for a in both.iter_mut().chain(next.as_mut()) {
                if a.index_pending() {
                    a.complete_index(fed).await?;
                }
            }
            given = None;
        }
        if let Some(prev) = before {
            // Its buffers serve the next block where they have its sizes.
            engine.set_aside(prev);
            // Every row before this block is done, or not needed.
            report_rows(progress, &mut reported, b0, rows)?;
        }
        held = Some((res, (b0, b1)));
    }
    // The last block read is in the copy of its turn.
    let last = &both[read.len().saturating_sub(1) % 2];
    let res = take_parts(engine, last, (held, shape.scan, rings), ps, &mut parts)
        .await?
        .ok_or_else(|| Error::Gpu("the streamed pass read no block".into()))?;
    report_rows(progress, &mut reported, rows, rows)?;
    Ok((parts, res))
}

/// Block `block` of a pass uploaded under `corr` (through the GPU decoder where `blocks`
/// says, its deferred B-tree leaves read from `*feed`: `Engine::upload_block`), the
/// detector pixels `found` zeroed.
async fn upload_block(
    engine: &Engine,
    block: &mut Acquisition,
    (corr, feed): (Correction, &mut Option<&IndexFeed>),
    blocks: Blocks,
    found: Option<&[bool]>,
) -> Result<Resident> {
    let t = crate::clock::now_ms();
    let mut res = match blocks.gpu_decode {
        true => engine.upload_block(block, feed, corr).await?,
        false => engine.upload_cpu_packed(block, corr).await?,
    };
    engine.note_memory();
    PASS_TIMES.add(BLOCKS_UPLOADED, t);
    PASS_TIMES.add_laps(&res.upload_times);
    if let Some(mask) = found {
        engine.zero_pixels(&mut res, &mask_pixels(mask))?;
        res.found_bad = Some(mask.to_vec());
    }
    Ok(res)
}

/// The pass's two copies of the acquisition: the one block `k` uploads into (`mine`, k % 2)
/// and the other, cropped to the block before, whose parts are taken meanwhile.
fn mine_and_other(both: &mut [Acquisition; 2], mine: usize) -> (&mut Acquisition, &Acquisition) {
    let [a, b] = both;
    match mine {
        0 => (a, b),
        _ => (b, a),
    }
}

/// The block a pass holds, its parts not taken yet: its resident and its scan rows.
type Held = (Resident, (usize, usize));

/// Every part of `held` (read from `block`, the copy cropped to it) taken into `parts`, and
/// its ring sums written into `rings` (`scan`: the whole acquisition's binned scan); its
/// resident back, `None` where nothing was held.
async fn take_parts(
    engine: &Engine,
    block: &Acquisition,
    (held, scan, rings): (Option<Held>, [usize; 2], Option<&RadialCache>),
    ps: &[ProductParams],
    parts: &mut [Part],
) -> Result<Option<Resident>> {
    let Some((res, (b0, b1))) = held else {
        return Ok(None);
    };
    let t = crate::clock::now_ms();
    for (p, part) in ps.iter().zip(parts.iter_mut()) {
        if needs(p, scan, b0, b1) {
            take_part(engine, block, &res, p, part, (b0, b1, scan)).await?;
        }
    }
    if let Some(rings) = rings {
        let first = u32::try_from(b0 * scan[1])
            .map_err(|_| Error::Gpu("the scan has more positions than ring sums index".into()))?;
        rings.add_block(engine, &res, first).await?;
    }
    PASS_TIMES.add(BLOCKS_PRODUCTS, t);
    Ok(Some(res))
}

/// Report `rows` of `total` scan rows done where they pass those `reported` already.
fn report_rows(
    progress: &mut dyn FnMut(usize, usize),
    reported: &mut usize,
    rows: usize,
    total: usize,
) -> Result<()> {
    if rows > *reported {
        *reported = rows;
        crate::watch::report(progress, crate::watch::STREAM, rows, total)?;
    }
    Ok(())
}

/// Start the reads of `block`'s first windows where it is the pass's first (`first`), then
/// those of the next block read (`next` cropped to `crop`), and let them go: the browser's
/// pool reads them while `block` uploads, and the uploads that ask for them take them
/// (`upload::gpu_decode::start_reads`; decision 0046). A failure is the upload's to report.
async fn read_ahead(
    engine: &Engine,
    (block, first): (&Acquisition, bool),
    next: &mut Acquisition,
    crop: Option<Result<crate::formats::ScanCrop>>,
    (corr, feed): (Correction, Option<&IndexFeed>),
) {
    use crate::upload::gpu_decode::start_reads;
    // Fed blocks read their leaves in the file spans of their chunks, the next block's
    // first spans already read ahead by this one: reading ahead here would wait for this
    // block's leaves and read its spans twice.
    if feed.is_some() {
        return;
    }
    if first {
        start_reads(engine, block, corr).await.ok();
    }
    if let Some(Ok(crop)) = crop {
        next.set_crop(crop);
        start_reads(engine, next, corr).await.ok();
    }
}

/// Milliseconds the passes spent since the program started: uploading their blocks (read,
/// decode, correct; and each lap of those uploads) and taking the products' parts of them
/// (the profile's stages, to tell a pass's reads from its GPU work).
pub struct PassTimes(std::sync::Mutex<UploadTimes>);

/// The passes' times ([`PassTimes`]).
pub static PASS_TIMES: PassTimes = PassTimes(std::sync::Mutex::new(UploadTimes(Vec::new())));

/// [`PASS_TIMES`]'s steps: a block's upload, and the products' parts of it.
pub const BLOCKS_UPLOADED: &str = "blocks uploaded";
pub const BLOCKS_PRODUCTS: &str = "blocks' products";

impl PassTimes {
    /// Add the time since `since_ms` to `step`.
    fn add(&self, step: &'static str, since_ms: f64) {
        let mut since = since_ms;
        if let Ok(mut times) = self.0.lock() {
            times.lap(step, &mut since);
        }
    }

    /// Add a block upload's laps, each to its step.
    fn add_laps(&self, laps: &UploadTimes) {
        if let Ok(mut times) = self.0.lock() {
            for &(step, ms) in &laps.0 {
                times.add(step, ms);
            }
        }
    }

    /// Every step's milliseconds so far.
    pub fn ms(&self) -> Vec<(&'static str, f64)> {
        self.0.lock().map(|t| t.0.clone()).unwrap_or_default()
    }

    /// The steps that took time since [`PassTimes::ms`] gave `before`, and how much.
    pub fn since(&self, before: &[(&'static str, f64)]) -> Vec<(&'static str, f64)> {
        let at = |step| before.iter().find(|(s, _)| *s == step).map_or(0.0, |p| p.1);
        self.ms()
            .into_iter()
            .map(|(step, ms)| (step, ms - at(step)))
            .filter(|&(_, ms)| ms > 0.0)
            .collect()
    }
}

/// Compute every product of `ps` under `corr` in one streaming pass over `acq`, in blocks of
/// `blocks` (two passes with bad-pixel masking: the mean pattern first).
/// The results equal those of a resident acquisition (`gpu::compute`).
pub async fn compute_streamed(
    engine: &Engine,
    acq: &Acquisition,
    ps: &[ProductParams],
    corr: Correction,
    blocks: Blocks,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<ProductArray>> {
    for p in ps {
        p.validate(acq.shape, corr)?;
    }
    let zeroed = match corr.mask_bad_pixels {
        true => settle(engine, (acq, None), corr, blocks, progress).await?.2,
        false => None,
    };
    compute_with(engine, acq, ps, corr, zeroed.as_deref(), blocks, progress).await
}

/// [`compute_streamed`] with the pixels to zero already found (`settle`'s third value).
pub async fn compute_with(
    engine: &Engine,
    acq: &Acquisition,
    ps: &[ProductParams],
    corr: Correction,
    zeroed: Option<&[bool]>,
    blocks: Blocks,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<ProductArray>> {
    for p in ps {
        p.validate(acq.shape, corr)?;
    }
    let over = Over {
        acq,
        corr,
        found: zeroed,
        blocks,
        rings: None,
        feed: None,
    };
    pass(engine, over, ps, progress).await
}

/// A streamed session's first look (decision 0036): one pass that writes every block's
/// ring sums into `rings` (an empty cache of the whole scan about the BF centre,
/// [`RadialCache::empty`]) under `corr`, the pixels of `zeroed` read as 0, and, with
/// `moments`, keeps the exact CoM moments of every position and their bound: disks and
/// annuli about the centre, CoM, DPC, iDPC and the DPC rotation then need no further pass.
#[allow(clippy::too_many_arguments)]
pub async fn first_look(
    engine: &Engine,
    acq: &Acquisition,
    corr: Correction,
    zeroed: Option<&[bool]>,
    blocks: Blocks,
    rings: &RadialCache,
    moments: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Option<(Vec<[u64; 3]>, u128)>> {
    // The iDPC's part of a pass is the exact moments (integer data).
    let ps: Vec<ProductParams> = match moments && !acq.dtype.is_float() {
        true => vec![ProductParams::new(ProductKind::Idpc)],
        false => Vec::new(),
    };
    let over = Over {
        acq,
        corr,
        found: zeroed,
        blocks,
        rings: Some(rings),
        feed: None,
    };
    let read = read_parts(engine, over, &ps, progress).await;
    engine.release_set_aside();
    let (parts, _) = read?;
    Ok(match parts.into_iter().next() {
        Some(Part::Moments(all, bound)) => Some((all, bound)),
        _ => None,
    })
}

/// The one product of a pass asked for one.
pub fn only(out: Vec<ProductArray>) -> Result<ProductArray> {
    out.into_iter()
        .next()
        .ok_or_else(|| Error::Gpu("the streamed pass returned nothing".into()))
}

/// The streamed counterpart of `gpu::settle_bad_pixels`: the exact mean pattern under
/// `corr` (its zeroed pixels 0), the hot and dead pixels found in it, and the mask of those
/// every product zeroes (bad-pixel masking on and some found). Where the open deferred
/// `acq`'s B-tree leaves, `feed` lists them and the pass reads them as it goes: complete the
/// index from it afterwards (`Acquisition::finish_index`).
pub async fn settle(
    engine: &Engine,
    (acq, feed): (&Acquisition, Option<&IndexFeed>),
    corr: Correction,
    blocks: Blocks,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<f64>, crate::pattern::BadPixels, Option<Vec<bool>>)> {
    let mean = ProductParams::new(ProductKind::MeanDp);
    let over = Over {
        acq,
        corr,
        found: None,
        blocks,
        rings: None,
        feed,
    };
    let out = pass(engine, over, &[mean], progress).await?;
    let mut mean = out
        .first()
        .ok_or_else(|| Error::Gpu("the mean pattern pass returned nothing".into()))?
        .data
        .to_f64();
    let (found, zeroed) = found_in_mean(acq, corr, &mean, acq.shape.binned(corr.bin).det);
    if let Some(mask) = &zeroed {
        for (m, &z) in mean.iter_mut().zip(mask) {
            if z {
                *m = 0.0;
            }
        }
    }
    Ok((mean, found, zeroed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_at_a_position_reads_one_scan_row() {
        let plan = Blocks {
            rows: 1024,
            gpu_decode: true,
        };
        let at = |kind| plan.for_product(&ProductParams::new(kind));
        assert_eq!(
            at(ProductKind::Pattern),
            Blocks {
                rows: 1,
                gpu_decode: true
            }
        );
        for kind in [ProductKind::Bf, ProductKind::SumDp, ProductKind::Com] {
            assert_eq!(at(kind), plan, "{kind:?}");
        }
    }
}
