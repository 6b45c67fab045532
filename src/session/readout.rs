//! Readouts and exports of what a panel shows: statistics and histogram, the exact value
//! under the cursor, PNG and npy. Readouts and `.npy` exports are the exact products, never
//! the display planes (C-DISPLAY).

use super::*;

/// What `stem4d.lineProfile(panel, from, to)` returns (JSON): the samples' distances from
/// the line's start in `units` (the scan step's for the image, the detector step's for the
/// pattern, else `px`) and their values (exact products, bilinear between pixels).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineProfileReport {
    pub distance: Vec<f64>,
    pub values: Vec<f64>,
    pub units: String,
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

impl Session {
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
        let (product, _) = self.image_product(engine).await?;
        Ok(crate::products::npy::to_bytes(&product))
    }

    /// TIFF bytes of the image panel's exact product (float64 rounded to float32), with the
    /// scan step as its pixel size where the files give one (`products::tiff`).
    pub async fn image_tiff(&mut self, engine: &Engine) -> Result<Vec<u8>> {
        let (product, kind) = self.image_product(engine).await?;
        let pixel = self.pixel_of(Panel::Image);
        crate::products::tiff::to_bytes(&product, pixel.as_ref(), kind)
    }

    /// The profile of `panel`'s exact values along the line `from` → `to` (pixel indices,
    /// [row, col]; `display::line_profile`): the image's product (the axis shown of CoM and
    /// DPC), the pattern's product, or the pattern's plane over a circular scan ROI (which
    /// no product takes).
    pub async fn line_profile(
        &mut self,
        engine: &Engine,
        panel: Panel,
        from: [f64; 2],
        to: [f64; 2],
    ) -> Result<LineProfileReport> {
        let st = self
            .state
            .clone()
            .ok_or_else(|| Error::param("no view yet"))?;
        let (values, dims) = match panel {
            Panel::Image => {
                let (product, _) = self.image_product(engine).await?;
                let dims = self.acq.shape.scan;
                let all = product.data.to_f64();
                let plane = dims[0] * dims[1];
                let k = match product.shape.len() {
                    3 => (st.image.axis as usize).min(product.shape[0] - 1),
                    _ => 0,
                };
                (all[k * plane..(k + 1) * plane].to_vec(), dims)
            }
            Panel::Pattern => {
                let det = self.acq.shape.binned(self.correction.bin).det;
                let roi = st.image.scan_roi()?;
                let circle = matches!(roi, Some(ScanRoi::Circle { .. }));
                if circle && st.pattern.source != PatternSource::Cursor {
                    let plane = self.plane(Panel::Pattern).read_values(engine).await?;
                    (plane.into_iter().map(f64::from).collect(), det)
                } else {
                    let mut p = ProductParams::new(st.pattern.source.product_kind());
                    p.at = Some(st.image.cursor);
                    p.scan_roi = match roi {
                        Some(ScanRoi::Rect(r)) => Some(r),
                        _ => None,
                    };
                    let product = self.product(engine, &p, self.correction).await?;
                    (product.data.to_f64(), det)
                }
            }
        };
        let profile = display::line_profile::sample(&values, dims, from, to)?;
        let (scale, units) = self
            .pixel_of(panel)
            .map_or((1.0, "px".into()), |p| (p.step, p.units));
        Ok(LineProfileReport {
            distance: profile.distance_px.iter().map(|d| d * scale).collect(),
            values: profile.values,
            units,
        })
    }

    /// The size of one of `panel`'s pixels, where the files give it: the scan step for the
    /// image, the detector step (times the bin) for the pattern (`products::tiff::pixel_of`).
    fn pixel_of(&self, panel: Panel) -> Option<crate::products::tiff::PixelSize> {
        let kind = match panel {
            Panel::Image => ProductKind::Bf,
            Panel::Pattern => ProductKind::Pattern,
        };
        crate::products::tiff::pixel_of(kind, &self.acq.calibration, self.correction.bin)
    }

    /// The image panel's exact product (CoM magnitude and direction as their plane) and
    /// the name of the product it comes from.
    async fn image_product(&mut self, engine: &Engine) -> Result<(ProductArray, &'static str)> {
        let st = self
            .state
            .clone()
            .ok_or_else(|| Error::param("no view yet"))?;
        let p = st.image.params();
        let product = self.product(engine, &p, self.correction).await?;
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
        Ok((product, p.kind.name()))
    }
}
