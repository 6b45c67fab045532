//! A viewing session: one acquisition resident on the GPU, the cached per-position totals
//! and CoM moments, and two display planes (virtual image, diffraction pattern) that follow
//! the user's view state. Platform-neutral: the browser glue (`web`) and the native tests
//! drive the same code; only canvases and file handles differ.

mod compare;
mod deferred_leaves;
mod derived;
mod draw;
mod open;
mod profile;
mod readout;
mod streamed;
mod view;

use serde::{Deserialize, Serialize};

pub use compare::*;
use derived::*;
use draw::next_plane_gen;
pub use draw::DrawKey;
pub use open::*;
pub use profile::*;
pub use readout::*;
use streamed::Stream;
pub use view::*;

use crate::clock::now_ms;
use crate::contract::{DetectorMask, Dtype, Region, ScanRoi, SparseMask};
use crate::display::gpu::{Plane, PlaneSource};
use crate::display::{self, Limits, Scale, ShownRange, Stats};
use crate::error::{Error, Result};
use crate::formats::info::Info;
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::Correction;
use crate::gpu::{Engine, EngineSummary, Resident};
use crate::kernels::ring_sum::RadialCache;
use crate::kernels::View;
use crate::products::gpu as gp;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};
use crate::upload::plan::ResidentPlan;

pub struct Session {
    pub acq: Acquisition,
    pub info: serde_json::Value,
    pub profile: Profile,
    /// `[centre_row, centre_col, radius]` of the BF disk, for presets.
    pub bf_fit: [f64; 3],
    /// Why the BF fit is implausible, when it is (`pattern::BfFit::warning`).
    pub bf_fit_warning: Option<String>,
    /// The detector bin `bf_fit` was made at (the one the acquisition was opened with).
    fit_bin: usize,
    correction: Correction,
    resident: Option<Resident>,
    derived: Option<Derived>,
    /// Float32 data on the GPU: products are exact 128-bit sums there, read back for their
    /// one rounding (`gpu::float_products`); absent when binned (CPU reference).
    float_resident: Option<Resident>,
    image_sums: wgpu::Buffer,
    pattern_sums: wgpu::Buffer,
    /// The DPC vectors (g_r, g_c) of every position, f32 pairs: the DPC magnitude and
    /// direction images' source.
    dpc_pairs: wgpu::Buffer,
    image: Plane,
    pattern: Plane,
    state: Option<ViewState>,
    image_key: String,
    pattern_key: String,
    /// A new number each time a panel's plane or limits are recorded anew ([image, pattern]):
    /// a canvas that shows the same generation through the same view needs no redraw.
    plane_gen: [u64; 2],
    /// iDPC FFT plans and buffers for the current scan shape.
    idpc: Option<([usize; 2], crate::kernels::fft::Idpc)>,
    /// Whether [`Session::prepare`] has succeeded.
    prepared: bool,
    /// The streaming plan's blocks of scan rows, where the acquisition is not resident but
    /// streamed for each product (`upload::memory`), and the detector pixels its mean
    /// pattern had zeroed (bad-pixel masking), found once at the open.
    stream: Option<Stream>,
}

impl Session {
    /// What an open leaves for after its first image: the totals and CoM moments (DF,
    /// total and CoM/DPC/iDPC images; made now if one is asked for first) and the ring sums
    /// about the fitted BF centre (detectors about it then cost a few ring sums per
    /// position while they are resized; until then they are dense masked sums, as exact).
    /// Their times join the load profile. The page calls this once the first image is
    /// drawn, natively it follows the open; once it has succeeded, another call does
    /// nothing.
    pub async fn prepare(&mut self, engine: &Engine) -> Result<()> {
        if self.prepared {
            return Ok(());
        }
        self.ensure_derived(engine).await?;
        let t = now_ms();
        // A reload before this made them already.
        if self.ring_sums_centre().is_none() && self.make_ring_sums(engine).await? {
            self.profile.stages.push(Stage {
                name: "ring sums about the BF centre".into(),
                ms: now_ms() - t,
            });
        }
        self.profile.sum_stages();
        self.prepared = true;
        Ok(())
    }

    /// Derive the totals and CoM moments of an integer resident, unless it has them.
    async fn ensure_derived(&mut self, engine: &Engine) -> Result<()> {
        let Some(res) = self.resident.as_ref().filter(|_| self.derived.is_none()) else {
            return Ok(());
        };
        let t = now_ms();
        self.derived = Some(derive(engine, res).await?);
        self.profile.stages.push(Stage {
            name: "totals + CoM moments".into(),
            ms: now_ms() - t,
        });
        self.profile.sum_stages();
        Ok(())
    }

    /// End the session, handing its resident to `engine` for the next upload to reuse
    /// ([`Engine::set_aside`]); everything else it holds is freed.
    pub fn set_aside(self, engine: &Engine) {
        for res in self.resident.into_iter().chain(self.float_resident) {
            engine.set_aside(res);
        }
    }

    pub fn correction(&self) -> Correction {
        self.correction
    }

    /// What a prepared file saved from this session keeps of it: the correction and the
    /// BF disk fitted under it (none when the correction changed since the fit).
    pub fn saved_settings(&self) -> crate::formats::prepared::SavedSession {
        let c = self.correction;
        crate::formats::prepared::SavedSession {
            bin: c.bin,
            mask_bad_pixels: c.mask_bad_pixels,
            bf_fit: (self.fit_bin == c.bin).then_some(self.bf_fit),
        }
    }

    /// Give the integer resident the correction `corr` (detector bin, bad-pixel masking): a
    /// new upload of the whole acquisition when it has another, so what was drawn follows
    /// it. Without an integer resident nothing changes: products say their correction.
    pub async fn set_correction(&mut self, engine: &Engine, corr: Correction) -> Result<()> {
        corr.validate(self.acq.shape)?;
        if self.resident.is_some() && corr != self.correction {
            self.reload(engine, corr).await?;
        }
        Ok(())
    }

    /// Products `ps` under `corr`, in order, as [`Session::product`] computes each; on a
    /// streamed session those its first look does not give come from one pass over the
    /// files together (product-first streaming, decision 0023), not a pass each.
    pub async fn products(
        &mut self,
        engine: &Engine,
        ps: &[ProductParams],
        corr: Correction,
    ) -> Result<Vec<ProductArray>> {
        for p in ps {
            p.validate(self.acq.shape, corr)?;
        }
        let one_pass = self.resident.is_none() && !ps.iter().any(|p| self.many_weights(p));
        let Some(stream) = self.stream.as_ref().filter(|_| one_pass) else {
            let mut out = Vec::with_capacity(ps.len());
            for p in ps {
                out.push(self.product(engine, p, corr).await?);
            }
            return Ok(out);
        };
        let mut out: Vec<Option<ProductArray>> = ps.iter().map(|_| None).collect();
        if corr == stream.correction {
            let shape = self.acq.shape.binned(corr.bin);
            for (o, p) in out.iter_mut().zip(ps) {
                *o = stream.by_first_look(engine, shape, p).await?;
            }
        }
        let rest: Vec<ProductParams> = ps
            .iter()
            .zip(&out)
            .filter(|(_, o)| o.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        if rest.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let passes = &self.profile.streamed_passes;
        passes.set(passes.get().saturating_add(1));
        use crate::products::stream::{compute_streamed, compute_with};
        let quiet = &mut |_, _| {};
        let computed = if corr == stream.correction {
            let zeroed = stream.zeroed.as_deref();
            compute_with(engine, &self.acq, &rest, corr, zeroed, stream.blocks, quiet).await
        } else {
            compute_streamed(engine, &self.acq, &rest, corr, stream.blocks, quiet).await
        };
        let computed = match computed {
            // What the GPU declines: each product as `product` computes it (the CPU
            // reference for those).
            Err(e) if e.is_gpu_unsupported() => {
                let mut each = Vec::with_capacity(rest.len());
                for p in &rest {
                    each.push(self.product(engine, p, corr).await?);
                }
                each
            }
            computed => computed?,
        };
        let mut computed = computed.into_iter();
        out.into_iter()
            .map(|o| {
                o.or_else(|| computed.next())
                    .ok_or_else(|| Error::Gpu("the streamed pass returned fewer products".into()))
            })
            .collect()
    }

    /// Compute one product exactly (as `stem4d product`) with the correction `corr`. With an
    /// integer resident that is the resident's: [`Session::set_correction`] first.
    pub async fn product(
        &mut self,
        engine: &Engine,
        p: &ProductParams,
        corr: Correction,
    ) -> Result<ProductArray> {
        p.validate(self.acq.shape, corr)?;
        if self.resident.is_none() {
            return self.exact_product(engine, p, corr).await;
        }
        if corr != self.correction {
            return Err(Error::param(format!(
                "the acquisition on the GPU has bin {} and bad-pixel masking {}: set its correction before a product with another",
                self.correction.bin,
                if self.correction.mask_bad_pixels { "on" } else { "off" },
            )));
        }
        let res = self
            .resident
            .as_ref()
            .ok_or_else(|| Error::Gpu("no resident acquisition".into()))?;
        let moments = matches!(
            p.kind,
            ProductKind::Com | ProductKind::Dpc | ProductKind::Idpc | ProductKind::DpcRotation
        );
        if (moments && crate::kernels::com_moments::moments_fit_64(res).is_err())
            || self.many_weights(p)
        {
            // Beyond what the GPU path does exactly (moments past 2^64, masks with very many
            // distinct weights, C-WEIGHTS): the exact CPU reference instead.
            return crate::cpu::compute(&self.acq, p, corr);
        }
        gp::compute_resident(engine, &self.acq, res, p).await
    }

    /// Whether `p`'s detector mask has more distinct weights than the GPU path sums exactly
    /// (C-WEIGHTS): the exact CPU reference computes it instead.
    fn many_weights(&self, p: &ProductParams) -> bool {
        p.mask.as_ref().is_some_and(|m| {
            let sparse = m.sparse(self.det());
            sparse.weights.is_some_and(|w| {
                crate::kernels::masked_sum::weight_groups(&sparse.indices, &w).len()
                    > crate::kernels::masked_sum::MAX_WEIGHT_GROUPS
            })
        })
    }

    /// A product without an integer resident: streamed from the files within a budget (what
    /// the GPU declines, and masks of many weights, on the CPU reference); exact float32
    /// sums on the GPU when the float resident has this correction and can sum it exactly;
    /// else the CPU reference.
    async fn exact_product(
        &self,
        engine: &Engine,
        p: &ProductParams,
        corr: Correction,
    ) -> Result<ProductArray> {
        if let Some(stream) = self.stream.as_ref().filter(|_| !self.many_weights(p)) {
            // One pass over the files; another correction first finds its own bad pixels.
            use crate::products::stream::{compute_streamed, compute_with, only};
            if corr == stream.correction {
                if let Some(done) = stream
                    .by_first_look(engine, self.acq.shape.binned(corr.bin), p)
                    .await?
                {
                    return Ok(done);
                }
            }
            let passes = &self.profile.streamed_passes;
            passes.set(passes.get().saturating_add(1));
            let blocks = stream.blocks.for_product(p);
            let (ps, quiet) = (std::slice::from_ref(p), &mut |_, _| {});
            let out = if corr == stream.correction {
                let zeroed = stream.zeroed.as_deref();
                compute_with(engine, &self.acq, ps, corr, zeroed, blocks, quiet).await
            } else {
                compute_streamed(engine, &self.acq, ps, corr, blocks, quiet).await
            };
            match out {
                // What the GPU declines (moments past 2^64, float32 spans too wide): the
                // CPU reference, as for a resident acquisition.
                Err(e) if e.is_gpu_unsupported() => {}
                out => return only(out?),
            }
        }
        if let Some(res) = &self.float_resident {
            if corr == res.correction {
                // A span too wide for 128-bit sums (or NaN) is declined there: the CPU
                // reference computes it instead, exactly. Any other failure is the user's to see.
                match gp::compute_resident(engine, &self.acq, res, p).await {
                    Err(e) if e.is_gpu_unsupported() => {}
                    done => return done,
                }
            }
        }
        crate::cpu::compute(&self.acq, p, corr)
    }

    async fn reload(&mut self, engine: &Engine, corr: Correction) -> Result<()> {
        // Free the old copy first: two residents may not fit together. Its buffers are
        // reused where the new plan has their sizes (a changed bad-pixel policy).
        if let Some(old) = self.resident.take() {
            engine.set_aside(old);
        }
        self.derived = None;
        let res = engine.upload(&self.acq, corr).await;
        engine.release_set_aside();
        let mut res = res?;
        gp::settle_bad_pixels(engine, &self.acq, &mut res).await?;
        // Made at once, as its ring sums: the load profile times the open's, not these.
        self.derived = Some(derive(engine, &res).await?);
        let shape = res.plan.shape;
        self.pattern = Plane::new(engine, shape.det[1] as u32, shape.det[0] as u32);
        self.pattern_sums = engine.storage("pattern sums", shape.det_len() as u64 * 16);
        self.resident = Some(res);
        self.correction = corr;
        self.make_ring_sums(engine).await?;
        self.image_key.clear();
        self.pattern_key.clear();
        Ok(())
    }

    /// The fitted BF centre on the resident's detector: a detector binned b×b maps pixel
    /// centre x to (x + 0.5) / b − 0.5.
    fn resident_bf_centre(&self) -> [f64; 2] {
        let (from, to) = (
            self.fit_bin.max(1) as f64,
            self.correction.bin.max(1) as f64,
        );
        [self.bf_fit[0], self.bf_fit[1]].map(|x| (x + 0.5) * from / to - 0.5)
    }

    /// Make the resident's ring sums about the fitted BF centre; whether it has them.
    async fn make_ring_sums(&mut self, engine: &Engine) -> Result<bool> {
        let centre = self.resident_bf_centre();
        let Some(res) = &mut self.resident else {
            return Ok(false);
        };
        res.radial = RadialCache::build(engine, res, centre).await?;
        Ok(res.radial.is_some())
    }

    /// The centre of the resident's ring sums, where it has them (tests, diagnostics).
    pub fn ring_sums_centre(&self) -> Option<[f64; 2]> {
        self.resident.as_ref()?.radial.as_ref().map(|r| r.center)
    }

    fn det(&self) -> [usize; 2] {
        self.acq.shape.binned(self.correction.bin).det
    }

    /// Bring both planes up to date with `st` (only what changed is recomputed) and
    /// compute their display limits; nothing is read back.
    pub async fn update(&mut self, engine: &Engine, st: &ViewState) -> Result<()> {
        let mut enc = engine.device.create_command_encoder(&Default::default());
        self.encode_update(engine, &mut enc, st, Planes::Both)
            .await?;
        engine.queue.submit([enc.finish()]);
        Ok(())
    }

    /// [`Session::update`] recorded into `enc`, for the caller to submit with other work
    /// (the frames drawn from it, the other acquisitions of a compare grid): `planes` says
    /// whether the pattern panel follows too. Work it cannot record (a streamed pass, the
    /// totals derived the first time) is submitted on its own before.
    pub async fn encode_update(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        st: &ViewState,
        planes: Planes,
    ) -> Result<()> {
        engine.check_alive()?;
        for d in [&st.image.display, &st.pattern.display] {
            d.limits.validate()?;
            display::colormap_index(&d.cmap)?;
            if !(d.zoom.is_finite() && d.zoom > 0.0) {
                return Err(Error::param("zoom must be a positive number"));
            }
        }
        let scan = self.acq.shape.scan;
        let [r, c] = st.image.cursor;
        if r >= scan[0] || c >= scan[1] {
            return Err(Error::param(format!(
                "cursor ({r}, {c}) is outside the {}x{} scan",
                scan[0], scan[1]
            )));
        }
        if let Some(roi) = st.image.scan_roi()? {
            roi.validate(scan)?;
        }
        let det = self.det();
        let detector = st.image.detector(det)?;
        let old = self.state.clone();
        let ikey = st.image.key();
        if ikey != self.image_key {
            self.encode_image(engine, enc, st, detector.as_ref())
                .await?;
        }
        let pkey = format!(
            "{:?}|{:?}|{:?}",
            st.pattern.source,
            (st.pattern.source == PatternSource::Cursor).then_some(st.image.cursor),
            (st.pattern.source != PatternSource::Cursor)
                .then_some((st.image.roi, st.image.roi_circle))
        );
        // A compare grid's other acquisitions show no pattern: theirs stays as it was.
        let pkey = match planes {
            Planes::Both => pkey,
            Planes::Image => self.pattern_key.clone(),
        };
        if pkey != self.pattern_key {
            self.encode_pattern(engine, enc, st).await?;
        }
        let display_changed = |d: &PanelDisplay, o: Option<&PanelDisplay>| {
            o.is_none_or(|o| o.limits != d.limits || o.scale != d.scale)
        };
        if ikey != self.image_key
            || display_changed(&st.image.display, old.as_ref().map(|o| &o.image.display))
        {
            self.plane_gen[0] = next_plane_gen();
            self.image.encode_stats(
                engine,
                enc,
                st.image.display.limits,
                st.image.display.scale,
            )?;
        }
        if planes == Planes::Both
            && (pkey != self.pattern_key
                || display_changed(
                    &st.pattern.display,
                    old.as_ref().map(|o| &o.pattern.display),
                ))
        {
            self.plane_gen[1] = next_plane_gen();
            self.pattern.encode_stats(
                engine,
                enc,
                st.pattern.display.limits,
                st.pattern.display.scale,
            )?;
        }
        self.image_key = ikey;
        self.pattern_key = pkey;
        self.state = Some(st.clone());
        Ok(())
    }
}
