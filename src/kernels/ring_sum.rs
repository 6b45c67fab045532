//! Cached ring sums (`wgsl/ring_sum.wgsl`). Rings about a detector centre (the pixels whose distance from it has
//! the same integer part) partition the detector; per scan position, the exact sum of each
//! ring is made once per resident by one masked-sum dispatch whose parts are the rings
//! (one pass over the data, like the cached totals). A mask then costs the sums of the rings it holds whole plus the
//! masked sum of its other pixels: a BF disk or ADF annulus about the centre reads tens of
//! bytes per position instead of its thousands of pixels' samples, and stays exact (C-RING).
//!
//! Its parity tests: `tests/gpu_parity/ring_sum.rs`.

use crate::error::{Error, Result};
use crate::kernels::uniform;
use bytemuck::{Pod, Zeroable};

use crate::gpu::{Engine, Resident};
use crate::kernels::masked_sum::{encode_parts, DetectorList, Parts};
use crate::kernels::{self, grid};

pub struct RadialCache {
    /// The rings' centre (detector row, column of the resident's detector).
    pub center: [f64; 2],
    /// Ring of each detector pixel.
    ring_of: Vec<u32>,
    /// Pixels per ring.
    sizes: Vec<u32>,
    /// Ring after ring, per scan position the ring's exact u64 sum.
    buffer: wgpu::Buffer,
    frames: u32,
}

/// A mask as whole rings plus the pixels left over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingSplit {
    pub rings: Vec<u32>,
    pub rest: Vec<u32>,
}

/// Ring of every pixel of a `det` detector about `center`, and each ring's size. Ring k holds
/// the pixels with k < d ≤ k + 1 (the centre's own pixel, d = 0, in ring 0), compared as
/// the masks compare (C-MASK: d² against the radius squared, in float64): a disk of whole
/// radius R is rings 0..R − 1 and an annulus (R₁, R₂] rings R₁..R₂ − 1, about any centre
/// (C-RING).
pub fn rings_about(det: [usize; 2], center: [f64; 2]) -> (Vec<u32>, Vec<u32>) {
    let ring_of: Vec<u32> = (0..det[0] * det[1])
        .map(|k| {
            let (dr, dc) = (
                (k / det[1]) as f64 - center[0],
                (k % det[1]) as f64 - center[1],
            );
            ring_of_dist2(dr * dr + dc * dc)
        })
        .collect();
    let n = ring_of.iter().max().map_or(0, |&m| m as usize + 1);
    let mut sizes = vec![0u32; n];
    ring_of.iter().for_each(|&r| sizes[r as usize] += 1);
    (ring_of, sizes)
}

/// The ring k of a squared distance `d2`: the least k ≥ 0 with d2 ≤ (k + 1)², found from the
/// square root and settled by the masks' own comparison.
fn ring_of_dist2(d2: f64) -> u32 {
    let mut k = (d2.sqrt().ceil() as u32).saturating_sub(1);
    let sq = |k: u32| (k as f64) * (k as f64);
    while k > 0 && d2 <= sq(k) {
        k -= 1;
    }
    while d2 > sq(k + 1) {
        k += 1;
    }
    k
}

/// Split the sorted, distinct `pixels` into the rings they hold whole and the rest, when
/// reading those rings' u64 sums and the rest's `sample_bytes`-byte samples costs at most
/// half the bytes of reading every pixel's samples (the ring path takes two dispatches).
pub fn split_pixels(
    ring_of: &[u32],
    sizes: &[u32],
    pixels: &[u32],
    sample_bytes: u64,
) -> Option<RingSplit> {
    let mut held = vec![0u32; sizes.len()];
    for &p in pixels {
        held[*ring_of.get(p as usize)? as usize] += 1;
    }
    let whole = |r: u32| held[r as usize] == sizes[r as usize];
    let rings: Vec<u32> = (0..sizes.len() as u32)
        .filter(|&r| sizes[r as usize] > 0 && whole(r))
        .collect();
    let rest: Vec<u32> = pixels
        .iter()
        .copied()
        .filter(|&p| !whole(ring_of[p as usize]))
        .collect();
    let ring_bytes = rings.len() as u64 * 8 + rest.len() as u64 * sample_bytes;
    let plain_bytes = pixels.len() as u64 * sample_bytes;
    (!rings.is_empty() && 2 * ring_bytes <= plain_bytes).then_some(RingSplit { rings, rest })
}

/// The rings `pixels` (sorted, distinct) consist of, when they are whole rings and nothing
/// else; `None` when a pixel of a ring is missing or outside the detector.
pub fn whole_rings(ring_of: &[u32], sizes: &[u32], pixels: &[u32]) -> Option<Vec<u32>> {
    let mut held = vec![0u32; sizes.len()];
    for &p in pixels {
        held[*ring_of.get(p as usize)? as usize] += 1;
    }
    let partial = held.iter().zip(sizes).any(|(&h, &n)| h != 0 && h != n);
    (!partial && !pixels.is_empty()).then(|| {
        (0..sizes.len() as u32)
            .filter(|&r| held[r as usize] != 0)
            .collect()
    })
}

impl RadialCache {
    /// Bytes the cache takes for `frames` positions and `rings` rings.
    pub fn bytes(frames: usize, rings: usize) -> u64 {
        frames as u64 * rings as u64 * 8
    }

    /// Make the ring sums of `res` about `center`. `None` where they do not pay or fit:
    /// float32 residents (their sums are 128-bit), or more bytes than one storage binding
    /// holds or than a quarter of the resident or 64 MiB, whichever is larger (the cache is
    /// an accelerator, never the reason an acquisition does not fit; a 192×192 detector's
    /// rings take 1.5 % of a u16 resident).
    pub async fn build(
        engine: &Engine,
        res: &Resident,
        center: [f64; 2],
    ) -> Result<Option<RadialCache>> {
        if res.float.is_some() {
            return Ok(None);
        }
        let Ok(frames) = u32::try_from(res.plan.shape.frames()) else {
            return Ok(None);
        };
        let limit = (res.plan.payload_bytes / 4).max(64 << 20);
        let shape = (res.plan.shape.det, res.plan.bits);
        let Some(cache) = Self::empty(engine, shape, center, frames, limit).await? else {
            return Ok(None);
        };
        cache.add_block(engine, res, 0).await?;
        Ok(Some(cache))
    }

    /// An all-zero cache about `center` for `frames` positions of a detector `det` whose
    /// samples have `bits` bits, its blocks added by [`RadialCache::add_block`] (a streamed
    /// pass: decision 0036). `None` where the centre is off the detector, the sums would
    /// take more than `limit_bytes` or one storage binding, a ring holds more pixels than
    /// exact u32 lanes take, or the device has no room for them.
    pub async fn empty(
        engine: &Engine,
        (det, bits): ([usize; 2], u32),
        center: [f64; 2],
        frames: u32,
        limit_bytes: u64,
    ) -> Result<Option<RadialCache>> {
        // A centre off the detector (a fit gone astray) makes no whole rings worth having.
        let on_detector = center
            .iter()
            .zip(det)
            .all(|(&c, n)| c.is_finite() && (-0.5..n as f64 - 0.5).contains(&c));
        if !on_detector {
            return Ok(None);
        }
        let (ring_of, sizes) = rings_about(det, center);
        let bytes = Self::bytes(frames as usize, sizes.len());
        let limit = limit_bytes.min(engine.adapter.limits.max_storage_binding);
        // Each ring is one part of one masked sum: none may hold more pixels than exact
        // u32 lanes take on any path (no real detector has such a ring).
        let most = kernels::masked_sum_part_limit(bits, true);
        if bytes == 0 || bytes > limit || sizes.iter().any(|&n| n > most) {
            return Ok(None);
        }
        // Memory beyond the resident's plan: a device that cannot hold it goes without.
        let scope = engine
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = engine.storage("ring sums", bytes);
        if scope.pop().await.is_some() {
            return Ok(None);
        }
        let mut enc = engine.device.create_command_encoder(&Default::default());
        enc.clear_buffer(&buffer, 0, None);
        engine.queue.submit([enc.finish()]);
        Ok(Some(RadialCache {
            center,
            ring_of,
            sizes,
            buffer,
            frames,
        }))
    }

    /// Write the ring sums of `res`, whose positions are this cache's from `first` on (the
    /// whole acquisition, or one streamed block of its scan rows), and wait for them.
    pub async fn add_block(&self, engine: &Engine, res: &Resident, first: u32) -> Result<()> {
        let frames = u32::try_from(res.plan.shape.frames()).ok();
        if res.plan.shape.det_len() != self.ring_of.len()
            || frames.is_none_or(|n| first.checked_add(n).is_none_or(|end| end > self.frames))
        {
            return Err(Error::Gpu(format!(
                "ring sums of {} positions from {first} do not fit a cache of {} positions of a {}-pixel detector",
                res.plan.shape.frames(),
                self.frames,
                self.ring_of.len()
            )));
        }
        // Every pixel, ring after ring (ascending within each): one masked sum whose parts
        // are the rings, each written as an image of its own.
        let mut order: Vec<u32> = (0..self.ring_of.len() as u32).collect();
        order.sort_by_key(|&k| (self.ring_of[k as usize], k));
        let mut starts = vec![0u32];
        starts.extend(self.sizes.iter().scan(0u32, |at, &n| {
            *at += n;
            Some(*at)
        }));
        let list = DetectorList::in_order(engine, order);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        let parts = Parts::Table {
            starts: &starts,
            stride: self.frames,
            first,
        };
        encode_parts(engine, &mut enc, res, &list, &self.buffer, parts, false)?;
        engine.finished(engine.submit_tracked(enc.finish())).await
    }

    /// Bytes of GPU memory the sums take.
    pub fn held_bytes(&self) -> u64 {
        Self::bytes(self.frames as usize, self.sizes.len())
    }

    /// Rings about the centre.
    pub fn rings(&self) -> usize {
        self.sizes.len()
    }

    /// The exact per-position sums over `pixels` (sorted, distinct) when they are whole
    /// rings and nothing else; `None` when a pixel is left over (a detector not about the
    /// centre, or a radius inside a ring).
    pub async fn sums_of_whole_rings(
        &self,
        engine: &Engine,
        pixels: &[u32],
    ) -> Result<Option<Vec<u64>>> {
        let Some(rings) = whole_rings(&self.ring_of, &self.sizes, pixels) else {
            return Ok(None);
        };
        let n = self.frames as u64;
        let out = engine.storage("ring sums picked", n * 8);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        self.encode(engine, &mut enc, &rings, &out)?;
        engine.queue.submit([enc.finish()]);
        let words = engine.read_back(&out, n * 8).await?;
        Ok(Some(crate::kernels::masked_sum::words_to_u64(&words)))
    }

    /// [`split_pixels`] over this cache's rings, for a resident of `bits`-bit samples.
    pub fn split(&self, pixels: &[u32], bits: u32) -> Option<RingSplit> {
        split_pixels(&self.ring_of, &self.sizes, pixels, bits as u64 / 8)
    }

    /// Record writing the sums of `rings` into `out` (8 bytes per position; written, not
    /// added into).
    pub fn encode(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        rings: &[u32],
        out: &wgpu::Buffer,
    ) -> Result<()> {
        let groups = grid(self.frames.div_ceil(64));
        let params = engine.uniform(&RingSumParams {
            frames: self.frames,
            rings: rings.len() as u32,
            groups_x: groups.0,
            ..Default::default()
        });
        let picked = engine.input(rings);
        engine.dispatch(
            encoder,
            &kernels::RING_SUM,
            &[&params, &self.buffer, &picked, out],
            groups,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_partition_the_detector() {
        let (ring_of, sizes) = rings_about([7, 9], [3.2, 4.5]);
        assert_eq!(ring_of.len(), 63);
        assert_eq!(sizes.iter().sum::<u32>(), 63);
        // Pixel (3, 4) is 0.54 from the centre, (0, 0) is 5.55 away.
        assert_eq!(ring_of[3 * 9 + 4], 0);
        assert_eq!(ring_of[0], 5);
    }

    /// About a centre on the pixel grid, pixels at a whole distance R belong to ring R − 1,
    /// as a disk of radius R holds them: whole radii are whole rings about any centre.
    #[test]
    fn whole_radii_are_whole_rings_about_any_centre() {
        let det = [23, 30];
        for center in [[11.0, 14.0], [11.5, 14.0], [10.4, 15.2], [11.27, 13.88]] {
            let (ring_of, sizes) = rings_about(det, center);
            for r in 1..12 {
                let disk = crate::contract::DetectorMask::Disk {
                    center,
                    radius: r as f64,
                };
                let ann = crate::contract::DetectorMask::Annulus {
                    center,
                    inner: (r - 1) as f64,
                    outer: (r + 1) as f64,
                };
                // An annulus from 0 leaves out a pixel at the centre itself, in ring 0.
                let on_grid = center.iter().all(|c| c.fract() == 0.0);
                let masks = match r == 1 && on_grid {
                    true => vec![disk],
                    false => vec![disk, ann],
                };
                for m in masks {
                    let pixels = m.sparse(det).indices;
                    assert!(
                        whole_rings(&ring_of, &sizes, &pixels).is_some(),
                        "{center:?} r {r}: {m:?} is not whole rings"
                    );
                }
            }
        }
        assert_eq!(ring_of_dist2(0.0), 0);
        assert_eq!(ring_of_dist2(1.0), 0);
        assert_eq!(ring_of_dist2(1.0 + 1e-12), 1);
        assert_eq!(ring_of_dist2(25.0), 4);
    }

    #[test]
    fn a_centred_disk_is_whole_rings_and_an_off_centre_one_is_not_worth_it() {
        let det = [64, 64];
        let center = [31.5, 31.5];
        let (ring_of, sizes) = rings_about(det, center);
        let disk = |c: [f64; 2], r: f64| -> Vec<u32> {
            crate::contract::DetectorMask::Disk {
                center: c,
                radius: r,
            }
            .sparse(det)
            .indices
        };
        let bf = disk(center, 20.0);
        let s = split_pixels(&ring_of, &sizes, &bf, 2).expect("worth it");
        // Whole rings and the rest together are exactly the disk.
        let mut back: Vec<u32> = (0..ring_of.len() as u32)
            .filter(|&p| s.rings.contains(&ring_of[p as usize]))
            .chain(s.rest.iter().copied())
            .collect();
        back.sort_unstable();
        assert_eq!(back, bf);
        assert_eq!(s.rings, (0..20).collect::<Vec<u32>>());
        // Far from the centre no ring is whole, and nothing is split.
        assert_eq!(
            split_pixels(&ring_of, &sizes, &disk([10.0, 12.0], 6.0), 2),
            None
        );
        // A pixel outside the detector is never taken for a ring member.
        assert_eq!(split_pixels(&ring_of, &sizes, &[4096], 2), None);
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct RingSumParams {
        pub frames: u32,
        pub rings: u32,
        pub groups_x: u32,
        pub _pad0: u32,
    }
}
