//! The compressed resident on the CUDA device (decision 0064, `wgsl/packed.cu`): the samples
//! of each detector pixel at T = 256 / bits consecutive positions cut to the bit length of
//! their largest, exact. Built batch by batch from frame-major samples
//! ([`PackedBuilder`]: the upload's windows staged until they fill whole tiles), so the
//! unpacked acquisition never exists whole; every product kernel reads the packed sectors
//! directly.

use cudarc::driver::{
    CudaSlice, CudaViewMut, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};

use super::engine::{driver_error, CudaEngine};
use super::resident::{alloc, over, read, reduce_grid};
use crate::contract::Region;
use crate::error::Result;

/// Pixels in a group: one index entry (data start, 4-bit width codes) each.
const GROUP_PIXELS: usize = 8;

/// Threads of a block of the packed kernels (their shared memory assumes 8 warps).
const BLOCK_THREADS: u32 = 256;

/// A compressed resident: the index, the device address of each tile's data, and the
/// segments that hold the data.
pub struct Packed {
    /// Bits of a stored sample (8, 16, 32).
    pub bits: u32,
    pub frames: usize,
    pub frame_len: usize,
    pub tiles: usize,
    pub groups: usize,
    index: CudaSlice<u32>,
    tile_base: CudaSlice<u64>,
    segments: Vec<CudaSlice<u32>>,
}

/// A detector set as the packed masked sum reads it: (group, 8-bit selection) pairs.
pub struct GroupSet {
    items: CudaSlice<u32>,
    n_items: u32,
}

/// `pixels` as (group, selection) pairs, groups ascending; a pixel given m times is
/// selected in m pairs, so it is counted m times, as a listed pixel is.
pub fn group_items(pixels: &[u32]) -> Vec<u32> {
    let mut sorted = pixels.to_vec();
    sorted.sort_unstable();
    // (repeat, group) → selection: a pixel's first occurrence in layer 0, its next in 1, ...
    let mut layers = std::collections::BTreeMap::<(usize, u32), u32>::new();
    let mut repeat = 0;
    for (i, &k) in sorted.iter().enumerate() {
        repeat = if i > 0 && sorted[i - 1] == k {
            repeat + 1
        } else {
            0
        };
        *layers.entry((repeat, k / GROUP_PIXELS as u32)).or_default() |= 1 << (k % 8);
    }
    layers
        .into_iter()
        .flat_map(|((_, group), selection)| [group, selection])
        .collect()
}

impl Packed {
    /// The kernels' suffix for this resident's samples.
    fn suffix(&self) -> &'static str {
        suffix_of(self.bits)
    }

    fn tile_frames(&self) -> usize {
        256 / self.bits as usize
    }

    /// Device bytes held: data, index and tile table.
    pub fn bytes(&self) -> u64 {
        let data: usize = self.segments.iter().map(|s| s.num_bytes()).sum();
        (data + self.index.num_bytes() + self.tile_base.num_bytes()) as u64
    }

    pub fn group_set(&self, engine: &CudaEngine, pixels: &[u32]) -> Result<GroupSet> {
        let items = group_items(pixels);
        Ok(GroupSet {
            n_items: (items.len() / 2) as u32,
            items: engine
                .stream
                .clone_htod(if items.is_empty() {
                    &[0u32][..]
                } else {
                    &items
                })
                .map_err(driver_error("detector groups"))?,
        })
    }

    /// One block per tile.
    fn per_tile(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.tiles.max(1) as u32, 1, 1),
            block_dim: (BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Queue the masked sum over `set` into `out` (one u64 per frame).
    pub fn launch_masked_sum(
        &self,
        engine: &CudaEngine,
        set: &GroupSet,
        out: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let (groups, frames) = (self.groups as u32, self.frames as u64);
        let f = engine.function(&format!("masked_sum_packed_{}", self.suffix()))?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.index)
            .arg(&self.tile_base)
            .arg(&groups)
            .arg(&frames)
            .arg(&set.items)
            .arg(&set.n_items)
            .arg(out);
        // SAFETY: the arguments match masked_sum_packed's signature
        // (wgsl/masked_sum_packed.cu); every tile's base was placed by the builder.
        unsafe { l.launch(self.per_tile()) }.map_err(driver_error("masked_sum_packed"))?;
        Ok(())
    }

    /// Queue the CoM moments into `out` (three u64 per frame).
    pub fn launch_com_moments(
        &self,
        engine: &CudaEngine,
        det_cols: u32,
        out: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let (groups, frames) = (self.groups as u32, self.frames as u64);
        let f = engine.function(&format!("com_moments_packed_{}", self.suffix()))?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.index)
            .arg(&self.tile_base)
            .arg(&groups)
            .arg(&det_cols)
            .arg(&frames)
            .arg(out);
        // SAFETY: the arguments match com_moments_packed's signature
        // (wgsl/com_moments_packed.cu).
        unsafe { l.launch(self.per_tile()) }.map_err(driver_error("com_moments_packed"))?;
        Ok(())
    }

    /// Queue the sum and max patterns over the positions of `roi` (scan `scan_cols` wide)
    /// into `sum` and `max`, which hold zeros.
    pub fn launch_pattern_reduce(
        &self,
        engine: &CudaEngine,
        scan_cols: usize,
        roi: Region,
        sum: &mut CudaSlice<u64>,
        max: &mut CudaSlice<u32>,
    ) -> Result<()> {
        if roi.is_empty() {
            return Ok(());
        }
        let tile = self.tile_frames() as u64;
        let first = (roi.r0 * scan_cols + roi.c0) as u64;
        let last = ((roi.r1 - 1) * scan_cols + roi.c1 - 1) as u64;
        let (t0, t1) = (first / tile, last / tile + 1);
        // The raw resident's grid: a thread per pixel, shares of the tiles instead of the
        // positions.
        let (cfg, per_share) = reduce_grid(self.frame_len as u64, t1 - t0);
        let (groups, frame_len, cols) =
            (self.groups as u32, self.frame_len as u64, scan_cols as u32);
        let (r0, c0) = (roi.r0 as u32, roi.c0 as u32);
        let (rows, roi_cols) = ((roi.r1 - roi.r0) as u32, (roi.c1 - roi.c0) as u32);
        let f = engine.function(&format!("pattern_reduce_packed_{}", self.suffix()))?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.index)
            .arg(&self.tile_base)
            .arg(&groups)
            .arg(&frame_len)
            .arg(&cols)
            .arg(&r0)
            .arg(&c0)
            .arg(&rows)
            .arg(&roi_cols)
            .arg(&t0)
            .arg(&t1)
            .arg(&per_share)
            .arg(sum)
            .arg(max);
        // SAFETY: the arguments match pattern_reduce_packed's signature
        // (wgsl/pattern_reduce_packed.cu); the tiles [t0, t1) exist (`roi` lies in the scan).
        unsafe { l.launch(cfg) }.map_err(driver_error("pattern_reduce_packed"))?;
        Ok(())
    }

    /// Zero the sectors of `pixels` in every tile (the hot and dead pixels found after the
    /// upload, C-BAD-FOUND).
    pub fn zero_listed(&mut self, engine: &CudaEngine, pixels: &[u32]) -> Result<()> {
        if pixels.is_empty() {
            return Ok(());
        }
        let list = engine
            .stream
            .clone_htod(pixels)
            .map_err(driver_error("found bad pixels"))?;
        let (groups, bits, tiles) = (self.groups as u32, self.bits, self.tiles as u64);
        let n_pixels = pixels.len() as u32;
        let f = engine.function("packed_zero_listed")?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.index)
            .arg(&self.tile_base)
            .arg(&groups)
            .arg(&bits)
            .arg(&tiles)
            .arg(&list)
            .arg(&n_pixels);
        // SAFETY: the arguments match packed_zero_listed's signature (wgsl/packed.cu); it
        // writes only inside the listed sectors, which the segments hold.
        unsafe { l.launch(over(tiles * n_pixels as u64)) }
            .map_err(driver_error("packed_zero_listed"))?;
        engine.synchronize()
    }

    /// Frames `[f0, f1)` unpacked, as u32.
    pub fn frames(&self, engine: &CudaEngine, f0: usize, f1: usize) -> Result<Vec<u32>> {
        let n = (f1 - f0) * self.frame_len;
        let mut out = alloc::<u32>(engine, n, "frames read back")?;
        let (groups, bits, frame_len) = (self.groups as u32, self.bits, self.frame_len as u64);
        let (first, n_frames) = (f0 as u64, (f1 - f0) as u64);
        let f = engine.function("packed_frames")?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.index)
            .arg(&self.tile_base)
            .arg(&groups)
            .arg(&bits)
            .arg(&frame_len)
            .arg(&first)
            .arg(&n_frames)
            .arg(&mut out);
        // SAFETY: the arguments match packed_frames's signature (wgsl/packed.cu); `out`
        // holds the `n` samples it writes.
        unsafe { l.launch(over(n as u64)) }.map_err(driver_error("packed_frames"))?;
        let mut v = read(engine, &out)?;
        v.truncate(n);
        Ok(v)
    }
}

fn suffix_of(bits: u32) -> &'static str {
    match bits {
        8 => "u8",
        16 => "u16",
        _ => "u32",
    }
}

/// A compressed resident made from frames given in order, in windows of any length:
/// windows are staged until they fill whole tiles, which are encoded into a segment of
/// their own; what is left of a tile waits for the next window.
pub struct PackedBuilder<S> {
    packed: Packed,
    staging: CudaSlice<S>,
    /// Frames the staging holds (room for them).
    staging_frames: usize,
    /// Frames staged and not yet encoded.
    held: usize,
    /// Tiles encoded.
    done_tiles: usize,
}

impl<S: DeviceRepr + ValidAsZeroBits> PackedBuilder<S> {
    /// A builder of `frames` frames of `frame_len` samples of `S`.
    pub fn new(engine: &CudaEngine, frames: usize, frame_len: usize) -> Result<Self> {
        let bits = 8 * std::mem::size_of::<S>() as u32;
        let tile = 256 / bits as usize;
        let tiles = frames.div_ceil(tile);
        let groups = frame_len.div_ceil(GROUP_PIXELS);
        Ok(PackedBuilder {
            packed: Packed {
                bits,
                frames,
                frame_len,
                tiles,
                groups,
                index: alloc::<u32>(engine, 2 * tiles * groups, "the compressed index")?,
                tile_base: alloc::<u64>(engine, tiles, "the compressed tile table")?,
                segments: Vec::new(),
            },
            staging: alloc::<S>(engine, tile * frame_len, "the compressed upload staging")?,
            staging_frames: tile,
            held: 0,
            done_tiles: 0,
        })
    }

    /// The next `n` frames, written into the staging by `fill` (a view of `n` frames), then
    /// every whole tile staged encoded (and the last tile, once every frame came).
    pub fn stage(
        &mut self,
        engine: &CudaEngine,
        n: usize,
        fill: impl FnOnce(&mut CudaViewMut<S>) -> Result<()>,
    ) -> Result<()> {
        let len = self.packed.frame_len;
        if self.held + n > self.staging_frames {
            let frames = self.held + n;
            let mut grown = alloc::<S>(engine, frames * len, "the compressed upload staging")?;
            if self.held > 0 {
                engine
                    .stream
                    .memcpy_dtod(
                        &self.staging.slice(0..self.held * len),
                        &mut grown.slice_mut(0..self.held * len),
                    )
                    .map_err(driver_error("grow the staging"))?;
            }
            self.staging = grown;
            self.staging_frames = frames;
        }
        fill(
            &mut self
                .staging
                .slice_mut(self.held * len..(self.held + n) * len),
        )?;
        self.held += n;
        let tile = self.packed.tile_frames();
        let last = self.done_tiles * tile + self.held >= self.packed.frames;
        let whole = if last {
            self.held.div_ceil(tile)
        } else {
            self.held / tile
        };
        if whole == 0 {
            return Ok(());
        }
        self.encode(engine, whole, self.held.min(whole * tile))?;
        // A partial tile's frames moved to the staging's start: fewer than a tile, from
        // past at least one whole tile, so the two ranges never overlap.
        let rest = self.held.saturating_sub(whole * tile);
        if rest > 0 {
            let (mut head, tail) = self
                .staging
                .try_split_at_mut(whole * tile * len)
                .ok_or_else(|| crate::error::Error::Gpu("CUDA: the staging lost a tile".into()))?;
            engine
                .stream
                .memcpy_dtod(
                    &tail.slice(0..rest * len),
                    &mut head.slice_mut(0..rest * len),
                )
                .map_err(driver_error("keep a partial tile"))?;
        }
        self.held = rest;
        Ok(())
    }

    /// Encode the staging's first `n_tiles` tiles (`valid` frames, the rest zeros) into a
    /// segment of their own.
    fn encode(&mut self, engine: &CudaEngine, n_tiles: usize, valid: usize) -> Result<()> {
        let p = &mut self.packed;
        let (first, groups) = (self.done_tiles, p.groups);
        let ix = 2 * first * groups..2 * (first + n_tiles) * groups;
        let (frame_len, n_frames, groups32) = (p.frame_len as u64, valid as u32, groups as u32);
        let suffix = suffix_of(p.bits);
        let mut tile_words = alloc::<u32>(engine, n_tiles, "the tiles' sizes")?;
        {
            let f = engine.function(&format!("packed_sizes_{suffix}"))?;
            let mut index = p.index.slice_mut(ix.clone());
            let mut l = engine.stream.launch_builder(&f);
            l.arg(&self.staging)
                .arg(&frame_len)
                .arg(&n_frames)
                .arg(&groups32)
                .arg(&mut index)
                .arg(&mut tile_words);
            let cfg = LaunchConfig {
                grid_dim: (n_tiles as u32, 1, 1),
                block_dim: (BLOCK_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments match packed_sizes's signature (wgsl/packed.cu); the
            // staging holds the `n_tiles` tiles' frames it reads (`valid` of them), the index
            // range their groups.
            unsafe { l.launch(cfg) }.map_err(driver_error("packed_sizes"))?;
        }
        let words = read(engine, &tile_words)?;
        let mut starts = Vec::with_capacity(n_tiles);
        let mut total = 0u64;
        for &w in &words[..n_tiles] {
            starts.push(total);
            total += w as u64;
        }
        // One word past the data: a sample's two-word read stays inside.
        let segment = alloc::<u32>(engine, total as usize + 1, "a compressed segment")?;
        let base = {
            let (ptr, _sync) = segment.device_ptr(&engine.stream);
            ptr
        };
        let bases: Vec<u64> = starts.iter().map(|s| base + 4 * s).collect();
        engine
            .stream
            .memcpy_htod(&bases, &mut p.tile_base.slice_mut(first..first + n_tiles))
            .map_err(driver_error("the tile table"))?;
        let n_groups = (n_tiles * groups) as u64;
        let f = engine.function(&format!("packed_write_{suffix}"))?;
        let index = p.index.slice(ix);
        let tiles = p.tile_base.slice(first..first + n_tiles);
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&self.staging)
            .arg(&frame_len)
            .arg(&n_frames)
            .arg(&groups32)
            .arg(&n_groups)
            .arg(&index)
            .arg(&tiles);
        // SAFETY: the arguments match packed_write's signature (wgsl/packed.cu); each group
        // writes its words at its start inside `segment`, which `packed_sizes` sized.
        unsafe { l.launch(over(n_groups)) }.map_err(driver_error("packed_write"))?;
        p.segments.push(segment);
        self.done_tiles += n_tiles;
        Ok(())
    }

    /// The resident, once every frame was staged.
    pub fn finish(self, engine: &CudaEngine) -> Result<Packed> {
        if self.done_tiles != self.packed.tiles {
            return Err(crate::error::Error::Gpu(format!(
                "CUDA: the compressed upload ended after {} of {} tiles",
                self.done_tiles, self.packed.tiles
            )));
        }
        engine.synchronize()?;
        Ok(self.packed)
    }
}

#[cfg(test)]
mod tests {
    use super::group_items;

    #[test]
    fn pixels_become_groups_with_a_bit_per_pixel_and_repeats_apart() {
        assert_eq!(group_items(&[]), Vec::<u32>::new());
        assert_eq!(
            group_items(&[9, 3, 8, 17]),
            vec![0, 1 << 3, 1, 0b11, 2, 1 << 1]
        );
        // Pixel 3 given twice is counted twice: a second pair selects it again.
        assert_eq!(
            group_items(&[3, 9, 3, 15, 3]),
            vec![0, 1 << 3, 1, (1 << 1) | (1 << 7), 0, 1 << 3, 0, 1 << 3]
        );
    }
}
