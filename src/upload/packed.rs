//! The compressed resident (decision 0025): the acquisition read in blocks of whole scan
//! rows, each uploaded raw (through the GPU decoder where it takes the data), encoded on
//! the GPU into sectors cut to the bit width of their largest sample (`wgsl/packed.wgsl`)
//! and let go, so that only the packed segments and a small raw-layout scratch stay.
//! Products decode the sectors they read in their own kernels (decisions 0028, 0031); only
//! frames read back (`binned`, the cursor's pattern) are unpacked into the scratch, a few
//! tiles at a time ([`Resident::unpack`]). Integer products are those of the raw resident,
//! bit for bit.

use crate::error::{Error, Result};
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::Correction;
use crate::gpu::{Engine, Packed, Resident, UploadTimes};
use crate::kernels::packed as kernel;
use crate::upload::plan::{ResidentPlan, Segment};

impl Engine {
    /// Encode segment `seg` of the raw resident `raw_plan` (buffer `raw`) into a packed
    /// buffer of its exact size: widths and sizes first, their offsets summed on the host,
    /// then the words.
    pub(crate) async fn pack_segment(
        &self,
        raw_plan: &ResidentPlan,
        seg: &Segment,
        raw: &wgpu::Buffer,
    ) -> Result<wgpu::Buffer> {
        let det_len = raw_plan.shape.det_len();
        let tiles = u32::try_from(seg.frames.div_ceil(raw_plan.tile as usize))
            .map_err(|_| Error::Gpu("a resident segment has too many tiles to pack".into()))?;
        let index = kernel::index_words(tiles, det_len);
        let local = self.storage("packed index, per block", index * 4);
        let groups = tiles as u64 * kernel::groups_per_tile(det_len) as u64;
        let block_words = self.storage(
            "packed words per block",
            groups.div_ceil(kernel::GROUPS_PER_BLOCK as u64) * 4,
        );
        let encoding = kernel::Encoding {
            plan: raw_plan,
            tiles,
            raw,
            local: &local,
        };
        let mut enc = self.device.create_command_encoder(&Default::default());
        let blocks = kernel::encode_codes(self, &mut enc, &encoding, &block_words)?;
        self.queue.submit([enc.finish()]);
        let words: Vec<u32> =
            bytemuck::pod_collect_to_vec(&self.read_back(&block_words, blocks as u64 * 4).await?);
        let mut base = Vec::with_capacity(words.len());
        let mut at = index;
        for w in words.iter().take(blocks as usize) {
            base.push(
                u32::try_from(at)
                    .map_err(|_| Error::Gpu("a packed segment passes 2^32 words".into()))?,
            );
            at += *w as u64;
        }
        let bytes = at * 4;
        if bytes > raw_plan.max_binding {
            return Err(Error::GpuUnsupported(format!(
                "a packed segment of {bytes} bytes passes the adapter's binding limit of {}",
                raw_plan.max_binding
            )));
        }
        let packed = self.storage("packed resident", bytes);
        let block_base = self.input(&base);
        let mut enc = self.device.create_command_encoder(&Default::default());
        kernel::encode_write(self, &mut enc, &encoding, &block_base, &packed)?;
        self.queue.submit([enc.finish()]);
        Ok(packed)
    }

    /// The compressed resident of `acq` under `corr`, built in blocks of `block_rows` scan
    /// rows (their frames a whole number of tiles, but for the last); a prepared
    /// acquisition's packed payload is kept as it is instead (`Engine::reopen_packed`). Refused, by name, for
    /// float32 data (kept raw) and as out of memory when the packed segments and the scratch
    /// pass `budget` (or, where it says so, are projected to pass it twice over). Where the
    /// open deferred `acq`'s B-tree leaves, `feed` lists them and the GPU-decoded blocks read
    /// them as they go (decision 0047); complete the index from it afterwards
    /// (`Acquisition::finish_index`).
    pub async fn upload_packed(
        &self,
        (acq, feed): (&Acquisition, Option<&IndexFeed>),
        corr: Correction,
        block_rows: usize,
        gpu_decode: bool,
        budget: Option<PackBudget>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Resident> {
        let mut feed = feed;
        let file = acq.primary.as_str();
        if acq.dtype.is_float() {
            return Err(Error::GpuUnsupported(format!(
                "{file}: float32 data is kept raw (a compressed resident holds integer counts)"
            )));
        }
        // A prepared acquisition packed as this resident packs is kept as it is.
        if let Some(res) = self.reopen_packed(acq, corr, budget, progress).await? {
            return Ok(res);
        }
        let whole = crate::gpu::plan_of(acq, corr.bin, self.adapter.limits)?;
        let [rows, cols] = whole.shape.scan;
        let step = block_rows.clamp(1, rows.max(1));
        if step < rows && (step * cols) % whole.tile as usize != 0 {
            return Err(Error::Gpu(format!(
                "{file}: blocks of {step} scan rows are not whole tiles of {} positions",
                whole.tile
            )));
        }
        let mut segments = Vec::new();
        let mut buffers = Vec::new();
        let (mut packed_bytes, mut scratch_bytes) = (0u64, 0u64);
        let mut times = UploadTimes::default();
        let mut t = crate::clock::now_ms();
        let mut block = acq.clone();
        if gpu_decode {
            self.keep_decode_slots();
        }
        let built = async {
            for b0 in (0..rows).step_by(step) {
                let b1 = (b0 + step).min(rows);
                block.set_crop(acq.scan_rows_crop(b0, b1)?);
                let res = match gpu_decode {
                    true => self.upload_block(&mut block, &mut feed, corr).await?,
                    false => self.upload_cpu_packed(&block, corr).await?,
                };
                times.lap("upload raw blocks", &mut t);
                for (seg, raw) in res.plan.segments.iter().zip(&res.buffers) {
                    let packed = self.pack_segment(&res.plan, seg, raw).await?;
                    packed_bytes += packed.size();
                    scratch_bytes =
                        scratch_bytes.max(kept_scratch_bytes(res.plan.tile_words, seg.bytes));
                    segments.push(Segment {
                        first_frame: b0 * cols + seg.first_frame,
                        ..*seg
                    });
                    buffers.push(packed);
                }
                times.lap("encode", &mut t);
                // The raw block, its packed segments and those before: the build's peak.
                self.note_memory();
                self.set_aside(res);
                if let Some(budget) = budget {
                    budget.check(file, packed_bytes + scratch_bytes, (b1, rows))?;
                }
                crate::watch::report(progress, crate::watch::COMPRESS, b1 * cols, rows * cols)?;
            }
            Ok(())
        }
        .await;
        self.release_set_aside();
        built?;
        // The scratch and the mask are this resident's last allocations: the scope sees them.
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let scratch = self.storage("packed scratch", scratch_bytes);
        let zeroed_bits = vec![0u32; kernel::zeroed_words(whole.shape.det_len())];
        // Written again as pixels are found bad (`Engine::zero_pixels`); zero when made.
        let zeroed = self.storage("packed zeroed pixels", zeroed_bits.len() as u64 * 4);
        let raw_bytes = whole.payload_bytes;
        let plan = ResidentPlan {
            segments,
            payload_bytes: packed_bytes + scratch_bytes,
            peak_bytes: whole.peak_bytes - whole.payload_bytes + packed_bytes + scratch_bytes,
            ..whole
        };
        let n = plan.segments.len();
        let mut res = self
            .finish_resident(scope, plan, vec![scratch; n], corr)
            .await?;
        res.upload_times = times;
        res.packed = Some(Packed {
            buffers,
            packed_bytes,
            raw_bytes,
            scratch_bytes,
            zeroed,
            zeroed_bits,
        });
        Ok(res)
    }
}

/// The GPU memory a compressed build may take: `bytes`, and with `give_up_on_projection`
/// (the engine chose the plan, and streams where it does not fit) the build stops as soon as
/// its blocks so far, scaled to every scan row, come to more than twice that: on the
/// 512×512×192×192 benchmark acquisition within 2 GiB the whole build otherwise ran 217 of
/// 512 rows (4 s in Chromium) before it passed the budget. Twice, so that a scan whose
/// first rows compress worse than the rest (its second half vacuum) still gets built where
/// it fits (decision 0046).
#[derive(Clone, Copy, Debug)]
pub struct PackBudget {
    pub bytes: u64,
    pub give_up_on_projection: bool,
}

impl PackBudget {
    /// A budget the build must pass before it is refused (a plan the user named).
    pub fn hard(bytes: u64) -> PackBudget {
        PackBudget {
            bytes,
            give_up_on_projection: false,
        }
    }

    /// Out of memory, by name, where `used` bytes after `rows_done` of `rows` scan rows pass
    /// the budget or (where it says so) are projected to pass it twice over.
    pub fn check(&self, file: &str, used: u64, (rows_done, rows): (usize, usize)) -> Result<()> {
        let b = self.bytes;
        if used > b {
            return Err(Error::GpuOutOfMemory(format!(
                "{file}: the compressed resident passes the budget of {b} bytes \
                 ({used} packed after {rows_done} of {rows} scan rows)"
            )));
        }
        let projected = used as u128 * rows as u128 / rows_done.max(1) as u128;
        if self.give_up_on_projection && projected > 2 * b as u128 {
            return Err(Error::GpuOutOfMemory(format!(
                "{file}: the compressed resident would pass the budget of {b} bytes \
                 ({used} packed after {rows_done} of {rows} scan rows, about {projected} \
                 for all of them)"
            )));
        }
        Ok(())
    }
}

/// Most bytes of the scratch a compressed resident keeps for the frames read back from it
/// (whole tiles, at least one): a read of more tiles unpacks them this many at a time.
pub const KEPT_SCRATCH_BYTES: u64 = 16 << 20;

/// The scratch a compressed resident keeps for tiles of `tile_words` words, segments of at
/// most `segment_bytes`: [`KEPT_SCRATCH_BYTES`] in whole tiles, never above a segment.
pub fn kept_scratch_bytes(tile_words: u32, segment_bytes: u64) -> u64 {
    let tile = tile_words as u64 * 4;
    let tiles = (KEPT_SCRATCH_BYTES / tile.max(1)).max(1);
    (tiles * tile).min(segment_bytes).max(16)
}

/// Scan rows per block of a compressed upload: about `want` rows, rounded up to the fewest
/// whose positions are a whole number of tiles of `tile` (so packed segments start at tile
/// boundaries, as the scan-ROI masks of the pattern reduction count them).
pub fn block_rows(want: usize, cols: usize, tile: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let least = tile / gcd(tile, cols.max(1)).max(1);
    want.max(1).div_ceil(least) * least
}

#[cfg(test)]
mod tests {
    use super::{block_rows, PackBudget};

    #[test]
    fn a_build_projected_past_twice_its_budget_stops_only_where_it_may() {
        let early = PackBudget {
            bytes: 1000,
            give_up_on_projection: true,
        };
        // 300 bytes after 1 of 8 rows: about 2400, more than twice 1000.
        let e = early.check("a.h5", 300, (1, 8)).unwrap_err().to_string();
        assert!(
            e.contains("a.h5") && e.contains("would pass") && e.contains("about 2400"),
            "{e}"
        );
        // About 2000: not more than twice; and a named plan runs until it passes.
        assert!(early.check("a.h5", 250, (1, 8)).is_ok());
        assert!(PackBudget::hard(1000).check("a.h5", 300, (1, 8)).is_ok());
        let e = PackBudget::hard(1000)
            .check("a.h5", 1001, (7, 8))
            .unwrap_err();
        assert!(
            e.to_string().contains("passes the budget of 1000 bytes"),
            "{e}"
        );
        // The last row: nothing is projected.
        assert!(early.check("a.h5", 1000, (8, 8)).is_ok());
    }

    #[test]
    fn blocks_are_whole_tiles() {
        assert_eq!(block_rows(1, 7, 16), 16);
        assert_eq!(block_rows(1, 8, 16), 2);
        assert_eq!(block_rows(5, 8, 16), 6);
        assert_eq!(block_rows(3, 512, 32), 3);
        assert_eq!(block_rows(0, 6, 8), 4);
        for (want, cols, tile) in [(3, 7, 32), (9, 12, 16), (1, 1, 8)] {
            assert_eq!(block_rows(want, cols, tile) * cols % tile, 0);
        }
    }
}
