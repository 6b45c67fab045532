//! A viewing session: one acquisition resident on the GPU, the cached per-position totals
//! and CoM moments, and two display planes (virtual image, diffraction pattern) that follow
//! the user's view state. Platform-neutral: the browser glue (`web`) and the native tests
//! drive the same code; only canvases and file handles differ.

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::contract::{DetectorMask, Dtype, Region, ScanRoi, SparseMask};
use crate::display::gpu::{Plane, PlaneSource};
use crate::display::{self, Limits, Scale, ShownRange, Stats};
use crate::error::{Error, Result};
use crate::formats::info::Info;
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::Correction;
use crate::gpu::{Engine, EngineSummary, Resident};
use crate::kernels::View;
use crate::products::gpu as gp;
use crate::products::radial::RadialCache;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};
use crate::upload::plan::ResidentPlan;

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
    /// Of the three, spans loaded the 5.6 GB file on the H200 fastest (BENCHMARKS, session 15).
    #[serde(default)]
    pub leaves: Option<String>,
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

fn one() -> usize {
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
async fn upload_profiled(
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
    stages.push(Stage {
        name: "read + decode + upload".into(),
        ms: now_ms() - t,
    });
    stages.extend(res.upload_times.0.iter().map(|&(name, ms)| Stage {
        name: format!("of which {name}"),
        ms,
    }));
    Ok((res, plan))
}

/// The load profile and provenance shown after loading (`stem4d.profile()`).
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub stages: Vec<Stage>,
    pub total_ms: f64,
    pub files: Vec<String>,
    pub shape: [usize; 4],
    pub dtype: &'static str,
    pub compressed_bytes: u64,
    pub logical_bytes: u64,
    pub bin: usize,
    pub mask_bad_pixels: bool,
    /// The scan crop `[r0, r1, c0, c1]` of the scan as stored, if any.
    pub scan_crop: Option<[usize; 4]>,
    /// Resident payload and predicted peak, bytes; absent when products run on the CPU.
    pub resident_payload_bytes: Option<u64>,
    pub resident_peak_bytes: Option<u64>,
    pub resident_buffers: Option<usize>,
    pub products_on: &'static str,
    /// Chunks the WGSL decoder does not take (deflate, shuffle), decoded in parallel by the
    /// engine's chunk decoder (the page's decode Workers), and how many of those run.
    pub worker_decoded_chunks: usize,
    pub decode_workers: usize,
    /// LZ4 blocks the GPU decoder inflated one invocation each (over 8 KiB, or more
    /// sequences than its table held) instead of a workgroup each: its slow path, which
    /// Dectris's 8 KiB blocks do not take.
    pub gpu_inflated_in_place_blocks: u32,
    /// Decode windows uploaded from the File API's own buffers, never copied into wasm
    /// memory (the browser with its pool of Workers; 0 elsewhere).
    pub file_buffer_windows: u32,
    /// Staging buffers those uploads had to make: none where the page made its staging ring
    /// while idle, or kept it from the load before (the browser; 0 elsewhere).
    pub staging_buffers_made: u32,
    /// Decode windows read as the file span of their chunks' B-tree leaves, the leaves
    /// parsed out of it (a deferred index; the pool's Workers walk these windows' chunk
    /// headers once the leaves are parsed, where each chunk lies in one of their pieces).
    pub leaf_span_windows: u32,
    /// Of the File API windows, windows whose chunk headers the pool's Workers walked as
    /// they read them (or, for leaf spans, once their leaves were parsed).
    pub worker_walked_windows: u32,
    /// Resident buffers reused from the acquisition this one replaced ([`Engine::set_aside`]).
    pub reused_resident_buffers: usize,
    /// Rounds of gathered metadata reads the page's open took (each fetches what the last
    /// attempt missed, all at once); 0 where files are read as they are parsed.
    pub index_read_rounds: usize,
    pub adapter: EngineSummary,
    pub warnings: Vec<String>,
    /// What bad-pixel masking zeroes, or would: the file's mask, saturated values and the
    /// hot and dead pixels found in the mean pattern.
    pub bad_pixels: Option<BadPixelReport>,
}

/// Bad pixels as provenance states them (lists of pixels capped at [`BadPixelReport::LISTED`]).
#[derive(Clone, Debug, Serialize)]
pub struct BadPixelReport {
    /// Whether they are zeroed before every product.
    pub masked: bool,
    /// Pixels the file's pixel mask flags.
    pub file_mask: usize,
    /// Integer data: samples of this value (saturated) are zeroed.
    pub saturated_value: Option<u32>,
    pub rule: &'static str,
    pub hot_count: usize,
    pub dead_count: usize,
    /// `[row, col]` on the detector products see (binned when binned).
    pub hot: Vec<[usize; 2]>,
    pub dead: Vec<[usize; 2]>,
    /// The scales the rule used: the mean pattern's robust noise and its BF contrast.
    pub noise: f64,
    pub contrast: f64,
}

impl BadPixelReport {
    const LISTED: usize = 64;

    fn new(acq: &Acquisition, corr: Correction, found: crate::pattern::BadPixels) -> Self {
        let capped = |v: &[[usize; 2]]| v.iter().take(Self::LISTED).copied().collect();
        BadPixelReport {
            masked: corr.mask_bad_pixels,
            file_mask: acq
                .pixel_mask
                .as_ref()
                .map_or(0, |m| m.iter().filter(|&&b| b).count()),
            saturated_value: acq.dtype.sentinel(),
            rule: crate::pattern::RULE,
            hot_count: found.hot.len(),
            dead_count: found.dead.len(),
            hot: capped(&found.hot),
            dead: capped(&found.dead),
            noise: found.noise,
            contrast: found.contrast,
        }
    }
}

impl Profile {
    /// `total_ms` as the sum of the top-level stages (those not "of which" another).
    fn sum_stages(&mut self) {
        self.total_ms = self
            .stages
            .iter()
            .filter(|s| !s.name.starts_with("of which"))
            .map(|s| s.ms)
            .sum();
    }
}

/// Display settings of one panel.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "PanelDisplayFields")]
pub struct PanelDisplay {
    pub cmap: String,
    /// `"linear"`, `"log"` or `"sqrt"`; absolute limits are data units on each.
    pub scale: Scale,
    pub limits: Limits,
    pub zoom: f32,
    /// View centre in source pixels (row, column); `None` centres the plane.
    pub pan: Option<[f32; 2]>,
}

/// [`PanelDisplay`] as the page and saved view files write it: the scale as `scale`, or as
/// the older `log: true/false` (true is the log scale); both may be given where they agree.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PanelDisplayFields {
    #[serde(default = "default_cmap")]
    cmap: String,
    #[serde(default)]
    log: Option<bool>,
    #[serde(default)]
    scale: Option<Scale>,
    #[serde(default = "default_limits")]
    limits: Limits,
    #[serde(default = "one_f32")]
    zoom: f32,
    #[serde(default)]
    pan: Option<[f32; 2]>,
}

impl TryFrom<PanelDisplayFields> for PanelDisplay {
    type Error = String;

    fn try_from(f: PanelDisplayFields) -> std::result::Result<Self, String> {
        let scale = match (f.scale, f.log) {
            (Some(s), Some(log)) if log != (s == Scale::Log) => {
                return Err(format!(
                    "display: \"log\": {log} and \"scale\": \"{}\" disagree; give \"scale\" \
                     alone (\"linear\", \"log\" or \"sqrt\")",
                    s.name()
                ))
            }
            (Some(s), _) => s,
            (None, Some(true)) => Scale::Log,
            (None, _) => Scale::Linear,
        };
        Ok(PanelDisplay {
            cmap: f.cmap,
            scale,
            limits: f.limits,
            zoom: f.zoom,
            pan: f.pan,
        })
    }
}

fn default_cmap() -> String {
    "inferno".into()
}
fn default_limits() -> Limits {
    Limits::Percentile { lo: 0.5, hi: 99.5 }
}
fn one_f32() -> f32 {
    1.0
}
fn yes() -> bool {
    true
}

impl Default for PanelDisplay {
    fn default() -> Self {
        PanelDisplay {
            cmap: default_cmap(),
            scale: Scale::Linear,
            limits: default_limits(),
            zoom: 1.0,
            pan: None,
        }
    }
}

/// What the virtual-image panel shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    Bf,
    Adf,
    Rect,
    Point,
    Df,
    Total,
    Com,
    Dpc,
    Idpc,
    /// DPC magnitude `|g|` (detector px; the same whatever the rotation and flip).
    Commag,
    /// DPC direction `atan2(g_c, g_r)` drawn with the colour wheel (hue = direction,
    /// brightness = magnitude within the panel's limits, which are the magnitude's).
    Comdir,
}

impl ImageKind {
    /// Whether its image on the GPU needs the totals or the CoM moments
    /// ([`Session::prepare`]).
    fn uses_derived(self) -> bool {
        matches!(
            self,
            ImageKind::Df
                | ImageKind::Total
                | ImageKind::Com
                | ImageKind::Dpc
                | ImageKind::Idpc
                | ImageKind::Commag
                | ImageKind::Comdir
        )
    }

    /// Whether its plane depends on the DPC rotation and flip (the magnitude does not).
    fn turns(self) -> bool {
        matches!(self, ImageKind::Dpc | ImageKind::Idpc | ImageKind::Comdir)
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageView {
    pub kind: ImageKind,
    /// Component of CoM/DPC: 0 = row, 1 = column.
    #[serde(default)]
    pub axis: u32,
    pub center: Option<[f64; 2]>,
    pub radius: Option<f64>,
    pub inner: Option<f64>,
    pub outer: Option<f64>,
    pub rect: Option<[usize; 4]>,
    pub point: Option<[usize; 2]>,
    #[serde(default)]
    pub rotation: f64,
    #[serde(default)]
    pub flip: bool,
    #[serde(default)]
    pub display: PanelDisplay,
    #[serde(default)]
    pub cursor: [usize; 2],
    /// Draw the cursor into the image (default). The page draws it on its overlay instead,
    /// so that moving the cursor redraws the pattern canvas alone.
    #[serde(default = "yes")]
    pub cursor_marker: bool,
    /// Draw the detector's outline into the pattern (default). The page draws it on the
    /// pattern's overlay instead, so that dragging a detector redraws the image canvas alone.
    #[serde(default = "yes")]
    pub detector_marker: bool,
    pub roi: Option<[usize; 4]>,
    /// A disk-shaped scan ROI `[centre_row, centre_col, radius]` (instead of `roi`).
    pub roi_circle: Option<[f64; 3]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternSource {
    Cursor,
    Mean,
    Sum,
    Max,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatternView {
    pub source: PatternSource,
    #[serde(default)]
    pub display: PanelDisplay,
}

/// The whole view, as the page sends it on every interaction.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewState {
    pub image: ImageView,
    pub pattern: PatternView,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    Image,
    Pattern,
}

impl Panel {
    pub fn parse(s: &str) -> Result<Panel> {
        match s {
            "image" => Ok(Panel::Image),
            "pattern" => Ok(Panel::Pattern),
            _ => Err(Error::param(format!(
                "unknown panel '{s}' (image or pattern)"
            ))),
        }
    }
}

fn region(a: [usize; 4]) -> Region {
    Region {
        r0: a[0],
        r1: a[1],
        c0: a[2],
        c1: a[3],
    }
}

impl ImageView {
    /// The product this panel shows, as `stem4d product` parameters (export, CPU path).
    pub fn params(&self, corr: Correction) -> ProductParams {
        let kind = match self.kind {
            ImageKind::Bf => ProductKind::Bf,
            ImageKind::Adf => ProductKind::Adf,
            ImageKind::Rect => ProductKind::Rect,
            ImageKind::Point => ProductKind::Mask,
            ImageKind::Df => ProductKind::Df,
            ImageKind::Total => ProductKind::Total,
            ImageKind::Com => ProductKind::Com,
            // Magnitude and direction are made from the DPC product.
            ImageKind::Dpc | ImageKind::Commag | ImageKind::Comdir => ProductKind::Dpc,
            ImageKind::Idpc => ProductKind::Idpc,
        };
        let mut p = ProductParams::new(kind);
        p.center = self.center;
        p.radius = self.radius;
        p.inner = self.inner;
        p.outer = self.outer;
        p.rect = self.rect.map(region);
        p.rotation = self.rotation;
        p.flip = self.flip;
        p.bin = corr.bin;
        p.mask_bad_pixels = corr.mask_bad_pixels;
        if let (ImageKind::Point, Some([r, c])) = (self.kind, self.point) {
            p.mask = Some(DetectorMask::Point { r, c });
        }
        p
    }

    fn detector(&self, det: [usize; 2]) -> Result<Option<DetectorMask>> {
        let p = self.params(Correction::default());
        Ok(match self.kind {
            ImageKind::Point => {
                let [r, c] = self
                    .point
                    .ok_or_else(|| Error::param("a point detector needs 'point': [r, c]"))?;
                let m = DetectorMask::Point { r, c };
                m.validate(det)?;
                Some(m)
            }
            ImageKind::Bf | ImageKind::Adf | ImageKind::Rect | ImageKind::Df => {
                Some(p.detector_mask(det)?)
            }
            _ => None,
        })
    }

    /// The scan ROI of the reduced patterns, if any.
    pub fn scan_roi(&self) -> Result<Option<ScanRoi>> {
        match (self.roi, self.roi_circle) {
            (Some(_), Some(_)) => Err(Error::param(
                "give either a rectangular scan ROI ('roi') or a circular one ('roiCircle'), not both",
            )),
            (Some(r), None) => Ok(Some(ScanRoi::Rect(region(r)))),
            (None, Some([r, c, radius])) => Ok(Some(ScanRoi::Circle {
                center: [r, c],
                radius,
            })),
            (None, None) => Ok(None),
        }
    }

    /// The cache key of the image plane's values (display settings excluded): what the
    /// plane depends on, so that a change to anything else leaves it (and its canvas) be.
    fn key(&self) -> String {
        let axis = matches!(self.kind, ImageKind::Com | ImageKind::Dpc).then_some(self.axis);
        let turn = self.kind.turns().then_some((self.rotation, self.flip));
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.kind,
            axis,
            self.center,
            self.radius,
            self.inner,
            self.outer,
            self.rect,
            self.point,
            turn
        )
    }
}

/// Quantities derived once per resident acquisition.
struct Derived {
    totals: wgpu::Buffer,
    moments: Option<wgpu::Buffer>,
    /// Scan mean of the exact CoM (DPC/iDPC subtract it).
    com_mean: [f64; 2],
}

/// Bars of the histogram `stem4d.stats` returns.
pub const STATS_REPORT_BARS: usize = 256;

/// What `stem4d.stats(panel)` returns (JSON). Limits and range are in data units on every
/// scale; `shown` has the same four in shown units (the scale applied), which the histogram
/// (`hist`, [`STATS_REPORT_BARS`] bars from `shown.min` to `shown.max`) and the colour map
/// (`shown.lo` … `shown.hi`) are laid out on. `note` says why the limits are not what was
/// asked for (`display::Stats::note`), else null. `cmap`: the colour map's name, or
/// `"wheel"` for a DPC direction image (whose limits, range and histogram are the
/// magnitude's).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatsReport {
    pub lo: f32,
    pub hi: f32,
    pub min: f32,
    pub max: f32,
    pub shown: ShownRange,
    pub scale: Scale,
    pub finite: u32,
    pub hist: Vec<u32>,
    pub note: Option<String>,
    pub cmap: String,
}

/// A panel's plane generation and view uniform: what its canvas shows.
pub type DrawKey = (u64, View);

/// Generations of [`Session::plane_gen`], unique across sessions.
fn next_plane_gen() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

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
        let mut probe = ProductParams::new(ProductKind::Total);
        probe.bin = req.bin;
        probe.validate(acq.shape)?;
        let float = acq.dtype == Dtype::F32;
        let spans = req.leaf_reads()? == LeafReads::Spans;
        let mut feed = acq.index_pending().then(|| {
            if spans {
                IndexFeed::with_spans(&acq, crate::upload::plan::DECODE_WINDOW)
            } else {
                IndexFeed::new(&acq)
            }
        });
        if !crate::upload::gpu_decode::supported(&acq, correction) || (float && req.bin > 1) {
            // Only the GPU decoder reads a deferred index as it goes.
            if let Some(feed) = feed.take() {
                let t = now_ms();
                acq.finish_index(feed).await?;
                stages.push(Stage {
                    name: "chunk index leaves".into(),
                    ms: now_ms() - t,
                });
            }
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
        let (resident, plan) = if float && req.bin > 1 {
            release_previous();
            warnings.push(
                "binned float32 acquisition: products are computed on the CPU reference".into(),
            );
            (None, None)
        } else {
            let (res, plan) = upload_profiled(
                engine,
                &mut acq,
                feed,
                correction,
                progress,
                &mut stages,
                release_previous,
            )
            .await?;
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
                resident_buffers: plan.as_ref().map(|p| p.segments.len()),
                products_on: if resident.is_some() || float_resident.is_some() {
                    "gpu"
                } else {
                    "cpu"
                },
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
                reused_resident_buffers: engine.reused_resident_buffers() - reused0,
                adapter: engine.summary(),
                warnings,
                bad_pixels: None,
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
        };
        progress("finding the BF disk", 0, 0);
        session.settle_and_fit(engine).await?;
        stages.push(Stage {
            name: "BF disk fit".into(),
            ms: now_ms() - t,
        });
        session.profile.stages = stages;
        session.profile.sum_stages();
        Ok(session)
    }

    /// Find the hot and dead pixels of the mean pattern (zeroed where bad-pixel masking is on;
    /// on the GPU copy when there is one, else the CPU reference finds and zeroes them in
    /// every product) and fit the BF disk, leaving out every pixel products leave out. The
    /// profile says what was found and whether the fit is plausible.
    async fn settle_and_fit(&mut self, engine: &Engine) -> Result<()> {
        let corr = self.correction;
        let det = self.det();
        let on_gpu = match self.resident.as_mut().or(self.float_resident.as_mut()) {
            // A float32 span the GPU cannot sum exactly is left to the CPU reference.
            Some(res) => match gp::settle_bad_pixels(engine, &self.acq, res).await {
                Ok((mean, found)) => Some((mean, found, res.found_bad.clone())),
                Err(_) => None,
            },
            None => None,
        };
        let (mean, found, zeroed) = match on_gpu {
            Some(settled) => settled,
            None => {
                let found = crate::cpu::find_bad_pixels(&self.acq, corr)?;
                let mut p = ProductParams::new(ProductKind::MeanDp);
                (p.bin, p.mask_bad_pixels) = (corr.bin, corr.mask_bad_pixels);
                let mean = crate::cpu::compute(&self.acq, &p)?.data.to_f64();
                let zeroed = (corr.mask_bad_pixels && !found.is_empty()).then(|| found.mask(det));
                (mean, found, zeroed)
            }
        };
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

    /// Compute one product exactly (as `stem4d product`), re-uploading when the requested
    /// bin or bad-pixel policy differs from the resident one.
    pub async fn product(&mut self, engine: &Engine, p: &ProductParams) -> Result<ProductArray> {
        p.validate(self.acq.shape)?;
        if self.resident.is_none() {
            return self.exact_product(engine, p).await;
        }
        let want = Correction {
            mask_bad_pixels: p.mask_bad_pixels,
            bin: p.bin,
        };
        if want != self.correction {
            self.reload(engine, want).await?;
        }
        let res = self
            .resident
            .as_ref()
            .ok_or_else(|| Error::Gpu("no resident acquisition".into()))?;
        let moments = matches!(
            p.kind,
            ProductKind::Com | ProductKind::Dpc | ProductKind::Idpc
        );
        let many_weights = p.mask.as_ref().is_some_and(|m| {
            let sparse = m.sparse(self.det());
            sparse.weights.is_some_and(|w| {
                gp::weight_groups(&sparse.indices, &w).len() > gp::MAX_WEIGHT_GROUPS
            })
        });
        if (moments && gp::moments_fit_64(res).is_err()) || many_weights {
            // Beyond what the GPU path does exactly (moments past 2^64, masks with very many
            // distinct weights): the exact CPU reference instead.
            return crate::cpu::compute(&self.acq, p);
        }
        gp::compute_resident(engine, &self.acq, res, p).await
    }

    /// A product without an integer resident: exact float32 sums on the GPU when the float
    /// resident has this correction and can sum it exactly, else the CPU reference.
    async fn exact_product(&self, engine: &Engine, p: &ProductParams) -> Result<ProductArray> {
        if let Some(res) = &self.float_resident {
            let same =
                p.bin == res.correction.bin && p.mask_bad_pixels == res.correction.mask_bad_pixels;
            if same {
                // A span too wide for 128-bit sums (or NaN) is refused there: the CPU
                // reference computes it instead, exactly.
                if let Ok(a) = gp::compute_resident(engine, &self.acq, res, p).await {
                    return Ok(a);
                }
            }
        }
        crate::cpu::compute(&self.acq, p)
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
        let mut enc = engine.device.create_command_encoder(&Default::default());
        let old = self.state.clone();
        let ikey = st.image.key();
        if ikey != self.image_key {
            self.encode_image(engine, &mut enc, st, detector.as_ref())
                .await?;
        }
        let pkey = format!(
            "{:?}|{:?}|{:?}",
            st.pattern.source,
            (st.pattern.source == PatternSource::Cursor).then_some(st.image.cursor),
            (st.pattern.source != PatternSource::Cursor)
                .then_some((st.image.roi, st.image.roi_circle))
        );
        if pkey != self.pattern_key {
            self.encode_pattern(engine, &mut enc, st).await?;
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
                &mut enc,
                st.image.display.limits,
                st.image.display.scale,
            )?;
        }
        if pkey != self.pattern_key
            || display_changed(
                &st.pattern.display,
                old.as_ref().map(|o| &o.pattern.display),
            )
        {
            self.plane_gen[1] = next_plane_gen();
            self.pattern.encode_stats(
                engine,
                &mut enc,
                st.pattern.display.limits,
                st.pattern.display.scale,
            )?;
        }
        engine.queue.submit([enc.finish()]);
        self.image_key = ikey;
        self.pattern_key = pkey;
        self.state = Some(st.clone());
        Ok(())
    }

    async fn encode_image(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        st: &ViewState,
        detector: Option<&DetectorMask>,
    ) -> Result<()> {
        if st.image.kind.uses_derived() {
            self.ensure_derived(engine).await?;
        }
        let Some(res) = &self.resident else {
            let p = st.image.params(self.correction);
            let product = self.exact_product(engine, &p).await?;
            if matches!(st.image.kind, ImageKind::Commag | ImageKind::Comdir) {
                let [magnitude, angle] = polar_planes(&product);
                let f32s = |v: &[f32]| engine.input(bytemuck::cast_slice(v));
                let (magnitude, angle) = (f32s(&magnitude), f32s(&angle));
                let plain = |buf| PlaneSource::F32 { buf, stride: 1 };
                self.image.encode_prep(engine, enc, plain(&magnitude))?;
                if st.image.kind == ImageKind::Comdir {
                    self.image.encode_angle(engine, enc, plain(&angle))?;
                }
                return Ok(());
            }
            let plane = plane_of(&product, p.kind, st.image.axis);
            let buf = engine.input(bytemuck::cast_slice(&plane));
            return self.image.encode_prep(
                engine,
                enc,
                PlaneSource::F32 {
                    buf: &buf,
                    stride: 1,
                },
            );
        };
        let derived = || {
            self.derived
                .as_ref()
                .ok_or_else(|| Error::Gpu("the totals and CoM moments are missing".into()))
        };
        let need_moments = || {
            derived()?.moments.as_ref().ok_or_else(|| {
                Error::Gpu(
                    "centre-of-mass moments of this u32 detector could exceed 64 bits on the GPU"
                        .into(),
                )
            })
        };
        let axis = st.image.axis.min(1);
        match st.image.kind {
            ImageKind::Total => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::U64 {
                    buf: &derived()?.totals,
                    stride: 2,
                    offset: 0,
                    scale: 1.0,
                },
            ),
            ImageKind::Com => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::Com {
                    moments: need_moments()?,
                    axis,
                },
            ),
            ImageKind::Dpc => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::Dpc {
                    moments: need_moments()?,
                    axis,
                    mean: derived()?.com_mean,
                    rotation: st.image.rotation,
                    flip: st.image.flip,
                },
            ),
            ImageKind::Commag | ImageKind::Comdir => {
                let direction = st.image.kind == ImageKind::Comdir;
                // The magnitude is made unturned: one plane, bit for bit, whatever the
                // rotation and flip (which do not change it).
                let dpc = crate::kernels::fft::DpcSettings {
                    mean: derived()?.com_mean,
                    rotation: if direction { st.image.rotation } else { 0.0 },
                    flip: direction && st.image.flip,
                };
                let centre = crate::kernels::fft::CentreSource::Moments {
                    buf: need_moments()?,
                    bound: gp::moment_bound(res),
                };
                let pairs = &self.dpc_pairs;
                crate::kernels::fft::encode_dpc_pairs(
                    engine,
                    enc,
                    res.plan.shape.scan,
                    centre,
                    dpc,
                    pairs,
                )?;
                self.image
                    .encode_prep(engine, enc, PlaneSource::DpcMagnitude { pairs })?;
                if direction {
                    self.image
                        .encode_angle(engine, enc, PlaneSource::DpcAngle { pairs })?;
                }
                Ok(())
            }
            ImageKind::Idpc => {
                let moments = need_moments()?;
                let scan = res.plan.shape.scan;
                if self.idpc.as_ref().is_none_or(|(s, _)| *s != scan) {
                    self.idpc = Some((scan, crate::kernels::fft::Idpc::new(engine, scan)));
                }
                let (_, idpc) = self
                    .idpc
                    .as_ref()
                    .ok_or_else(|| Error::Gpu("iDPC plan missing".into()))?;
                let dpc = crate::kernels::fft::DpcSettings {
                    mean: derived()?.com_mean,
                    rotation: st.image.rotation,
                    flip: st.image.flip,
                };
                idpc.encode(
                    engine,
                    enc,
                    crate::kernels::fft::CentreSource::Moments {
                        buf: moments,
                        bound: gp::moment_bound(res),
                    },
                    dpc,
                )?;
                self.image.encode_prep(
                    engine,
                    enc,
                    PlaneSource::F32 {
                        buf: &idpc.phase,
                        stride: 2,
                    },
                )
            }
            _ => {
                let mask = detector.ok_or_else(|| Error::param("this image needs a detector"))?;
                let SparseMask { indices, .. } = mask.sparse(self.det());
                let list = gp::DetectorList::new(engine, &indices)?;
                gp::encode_masked_sums(engine, enc, res, &list, &self.image_sums)?;
                let src = if st.image.kind == ImageKind::Df {
                    PlaneSource::U64Diff {
                        total: &derived()?.totals,
                        part: &self.image_sums,
                    }
                } else {
                    PlaneSource::U64 {
                        buf: &self.image_sums,
                        stride: 2,
                        offset: 0,
                        scale: 1.0,
                    }
                };
                self.image.encode_prep(engine, enc, src)
            }
        }
    }

    async fn encode_pattern(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        st: &ViewState,
    ) -> Result<()> {
        let scan = self.acq.shape.scan;
        let roi = st
            .image
            .scan_roi()?
            .unwrap_or(ScanRoi::Rect(Region::full(scan)));
        let Some(res) = &self.resident else {
            let mut p = ProductParams::new(match st.pattern.source {
                PatternSource::Cursor => ProductKind::Pattern,
                PatternSource::Mean => ProductKind::MeanDp,
                PatternSource::Sum => ProductKind::SumDp,
                PatternSource::Max => ProductKind::MaxDp,
            });
            p.at = Some(st.image.cursor);
            p.scan_roi = match roi {
                ScanRoi::Rect(r) => Some(r),
                ScanRoi::Circle { .. } if st.pattern.source != PatternSource::Cursor => {
                    return Err(Error::param(
                        "circular scan ROIs need the acquisition on the GPU (integer data); use a rectangle",
                    ))
                }
                ScanRoi::Circle { .. } => None,
            };
            p.bin = self.correction.bin;
            p.mask_bad_pixels = self.correction.mask_bad_pixels;
            let plane = plane_of(&self.exact_product(engine, &p).await?, p.kind, 0);
            let buf = engine.input(bytemuck::cast_slice(&plane));
            return self.pattern.encode_prep(
                engine,
                enc,
                PlaneSource::F32 {
                    buf: &buf,
                    stride: 1,
                },
            );
        };
        match st.pattern.source {
            PatternSource::Cursor => {
                let frame = st.image.cursor[0] * scan[1] + st.image.cursor[1];
                self.pattern
                    .encode_prep(engine, enc, PlaneSource::Frame { res, frame })
            }
            source => {
                gp::encode_pattern_reduce(engine, enc, res, &roi, &self.pattern_sums)?;
                let src = match source {
                    PatternSource::Max => PlaneSource::U32 {
                        buf: &self.pattern_sums,
                        stride: 4,
                        offset: 2,
                    },
                    _ => PlaneSource::U64 {
                        buf: &self.pattern_sums,
                        stride: 4,
                        offset: 0,
                        scale: if source == PatternSource::Mean {
                            1.0 / roi.count(scan) as f32
                        } else {
                            1.0
                        },
                    },
                };
                self.pattern.encode_prep(engine, enc, src)
            }
        }
    }

    fn plane(&self, panel: Panel) -> &Plane {
        match panel {
            Panel::Image => &self.image,
            Panel::Pattern => &self.pattern,
        }
    }

    /// What a canvas of `panel` shows after [`Session::encode_draw`]: equal keys, equal pixels.
    pub fn draw_key(&self, panel: Panel, canvas: [u32; 2]) -> Result<DrawKey> {
        let g = self.plane_gen[(panel == Panel::Pattern) as usize];
        Ok((g, self.view_uniform(panel, canvas)?))
    }

    /// The render uniform of `panel` on a `canvas` of (width, height) device pixels.
    pub fn view_uniform(&self, panel: Panel, canvas: [u32; 2]) -> Result<View> {
        let st = self
            .state
            .as_ref()
            .ok_or_else(|| Error::param("no view yet: call update first"))?;
        let plane = self.plane(panel);
        let d = match panel {
            Panel::Image => &st.image.display,
            Panel::Pattern => &st.pattern.display,
        };
        let [pan_r, pan_c] = d
            .pan
            .unwrap_or([plane.height as f32 / 2.0, plane.width as f32 / 2.0]);
        let mut v = View {
            canvas_w: canvas[0].max(1),
            canvas_h: canvas[1].max(1),
            cmap: display::colormap_index(&d.cmap)?,
            scale: d.scale.code(),
            wheel: (panel == Panel::Image && st.image.kind == ImageKind::Comdir) as u32,
            zoom: d.zoom,
            pan_r,
            pan_c,
            line_px: 1.0,
            ..Default::default()
        };
        let f = |x: Option<f64>| x.unwrap_or(0.0) as f32;
        let rect = |v: &mut View, a: [usize; 4]| {
            v.overlay = 3;
            (v.rect_r0, v.rect_r1, v.rect_c0, v.rect_c1) =
                (a[0] as f32, a[1] as f32, a[2] as f32, a[3] as f32);
        };
        match panel {
            Panel::Image => {
                if st.image.cursor_marker {
                    v.cursor_on = 1;
                    v.cursor_r = st.image.cursor[0] as f32;
                    v.cursor_c = st.image.cursor[1] as f32;
                }
                if let Some(roi) = st.image.roi {
                    rect(&mut v, roi);
                }
                if let Some([r, c, radius]) = st.image.roi_circle {
                    v.overlay = 1;
                    (v.o_r, v.o_c, v.o_outer) = (r as f32, c as f32, radius as f32);
                }
            }
            Panel::Pattern if st.image.detector_marker => {
                let i = &st.image;
                let [cr, cc] = i.center.unwrap_or([0.0, 0.0]);
                (v.o_r, v.o_c) = (cr as f32, cc as f32);
                match i.kind {
                    ImageKind::Bf | ImageKind::Df => {
                        v.overlay = 1;
                        v.o_outer = f(i.radius);
                    }
                    ImageKind::Adf => {
                        v.overlay = 2;
                        (v.o_inner, v.o_outer) = (f(i.inner), f(i.outer));
                    }
                    ImageKind::Rect => {
                        if let Some(a) = i.rect {
                            rect(&mut v, a);
                        }
                    }
                    ImageKind::Point => {
                        if let Some([r, c]) = i.point {
                            v.overlay = 4;
                            (v.o_r, v.o_c) = (r as f32, c as f32);
                        }
                    }
                    _ => {}
                }
            }
            // Drawn on the page's overlay: nothing of the detector in the uniform, so that
            // the pattern's draw key stays put while it is dragged.
            Panel::Pattern => {}
        }
        Ok(v)
    }

    /// Record drawing `panel` into `target` (a canvas texture of `canvas` pixels).
    pub fn encode_draw(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        panel: Panel,
        target: &wgpu::TextureView,
        format: wgpu::TextureFormat,
        canvas: [u32; 2],
    ) -> Result<()> {
        let view = self.view_uniform(panel, canvas)?;
        engine
            .renderer(format)
            .encode_draw(engine, enc, target, self.plane(panel), &view);
        Ok(())
    }

    pub async fn stats(&self, engine: &Engine, panel: Panel) -> Result<Stats> {
        self.plane(panel).read_stats(engine).await
    }

    /// What `stem4d.stats(panel)` returns: the limits and range in data units and in shown
    /// units, the scale, a 256-bar histogram, the note, and the colour map shown.
    pub async fn stats_report(&self, engine: &Engine, panel: Panel) -> Result<StatsReport> {
        let st = self
            .state
            .as_ref()
            .ok_or_else(|| Error::param("no view yet"))?;
        let stats = self.stats(engine, panel).await?;
        let cmap = match panel {
            Panel::Image if st.image.kind == ImageKind::Comdir => "wheel".to_string(),
            Panel::Image => st.image.display.cmap.clone(),
            Panel::Pattern => st.pattern.display.cmap.clone(),
        };
        Ok(StatsReport {
            lo: stats.lo,
            hi: stats.hi,
            min: stats.min,
            max: stats.max,
            shown: stats.shown,
            scale: stats.scale,
            finite: stats.finite,
            hist: stats.coarse(STATS_REPORT_BARS),
            note: stats.note(),
            cmap,
        })
    }

    /// The value under the pointer: exact for integer sums, else the plane's value; the
    /// direction in degrees on a DPC direction image.
    pub async fn value_at(&self, engine: &Engine, panel: Panel, r: usize, c: usize) -> Result<f64> {
        let plane = self.plane(panel);
        if r >= plane.height as usize || c >= plane.width as usize {
            return Err(Error::param(format!(
                "({r}, {c}) is outside the {panel:?} panel"
            )));
        }
        let st = self.state.as_ref();
        if panel == Panel::Image && st.is_some_and(|st| st.image.kind == ImageKind::Comdir) {
            let radians = plane.read_angle(engine, r as u32, c as u32).await?;
            return Ok((radians as f64).to_degrees());
        }
        let k = (r * plane.width as usize + c) as u64;
        // An image of totals or DF on the GPU was drawn with the totals derived.
        let totals = self.derived.as_ref().map(|d| &d.totals);
        if let (Panel::Image, Some(st), Some(_)) = (panel, st, &self.resident) {
            match (st.image.kind, totals) {
                (ImageKind::Total, Some(totals)) => {
                    return Ok(exact_u64(engine, totals, k * 8).await? as f64)
                }
                (ImageKind::Bf | ImageKind::Adf | ImageKind::Rect | ImageKind::Point, _) => {
                    return Ok(exact_u64(engine, &self.image_sums, k * 8).await? as f64)
                }
                (ImageKind::Df, Some(totals)) => {
                    let t = exact_u64(engine, totals, k * 8).await?;
                    let s = exact_u64(engine, &self.image_sums, k * 8).await?;
                    return Ok(t.wrapping_sub(s) as f64);
                }
                _ => {}
            }
        }
        if let (Panel::Pattern, Some(st), Some(_)) = (panel, st, &self.resident) {
            if st.pattern.source == PatternSource::Sum {
                return Ok(exact_u64(engine, &self.pattern_sums, k * 16).await? as f64);
            }
        }
        Ok(plane.read_value(engine, r as u32, c as u32).await? as f64)
    }

    /// PNG of a panel's plane at one pixel per source pixel, coloured as on screen.
    pub async fn png(&self, engine: &Engine, panel: Panel) -> Result<Vec<u8>> {
        let st = self
            .state
            .as_ref()
            .ok_or_else(|| Error::param("no view yet"))?;
        let d = match panel {
            Panel::Image => &st.image.display,
            Panel::Pattern => &st.pattern.display,
        };
        let plane = self.plane(panel);
        let values = plane.read_values(engine).await?;
        let stats = plane.read_stats(engine).await?;
        let rgba = if panel == Panel::Image && st.image.kind == ImageKind::Comdir {
            let angles = plane.read_angles(engine).await?;
            display::colorize_wheel(&values, &angles, &stats)
        } else {
            display::colorize(&values, &stats, display::colormap_index(&d.cmap)?)
        };
        Ok(display::png::encode_rgba(plane.width, plane.height, &rgba))
    }

    /// The exact product the image panel shows, as `.npy` bytes. The DPC magnitude and
    /// direction are float32 planes (px; radians in (−π, π]) made in float64 from the DPC
    /// product's components (`contract::dpc_polar`).
    pub async fn image_npy(&mut self, engine: &Engine) -> Result<Vec<u8>> {
        let st = self
            .state
            .clone()
            .ok_or_else(|| Error::param("no view yet"))?;
        let p = st.image.params(self.correction);
        let product = self.product(engine, &p).await?;
        let product = match st.image.kind {
            ImageKind::Commag | ImageKind::Comdir => {
                let [magnitude, angle] = polar_planes(&product);
                let plane = if st.image.kind == ImageKind::Commag {
                    magnitude
                } else {
                    angle
                };
                ProductArray {
                    shape: self.acq.shape.scan.to_vec(),
                    data: ArrayData::F32(plane),
                }
            }
            _ => product,
        };
        Ok(crate::products::npy::to_bytes(&product))
    }
}

async fn exact_u64(engine: &Engine, buf: &wgpu::Buffer, offset: u64) -> Result<u64> {
    let b = engine.read_back_range(buf, offset, 8).await?;
    Ok(u64::from_le_bytes([
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
    ]))
}

/// Totals and CoM moments of a resident acquisition, computed once; the exact CoM comes
/// back once so DPC means and iDPC use exact values.
async fn derive(engine: &Engine, res: &Resident) -> Result<Derived> {
    let shape = res.plan.shape;
    let n = shape.frames() as u64;
    let totals = engine.storage("totals", n * 8);
    let all = SparseMask::all(shape.det).indices;
    let list = gp::DetectorList::new(engine, &all)?;
    let mut enc = engine.device.create_command_encoder(&Default::default());
    gp::encode_masked_sums(engine, &mut enc, res, &list, &totals)?;
    engine.queue.submit([enc.finish()]);
    let (moments, com) = match gp::moments_fit_64(res) {
        Ok(()) => {
            let buf = engine.storage("com moments", n * 24);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            gp::encode_com_moments(engine, &mut enc, res, &buf)?;
            engine.queue.submit([enc.finish()]);
            let m = gp::parse_moments(&engine.read_back(&buf, n * 24).await?);
            (Some(buf), Some(gp::com_from_moments(&m)))
        }
        // u32 detectors whose moments could overflow: CoM/DPC/iDPC are refused, not wrong.
        Err(_) => (None, None),
    };
    let com_mean = com.as_deref().map_or([0.0; 2], crate::cpu::scan_means);
    Ok(Derived {
        totals,
        moments,
        com_mean,
    })
}

/// Magnitude and direction planes (float32, from float64) of a DPC product
/// `[g_r plane, g_c plane]` (`contract::dpc_polar`).
fn polar_planes(dpc: &ProductArray) -> [Vec<f32>; 2] {
    let g = dpc.data.to_f64();
    let n = g.len() / 2;
    let (mut magnitude, mut angle) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for k in 0..n {
        let [m, a] = crate::contract::dpc_polar([g[k], g[n + k]]);
        magnitude.push(m as f32);
        angle.push(a as f32);
    }
    [magnitude, angle]
}

/// One plane of a product read back to the host (float32 acquisitions), for display.
fn plane_of(a: &ProductArray, kind: ProductKind, axis: u32) -> Vec<f32> {
    let a = a.data.to_f64();
    let two = matches!(kind, ProductKind::Com | ProductKind::Dpc);
    let n = if two { a.len() / 2 } else { a.len() };
    let start = if two { axis.min(1) as usize * n } else { 0 };
    a[start..start + n].iter().map(|&v| v as f32).collect()
}
