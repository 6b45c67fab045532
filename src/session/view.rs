//! The view state the page sends on every interaction: what each panel shows and how.

use super::*;
use crate::products::wire;

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
pub(super) struct PanelDisplayFields {
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

pub(super) fn default_cmap() -> String {
    "inferno".into()
}

pub(super) fn default_limits() -> Limits {
    Limits::Percentile { lo: 0.5, hi: 99.5 }
}

pub(super) fn one_f32() -> f32 {
    1.0
}

pub(super) fn yes() -> bool {
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
    pub(super) fn uses_derived(self) -> bool {
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
    pub(super) fn turns(self) -> bool {
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
    // The detector's geometry and the DPC turn: the product vocabulary's fields, read by its
    // own parsers (`products::ProductParams`), so the view means what `stem4d.product` does.
    #[serde(default, deserialize_with = "wire::finite_pair")]
    pub center: Option<[f64; 2]>,
    #[serde(default, deserialize_with = "wire::finite")]
    pub radius: Option<f64>,
    #[serde(default, deserialize_with = "wire::finite")]
    pub inner: Option<f64>,
    #[serde(default, deserialize_with = "wire::finite")]
    pub outer: Option<f64>,
    #[serde(default, deserialize_with = "wire::region")]
    pub rect: Option<Region>,
    pub point: Option<[usize; 2]>,
    #[serde(default, deserialize_with = "wire::rotation")]
    pub rotation: f64,
    #[serde(default, deserialize_with = "wire::boolean")]
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

impl PatternSource {
    /// The product that gives this pattern.
    pub fn product_kind(self) -> ProductKind {
        match self {
            PatternSource::Cursor => ProductKind::Pattern,
            PatternSource::Mean => ProductKind::MeanDp,
            PatternSource::Sum => ProductKind::SumDp,
            PatternSource::Max => ProductKind::MaxDp,
        }
    }
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

/// The planes an update brings up to date ([`Session::encode_update`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planes {
    /// The image and the pattern: the acquisition the page views.
    Both,
    /// The image alone: another acquisition of a compare grid, which shows no pattern.
    Image,
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

pub(super) fn region(a: [usize; 4]) -> Region {
    Region {
        r0: a[0],
        r1: a[1],
        c0: a[2],
        c1: a[3],
    }
}

impl ImageView {
    /// The product this panel shows, as `stem4d product` parameters (export, CPU path).
    pub fn params(&self) -> ProductParams {
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
        p.rect = self.rect;
        p.rotation = self.rotation;
        p.flip = self.flip;
        if let (ImageKind::Point, Some([r, c])) = (self.kind, self.point) {
            p.mask = Some(DetectorMask::Point { r, c });
        }
        p
    }

    pub(super) fn detector(&self, det: [usize; 2]) -> Result<Option<DetectorMask>> {
        let p = self.params();
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
    pub(super) fn key(&self) -> String {
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
