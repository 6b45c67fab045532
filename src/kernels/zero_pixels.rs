//! Zeroing pixels of a resident (`wgsl/zero_pixels.wgsl`): the hot and dead pixels found in
//! the mean pattern, left out of every product as the CPU reference leaves them out
//! (C-BAD-FOUND).
//!
//! Its parity tests: `tests/bad_pixels.rs` (`zeroing_reaches_every_segment_of_a_split_resident`).

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::{Engine, Resident};
use crate::kernels::{self, uniform};

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct ZeroParams {
        pub tiles: u32,
        pub tile_words: u32,
        pub pixels: u32,
        pub groups_x: u32,
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct SentinelParams {
        pub words: u32,
        pub bits: u32,
        pub groups_x: u32,
        pub _pad: u32,
    }
}

impl Engine {
    /// Zero the samples of an integer resident equal to the saturation sentinel of its
    /// `bits`-bit samples (the largest value): with the file's bad pixels
    /// ([`Engine::zero_pixels`]), the masking the decode applies (C-BAD), for a resident
    /// copied in as stored (a prepared acquisition, decision 0037). A compressed resident's
    /// are zeroed in its packed sectors, in place (decision 0055).
    pub fn zero_sentinels(&self, res: &mut Resident) -> Result<()> {
        if res.float.is_some() {
            return Err(crate::error::Error::Gpu(
                "sentinel samples are zeroed in integer residents only".into(),
            ));
        }
        let mut enc = self.device.create_command_encoder(&Default::default());
        if let Some(packed) = &res.packed {
            let mut batch = crate::gpu::Batch::default();
            for (seg, buffer) in res.plan.segments.iter().zip(&packed.buffers) {
                let tiles =
                    u32::try_from(seg.frames.div_ceil(res.plan.tile as usize)).map_err(|_| {
                        crate::error::Error::Gpu("a packed segment of too many tiles".into())
                    })?;
                kernels::packed::add_zero_sentinels(self, &mut batch, (&res.plan, buffer), tiles)?;
            }
            batch.flush(&mut enc);
            self.queue.submit([enc.finish()]);
            res.radial = None;
            return Ok(());
        }
        for (seg, buffer) in res.plan.segments.iter().zip(&res.buffers) {
            let words = u32::try_from(seg.bytes / 4).map_err(|_| {
                crate::error::Error::Gpu("a resident segment of over 2^32 words".into())
            })?;
            let groups = kernels::grid(words.div_ceil(256));
            let params = self.uniform(&SentinelParams {
                words,
                bits: res.plan.bits,
                groups_x: groups.0,
                _pad: 0,
            });
            self.dispatch_at(
                &mut enc,
                &kernels::ZERO_SENTINELS,
                &[(2, buffer), (3, &params)],
                groups,
            )?;
        }
        self.queue.submit([enc.finish()]);
        res.radial = None;
        Ok(())
    }

    /// Zero detector pixels `pixels` (indices of the resident's detector) at every scan
    /// position of `res`: bad-pixel masking of pixels found after the upload
    /// (`wgsl/zero_pixels.wgsl`). Ring sums made before are dropped.
    pub fn zero_pixels(&self, res: &mut Resident, pixels: &[u32]) -> Result<()> {
        if pixels.is_empty() {
            return Ok(());
        }
        if let Some(packed) = &mut res.packed {
            // A compressed resident unpacks these pixels as 0 from now on.
            for &k in pixels {
                let k = k as usize;
                if let Some(word) = packed.zeroed_bits.get_mut(k / 32) {
                    *word |= 1 << (k % 32);
                }
            }
            self.queue
                .write_buffer(&packed.zeroed, 0, bytemuck::cast_slice(&packed.zeroed_bits));
            res.radial = None;
            return Ok(());
        }
        let plan = &res.plan;
        let list = self.input(pixels);
        let mut enc = self.device.create_command_encoder(&Default::default());
        for (seg, buffer) in plan.segments.iter().zip(&res.buffers) {
            let tiles = seg.frames.div_ceil(plan.tile as usize) as u32;
            let words = tiles as u64 * pixels.len() as u64 * 8;
            let groups = kernels::grid(words.div_ceil(256) as u32);
            let params = self.uniform(&kernels::ZeroParams {
                tiles,
                tile_words: plan.tile_words,
                pixels: pixels.len() as u32,
                groups_x: groups.0,
            });
            self.dispatch(
                &mut enc,
                &kernels::ZERO_PIXELS,
                &[&params, &list, buffer],
                groups,
            )?;
        }
        self.queue.submit([enc.finish()]);
        res.radial = None;
        Ok(())
    }
}
