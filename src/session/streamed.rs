//! A session streamed from its files (the streaming memory plan): the blocks a pass reads,
//! the pixels its mean pattern zeroed, and its first look, made in one pass after the fit:
//! the ring sums about the BF centre, from which disks and annuli about it are summed, and
//! the exact CoM moments, from which CoM, DPC, iDPC and the DPC rotation are made, without
//! another pass (decision 0036).

use super::*;
use crate::products::stream::Blocks;

/// A session's streaming plan (see [`Session::stream`]).
pub(super) struct Stream {
    pub(super) blocks: Blocks,
    pub(super) correction: Correction,
    pub(super) zeroed: Option<Vec<bool>>,
    /// Ring sums of the whole scan about the BF centre, where the plan kept room for them.
    pub(super) rings: Option<RadialCache>,
    /// The exact CoM moments of every position and their bound, made with the ring sums
    /// (integer data whose moments fit 64 bits).
    pub(super) moments: Option<(Vec<[u64; 3]>, u128)>,
}

/// What the load profile says of a streamed session's ring sums.
#[derive(Clone, Debug, Serialize)]
pub struct StreamedRingSums {
    /// The centre (detector row, column, binned pixels) the rings are about: the fitted BF
    /// centre to 0.01 px, as the page places its detectors.
    pub center: [f64; 2],
    pub rings: usize,
    pub bytes: u64,
    /// Whether the CoM moments were kept too (CoM, DPC, iDPC without a pass).
    pub com_moments: bool,
}

/// `x` to 0.01, as the page rounds the fitted centre it places detectors at.
fn hundredths(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Stream {
    /// Product `p` (under the stream's own correction) from the first look: a detector
    /// that is whole rings about their centre and nothing else (a disk or annulus about it
    /// whose radii fall between rings: whole pixels) from the ring sums; CoM, DPC, iDPC and
    /// the DPC rotation (its dark field whole rings) from the moments. `None` when it takes
    /// a pass.
    pub(super) async fn by_first_look(
        &self,
        engine: &Engine,
        shape: crate::contract::Shape4,
        p: &ProductParams,
    ) -> Result<Option<ProductArray>> {
        use crate::products::gpu as gp;
        let scan = shape.scan;
        match (p.kind, &self.moments) {
            (ProductKind::Com | ProductKind::Dpc, Some((m, _))) => {
                return Ok(Some(gp::com_product(p, scan, &gp::com_from_moments(m))));
            }
            (ProductKind::Idpc, Some((m, bound))) => {
                let buf = gp::moments_input(engine, m);
                return gp::idpc_of_moments(engine, scan, &buf, m, *bound, p)
                    .await
                    .map(Some);
            }
            (ProductKind::DpcRotation, Some((m, bound))) => {
                let dark = p.dark_field();
                let Some(dark) = Box::pin(self.summed_by_rings(engine, shape, &dark)).await? else {
                    return Ok(None);
                };
                let buf = gp::moments_input(engine, m);
                return gp::rotation_of_moments(engine, scan, &buf, m, *bound, &dark)
                    .await
                    .map(Some);
            }
            _ => {}
        }
        self.summed_by_rings(engine, shape, p).await
    }

    /// Product `p` from the ring sums, when its detector is whole rings and nothing else.
    async fn summed_by_rings(
        &self,
        engine: &Engine,
        shape: crate::contract::Shape4,
        p: &ProductParams,
    ) -> Result<Option<ProductArray>> {
        let Some(rings) = &self.rings else {
            return Ok(None);
        };
        let det = shape.det;
        let pixels = match p.kind {
            ProductKind::Total => SparseMask::all(det).indices,
            ProductKind::Bf | ProductKind::Adf | ProductKind::Rect | ProductKind::Mask => {
                let sparse = p.detector_mask(det)?.sparse(det);
                if sparse.weights.is_some() {
                    return Ok(None);
                }
                sparse.indices
            }
            // C-MASK: DF = total − BF, the rings outside the disk.
            ProductKind::Df => {
                let disk = p.detector_mask(det)?.sparse(det).indices;
                let mut inside = vec![false; det[0] * det[1]];
                for &k in &disk {
                    if let Some(x) = inside.get_mut(k as usize) {
                        *x = true;
                    }
                }
                (0..inside.len() as u32)
                    .filter(|&k| !inside[k as usize])
                    .collect()
            }
            _ => return Ok(None),
        };
        Ok(rings
            .sums_of_whole_rings(engine, &pixels)
            .await?
            .map(|sums| ProductArray {
                shape: shape.scan.to_vec(),
                data: ArrayData::U64(sums),
            }))
    }
}

impl Session {
    /// A streamed session's first look, in one pass over the files where its plan kept room
    /// for the ring sums: those about the fitted BF centre (0.01 px), and the CoM moments
    /// where they fit 64 bits. The profile says what was made.
    pub(super) async fn make_first_look(&mut self, engine: &Engine) -> Result<()> {
        let centre = self.resident_bf_centre().map(hundredths);
        let det = self.det();
        let frames = self.acq.shape.frames();
        // Float32 sums are 128-bit: never cached.
        if self.acq.dtype.is_float() {
            return Ok(());
        }
        // The blocks' samples, as their residents hold them (binned sums are 32-bit).
        let binned = self.stream.as_ref().is_some_and(|s| s.correction.bin > 1);
        let bits = crate::upload::plan::sample_bits(self.acq.dtype, binned);
        let Some(limit) = self.profile.memory_plan.ring_sums_bytes else {
            return Ok(());
        };
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        stream.rings = None;
        stream.moments = None;
        let Ok(frames) = u32::try_from(frames) else {
            return Ok(());
        };
        let t = now_ms();
        let Some(rings) = RadialCache::empty(engine, (det, bits), centre, frames, limit).await?
        else {
            self.profile.warnings.push(format!(
                "no ring sums about the BF centre ({:.2}, {:.2}): it is off the detector or too far from its middle for the room kept; every detector takes one pass over the files",
                centre[0], centre[1]
            ));
            return Ok(());
        };
        // The moments are exact while their bound stays below 2^64 (`moments_fit_64`).
        let bound = crate::kernels::com_moments::moment_bound_of(bits, det);
        let zeroed = stream.zeroed.as_deref();
        stream.moments = crate::products::stream::first_look(
            engine,
            &self.acq,
            stream.correction,
            zeroed,
            stream.blocks,
            &rings,
            bound < 1u128 << 64,
            &mut |_, _| {},
        )
        .await?;
        self.profile.streamed_ring_sums = Some(StreamedRingSums {
            center: centre,
            rings: rings.rings(),
            bytes: rings.held_bytes(),
            com_moments: stream.moments.is_some(),
        });
        self.profile.stages.push(Stage {
            name: "of which ring sums and CoM moments (one pass over the files)".into(),
            ms: now_ms() - t,
        });
        stream.rings = Some(rings);
        Ok(())
    }

    /// Products computed by a pass over the files so far (a streamed session; tests).
    pub fn streamed_passes(&self) -> u64 {
        self.profile.streamed_passes.get()
    }
}
