//! Opening: what the page asks for (`OpenRequest`), the upload with its profiled stages,
//! and a session's open, which keeps the previous acquisition until the new one is checked.

use super::deferred_leaves::{blocks_read_leaves, read_leaves};
use super::*;
use crate::upload::memory::{MemoryPlan, PlanKind};

/// What `stem4d.open(files, options)` accepts (like the CLI's `--scan-shape`/`--dataset`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenRequest {
    /// A generated acquisition `[R, C, KR, KC]` instead of files (benchmarks; made on the GPU).
    pub synthetic: Option<[usize; 4]>,
    pub scan_shape: Option<[usize; 2]>,
    pub dataset: Option<String>,
    #[serde(default = "one")]
    pub bin: usize,
    #[serde(default)]
    pub mask_bad_pixels: bool,
    /// Keep only scan rows r0..r1 and columns c0..c1 (`[r0, r1, c0, c1]`, half-open).
    #[serde(default)]
    pub crop: Option<[usize; 4]>,
    /// How the page reads file ranges: `"workers"` (the pool's Workers, `FileReaderSync`
    /// each, in parallel; the default where the pool exists) or `"blob"` (`Blob.arrayBuffer`
    /// calls in flight together in the viewer's Worker).
    #[serde(default)]
    pub reads: Option<String>,
    /// How the leaves of chunk B-trees are read: `"spans"` (the default: the GPU upload reads
    /// each batch of leaves as the file span that holds them and their chunks, no small
    /// reads where a file was written chunk by chunk; the batches whose chunks lie elsewhere
    /// are read alone), `"reads"` (the upload reads every batch of leaves alone, a few
    /// ahead of the chunks they list) or `"open"` (the open reads them, before any chunk).
    /// Of the three, spans loaded the 5.6 GB file on the H200 fastest (decision 0014).
    #[serde(default)]
    pub leaves: Option<String>,
    /// Bytes of GPU memory the acquisition may take: the engine takes the fastest exact plan
    /// at native sampling within them (resident, streaming, or the CPU reference) and the
    /// profile says which (`--memory-budget`). Absent: the whole acquisition is made
    /// resident, as the adapter allows.
    #[serde(default)]
    pub memory_budget: Option<u64>,
    /// The memory plan the user picked (`"resident"`, `"compressed"`, `"streaming"` or
    /// `"cpu"`, `--memory-plan`): taken if it fits, refused by name if not. Absent: the
    /// fastest exact plan that fits.
    #[serde(default)]
    pub memory_plan: Option<PlanKind>,
    /// A prepared file opens with the detector bin and bad-pixel masking it was saved with,
    /// in place of `bin` and `maskBadPixels` (the page asks so when it opens one alone).
    #[serde(default)]
    pub saved_settings: bool,
}

/// How an open's chunk B-tree leaves are read ([`OpenRequest::leaves`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafReads {
    Open,
    Reads,
    Spans,
}

impl OpenRequest {
    pub fn leaf_reads(&self) -> Result<LeafReads> {
        match self.leaves.as_deref() {
            None | Some("spans") => Ok(LeafReads::Spans),
            Some("reads") => Ok(LeafReads::Reads),
            Some("open") => Ok(LeafReads::Open),
            Some(other) => Err(Error::param(format!(
                "open option leaves: '{other}' is not \"reads\", \"spans\" or \"open\""
            ))),
        }
    }
}

pub(super) fn one() -> usize {
    1
}

#[derive(Clone, Debug, Serialize)]
pub struct Stage {
    /// "of which …" stages are parts of the stage before them (not added to the total).
    pub name: String,
    pub ms: f64,
}

/// Make `acq` resident, reporting progress as the load's upload stage and adding the
/// upload's time and its parts to `stages`. The leaves of a deferred chunk index come from
/// `feed` while the upload reads the chunks before them; the index is complete afterwards.
/// `before_upload` runs once the plan is made, before anything is allocated for it.
/// Returns the resident and the plan it follows.
pub(super) async fn upload_profiled(
    engine: &Engine,
    acq: &mut Acquisition,
    feed: Option<IndexFeed>,
    corr: Correction,
    progress: &mut dyn FnMut(&str, u64, u64),
    stages: &mut Vec<Stage>,
    before_upload: &mut dyn FnMut(),
) -> Result<(Resident, ResidentPlan)> {
    let t = now_ms();
    let mut report = |f: usize, n: usize| progress("read, decode, upload", f as u64, n as u64);
    let limits = engine.adapter.limits;
    let mut plan = crate::gpu::plan_of(acq, corr.bin, limits)?;
    before_upload();
    let fed = match feed {
        Some(feed) => {
            let fed = engine
                .upload_fed(acq, &feed, corr, plan.clone(), &mut report)
                .await?;
            acq.finish_index(feed).await?;
            if fed.is_none() {
                // Not as planned (a chunk the GPU decoder skips): the whole index, a new plan.
                plan = crate::gpu::plan_of(acq, corr.bin, limits)?;
            }
            fed
        }
        None => None,
    };
    let res = match fed {
        Some(res) => res,
        None => {
            engine
                .upload_plan(acq, corr, plan.clone(), &mut report)
                .await?
        }
    };
    push_upload_stages(stages, "read + decode + upload", t, &res);
    Ok((res, plan))
}

/// The stage `name`, begun at `t`, and the upload steps of `res` as its parts.
fn push_upload_stages(stages: &mut Vec<Stage>, name: &str, t: f64, res: &Resident) {
    stages.push(Stage {
        name: name.into(),
        ms: now_ms() - t,
    });
    stages.extend(res.upload_times.0.iter().map(|&(name, ms)| Stage {
        name: format!("of which {name}"),
        ms,
    }));
}

impl Session {
    /// Open `acq`, make it resident (integer data) and derive the cached quantities.
    /// `progress(stage, done, total)` is called as loading advances.
    pub async fn open(
        engine: &Engine,
        acq: Acquisition,
        req: &OpenRequest,
        opened_ms: f64,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Session> {
        Self::open_replacing(engine, acq, req, opened_ms, progress, &mut || {}).await
    }

    /// [`Session::open`] in place of another session: `release_previous` runs once `acq` is
    /// checked against `req` (crop, bin, the GPU plan) and before its upload allocates, so
    /// an open refused before that leaves the previous session as it was (the page keeps
    /// showing it), and the upload can reuse the buffers the previous one releases.
    pub async fn open_replacing(
        engine: &Engine,
        acq: Acquisition,
        req: &OpenRequest,
        opened_ms: f64,
        progress: &mut dyn FnMut(&str, u64, u64),
        release_previous: &mut dyn FnMut(),
    ) -> Result<Session> {
        let reused0 = engine.reused_resident_buffers();
        engine.reset_memory_peak();
        // A prepared file reopened with the settings it was saved with.
        let saved;
        let req = match (req.saved_settings, acq.saved_session()) {
            (true, Some(s)) => {
                saved = OpenRequest {
                    bin: s.bin,
                    mask_bad_pixels: s.mask_bad_pixels,
                    ..req.clone()
                };
                &saved
            }
            _ => req,
        };
        let mut acq = match req.crop {
            Some([r0, r1, c0, c1]) => acq.crop_scan(crate::contract::Region { r0, r1, c0, c1 })?,
            None => acq,
        };
        let mut stages = vec![Stage {
            name: "index".into(),
            ms: opened_ms,
        }];
        let correction = Correction {
            mask_bad_pixels: req.mask_bad_pixels,
            bin: req.bin,
        };
        correction.validate(acq.shape)?;
        let float = acq.dtype == Dtype::F32;
        let spans = req.leaf_reads()? == LeafReads::Spans;
        let mut feed = acq.index_pending().then(|| {
            if spans {
                IndexFeed::with_spans(&acq, crate::upload::plan::DECODE_WINDOW)
            } else {
                IndexFeed::new(&acq)
            }
        });
        let plans =
            crate::gpu::memory_plans(&acq, correction, engine.adapter.limits, req.memory_budget);
        let mut memory_plan = match req.memory_budget {
            None => plans
                .first()
                .filter(|p| p.kind == PlanKind::Resident)
                .cloned()
                .unwrap_or_else(|| crate::upload::memory::choose(&plans, req.bin)),
            Some(_) => crate::upload::memory::choose(&plans, req.bin),
        };
        if let Some(kind) = req.memory_plan {
            memory_plan = crate::upload::memory::pick(&plans, kind, req.bin)
                .map_err(|why| Error::param(format!("{}: {why}", acq.primary)))?;
        }
        let resident_plan = memory_plan.kind == PlanKind::Resident;
        let gpu_decoded = crate::upload::gpu_decode::supported(&acq, correction);
        // Blocks read a deferred index as they go, as the resident upload does (decision
        // 0047): one block (the whole scan) always; several in the file spans of their
        // chunks, where the leaves are many enough for that to be faster than reading
        // them first ([`super::deferred_leaves::FED_LEAVES_PER_BLOCK`]).
        let leaves = acq.pending_leaves();
        let fed = |plan: &MemoryPlan| gpu_decoded && blocks_read_leaves(plan, leaves, spans);
        let read_as_uploaded = (gpu_decoded && resident_plan) || fed(&memory_plan);
        if !read_as_uploaded {
            read_leaves(&mut acq, &mut feed, &mut stages).await?;
        }
        let shape = acq.shape.binned(req.bin);
        let [rows, cols] = shape.scan;
        let mut warnings = Vec::new();
        if engine.adapter.software {
            warnings.push(format!(
                "{} is a software adapter: results are correct, timings are not representative",
                engine.adapter.name
            ));
        }
        let mut float_resident = None;
        let (resident, plan) = if memory_plan.kind == PlanKind::Compressed {
            release_previous();
            let t = now_ms();
            // A prepared payload kept packed (no blocks of rows to build) is only read,
            // checked and copied (decision 0055).
            let (step, stage) = match memory_plan.rows_per_block {
                None => ("read, check, copy", "read + check + copy (kept packed)"),
                Some(_) => ("read, decode, compress", "read + decode + compress"),
            };
            let mut report = |f: usize, n: usize| progress(step, f as u64, n as u64);
            let choice = crate::planned::PlanChoice {
                budget: req.memory_budget,
                plan: req.memory_plan,
            };
            let built = compressed_or_next(
                engine,
                (&acq, feed.as_ref()),
                correction,
                (&mut memory_plan, &plans),
                choice,
                &mut report,
                &mut warnings,
            )
            .await?;
            match (&built, feed.take()) {
                // Every leaf was read by the build.
                (Some(_), Some(done)) => acq.finish_index(done).await?,
                // Streamed instead: the pass takes the feed on where it can.
                (None, rest) => {
                    feed = rest;
                    if !fed(&memory_plan) {
                        read_leaves(&mut acq, &mut feed, &mut stages).await?;
                    }
                }
                (Some(_), None) => {}
            }
            if let Some(res) = &built {
                push_upload_stages(&mut stages, stage, t, res);
            }
            let plan = built.as_ref().map(|r| r.plan.clone());
            (built, plan)
        } else if !resident_plan {
            // Streaming or the CPU reference: nothing stays on the GPU between products.
            release_previous();
            (None, None)
        } else {
            let uploaded = upload_profiled(
                engine,
                &mut acq,
                feed.take(),
                correction,
                progress,
                &mut stages,
                release_previous,
            )
            .await;
            match uploaded {
                Err(Error::GpuOutOfMemory(why))
                    if req.memory_budget.is_none() && !acq.index_pending() =>
                {
                    // The GPU's free memory is not known (WebGPU does not say) but was less
                    // than the resident's peak: stream within half its payload, or leave
                    // the work to the CPU reference, and say so (decision 0023).
                    let budget = memory_plan.payload_bytes / 2;
                    let limits = engine.adapter.limits;
                    let retry = crate::gpu::memory_plans(&acq, correction, limits, Some(budget));
                    memory_plan = crate::upload::memory::choose(&retry, req.bin);
                    let mut report =
                        |f: usize, n: usize| progress("read, decode, compress", f as u64, n as u64);
                    let built = match memory_plan.kind {
                        PlanKind::Compressed => {
                            let choice = crate::planned::PlanChoice {
                                budget: Some(budget),
                                plan: None,
                            };
                            compressed_or_next(
                                engine,
                                (&acq, None),
                                correction,
                                (&mut memory_plan, &retry),
                                choice,
                                &mut report,
                                &mut warnings,
                            )
                            .await?
                        }
                        _ => None,
                    };
                    warnings.push(format!(
                        "the whole acquisition did not fit the GPU ({why}); computed {} within {budget} bytes instead: choose a GPU memory budget to change it",
                        match memory_plan.kind {
                            PlanKind::Compressed => "from a compressed resident",
                            PlanKind::Streaming => "streamed from the files",
                            _ => "on the CPU reference",
                        }
                    ));
                    let plan = built.as_ref().map(|r| r.plan.clone());
                    (built, plan)
                }
                uploaded => {
                    let (res, plan) = uploaded?;
                    if float {
                        warnings.push(
                            "float32 acquisition: exact sums on the GPU, each image read back for its one rounding"
                                .into(),
                        );
                        float_resident = Some(res);
                        (None, Some(plan))
                    } else {
                        (Some(res), Some(plan))
                    }
                }
            }
        };
        let info = serde_json::to_value(Info::of(&acq, false))
            .map_err(|e| Error::Gpu(format!("info does not serialise: {e}")))?;
        let t = now_ms();
        let mut session = Session {
            info,
            profile: Profile {
                stages: Vec::new(),
                total_ms: 0.0,
                files: acq
                    .files
                    .files()
                    .iter()
                    .map(|f| f.name().to_string())
                    .collect(),
                shape: acq.shape.as_array(),
                dtype: acq.dtype.name(),
                compressed_bytes: acq.stored_bytes(),
                logical_bytes: acq.logical_bytes(),
                bin: req.bin,
                mask_bad_pixels: req.mask_bad_pixels,
                scan_crop: acq
                    .crop
                    .map(|c| [c.region.r0, c.region.r1, c.region.c0, c.region.c1]),
                resident_payload_bytes: plan.as_ref().map(|p| p.payload_bytes),
                resident_peak_bytes: plan.as_ref().map(|p| p.peak_bytes),
                measured_peak_bytes: None,
                resident_buffers: plan.as_ref().map(|p| p.segments.len()),
                products_on: match memory_plan.kind {
                    PlanKind::Compressed if resident.is_some() => "gpu, compressed",
                    _ if resident.is_some() || float_resident.is_some() => "gpu",
                    PlanKind::Streaming => "gpu, streamed",
                    _ => "cpu",
                },
                memory_budget: req.memory_budget,
                memory_plan: memory_plan.clone(),
                memory_plans: plans,
                compressed: resident.as_ref().and_then(CompressedReport::of),
                worker_decoded_chunks: resident
                    .iter()
                    .chain(&float_resident)
                    .map(|r| r.offloaded_chunks)
                    .sum(),
                decode_workers: engine.chunk_decode_workers(),
                gpu_inflated_in_place_blocks: resident
                    .iter()
                    .map(|r| r.gpu_inflated_in_place)
                    .sum(),
                file_buffer_windows: resident.iter().map(|r| r.file_buffer_windows).sum(),
                staging_buffers_made: resident.iter().map(|r| r.staging_buffers_made).sum(),
                leaf_span_windows: resident.iter().map(|r| r.leaf_span_windows).sum(),
                worker_walked_windows: resident.iter().map(|r| r.worker_walked_windows).sum(),
                index_read_rounds: 0,
                reads_taken_in_flight: 0,
                reused_resident_buffers: engine.reused_resident_buffers() - reused0,
                adapter: engine.summary(),
                warnings,
                bad_pixels: None,
                streamed_ring_sums: None,
                streamed_passes: Default::default(),
            },
            bf_fit: [0.0; 3],
            bf_fit_warning: None,
            fit_bin: req.bin,
            correction,
            image_sums: engine.storage("image sums", rows as u64 * cols as u64 * 8),
            pattern_sums: engine.storage("pattern sums", shape.det_len() as u64 * 16),
            dpc_pairs: engine.storage("dpc pairs", rows as u64 * cols as u64 * 8),
            image: Plane::with_angle(engine, cols as u32, rows as u32),
            pattern: Plane::new(engine, shape.det[1] as u32, shape.det[0] as u32),
            acq,
            resident,
            derived: None,
            float_resident,
            state: None,
            image_key: String::new(),
            pattern_key: String::new(),
            plane_gen: [0; 2],
            idpc: None,
            prepared: false,
            stream: (memory_plan.kind == PlanKind::Streaming).then(|| Stream {
                blocks: crate::products::stream::Blocks::of(&memory_plan),
                correction,
                zeroed: None,
                rings: None,
                moments: None,
            }),
        };
        progress("finding the BF disk", 0, 0);
        session.settle_and_fit(engine, feed).await?;
        stages.push(Stage {
            name: "BF disk fit".into(),
            ms: now_ms() - t,
        });
        // A streamed session's passes, parts of it.
        stages.append(&mut session.profile.stages);
        session.profile.stages = stages;
        session.profile.measured_peak_bytes = engine.memory_peak();
        session.profile.sum_stages();
        Ok(session)
    }

    /// Find the hot and dead pixels of the mean pattern (zeroed where bad-pixel masking is on;
    /// on the GPU copy when there is one, else the CPU reference finds and zeroes them in
    /// every product) and fit the BF disk, leaving out every pixel products leave out. The
    /// profile says what was found and whether the fit is plausible. A streamed session's
    /// deferred B-tree leaves come from `feed` in its first pass, which completes the index.
    pub(super) async fn settle_and_fit(
        &mut self,
        engine: &Engine,
        feed: Option<IndexFeed>,
    ) -> Result<()> {
        let corr = self.correction;
        let det = self.det();
        if let Some(stream) = &self.stream {
            let blocks = stream.blocks;
            let fed = (&self.acq, feed.as_ref());
            let t = now_ms();
            let (mean, found, zeroed) =
                crate::products::stream::settle(engine, fed, corr, blocks, &mut |_, _| {}).await?;
            if let Some(feed) = feed {
                self.acq.finish_index(feed).await?;
            }
            self.profile.stages.push(Stage {
                name: "of which the mean pattern (one pass over the files)".into(),
                ms: now_ms() - t,
            });
            if let Some(stream) = &mut self.stream {
                stream.zeroed = zeroed.clone();
            }
            self.fit(mean, found, zeroed)?;
            return self.make_first_look(engine).await;
        }
        let on_gpu = match self.resident.as_mut().or(self.float_resident.as_mut()) {
            // A float32 span the GPU cannot sum exactly is left to the CPU reference.
            Some(res) => match gp::settle_bad_pixels(engine, &self.acq, res).await {
                Ok((mean, found)) => Some((mean, found, res.found_bad.clone())),
                Err(e) if e.is_gpu_unsupported() => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let (mean, found, zeroed) = match on_gpu {
            Some(settled) => settled,
            None => {
                let found = crate::cpu::find_bad_pixels(&self.acq, corr)?;
                let p = ProductParams::new(ProductKind::MeanDp);
                let mean = crate::cpu::compute(&self.acq, &p, corr)?.data.to_f64();
                let zeroed = (corr.mask_bad_pixels && !found.is_empty()).then(|| found.mask(det));
                (mean, found, zeroed)
            }
        };
        self.fit(mean, found, zeroed)
    }

    /// Fit the BF disk to `mean`, leaving out the file's bad pixels and `zeroed`, and say in
    /// the profile what was `found`.
    fn fit(
        &mut self,
        mean: Vec<f64>,
        found: crate::pattern::BadPixels,
        zeroed: Option<Vec<bool>>,
    ) -> Result<()> {
        let corr = self.correction;
        let det = self.det();
        let known =
            crate::pattern::file_known(self.acq.pixel_mask.as_deref(), self.acq.shape.det, corr);
        let known = crate::pattern::union(known, zeroed.as_deref());
        let fit = crate::pattern::fit(&mean, det, &known);
        self.bf_fit = fit.product();
        self.bf_fit_warning = fit.warning.clone();
        self.profile.warnings.extend(fit.warning);
        if !corr.mask_bad_pixels && !found.is_empty() {
            self.profile.warnings.push(format!(
                "{} hot and {} dead pixels found in the mean pattern are not masked (bad-pixel masking is off); the BF fit leaves them out",
                found.hot.len(),
                found.dead.len()
            ));
        }
        self.profile.bad_pixels = Some(BadPixelReport::new(&self.acq, corr, found));
        Ok(())
    }
}

/// Build the compressed resident `plan` says within `choice` (`planned::build_compressed`).
/// Where it passes the budget and the plan was the engine's choice, `plan` becomes the next
/// plan that fits, a warning says why, and nothing is returned.
async fn compressed_or_next(
    engine: &Engine,
    (acq, feed): (&Acquisition, Option<&IndexFeed>),
    corr: Correction,
    (plan, plans): (&mut MemoryPlan, &[MemoryPlan]),
    choice: crate::planned::PlanChoice,
    progress: &mut dyn FnMut(usize, usize),
    warnings: &mut Vec<String>,
) -> Result<Option<Resident>> {
    use crate::planned::{build_compressed, Compressed};
    match build_compressed(engine, (acq, feed), corr, plan, plans, choice, progress).await? {
        Compressed::Built(res) => Ok(Some(*res)),
        Compressed::Next(next, why) => {
            *plan = next;
            warnings.push(format!(
                "the compressed resident did not fit ({why}): {} instead",
                match plan.kind {
                    PlanKind::Streaming => "streamed from the files",
                    _ => "computed on the CPU reference",
                }
            ));
            Ok(None)
        }
    }
}
