//! A session streamed from its files (the streaming memory plan): the blocks a pass reads,
//! the pixels its mean pattern zeroed, and the ring sums about the BF centre made in one
//! pass after the fit, from which disks and annuli about that centre are summed without
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
}

/// What the load profile says of a streamed session's ring sums.
#[derive(Clone, Debug, Serialize)]
pub struct StreamedRingSums {
    /// The centre (detector row, column, binned pixels) the rings are about: the fitted BF
    /// centre to 0.01 px, as the page places its detectors.
    pub center: [f64; 2],
    pub rings: usize,
    pub bytes: u64,
}

/// `x` to 0.01, as the page rounds the fitted centre it places detectors at.
fn hundredths(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Stream {
    /// Product `p` (under the stream's own correction) from the ring sums, when its detector
    /// is whole rings about their centre and nothing else: a disk or annulus about it whose
    /// radii fall between rings (whole pixels, for a centre off the pixel grid). `None`
    /// when it takes a pass: no ring sums, another kind, weights, or a pixel left over.
    pub(super) async fn summed_from_rings(
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
    /// A streamed session's ring sums about the fitted BF centre (0.01 px), in one pass over
    /// the files, where its plan kept room for them; the profile says what was made.
    pub(super) async fn make_streamed_ring_sums(&mut self, engine: &Engine) -> Result<()> {
        let centre = self.resident_bf_centre().map(hundredths);
        let det = self.det();
        let frames = self.acq.shape.frames();
        let bits = match self.acq.dtype {
            Dtype::U8 => 8,
            Dtype::U16 => 16,
            Dtype::U32 => 32,
            // Float32 sums are 128-bit: never cached.
            _ => return Ok(()),
        };
        let Some(limit) = self.profile.memory_plan.ring_sums_bytes else {
            return Ok(());
        };
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        stream.rings = None;
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
        let zeroed = stream.zeroed.as_deref();
        crate::products::stream::ring_sums(
            engine,
            &self.acq,
            stream.correction,
            zeroed,
            stream.blocks,
            &rings,
            &mut |_, _| {},
        )
        .await?;
        self.profile.streamed_ring_sums = Some(StreamedRingSums {
            center: centre,
            rings: rings.rings(),
            bytes: rings.held_bytes(),
        });
        self.profile.stages.push(Stage {
            name: "ring sums about the BF centre (one pass over the files)".into(),
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
