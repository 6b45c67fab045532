//! A compare grid: other acquisitions shown beside the one the page views, with its detector,
//! its display mapping and its cursor, all brought up to date in one submission. Each keeps
//! its own resident (or streamed files), so its images are its own exact products.

use super::*;

impl ViewState {
    /// The view another acquisition of a compare grid takes from this one: the same image
    /// (product, detector, DPC turn, scale, limits rule and colour map), fitted to its
    /// canvas, with the cursor at the same scan position clamped to its scan `scan`. It
    /// shows no pattern, so the scan ROI (the pattern's) is left out.
    pub fn for_compare(&self, scan: [usize; 2]) -> ViewState {
        let mut st = self.clone();
        let im = &mut st.image;
        im.cursor = [
            im.cursor[0].min(scan[0].saturating_sub(1)),
            im.cursor[1].min(scan[1].saturating_sub(1)),
        ];
        (im.roi, im.roi_circle) = (None, None);
        (im.display.zoom, im.display.pan) = (1.0, None);
        st
    }
}

/// A detector shared by acquisitions needs one detector shape: refuse `other` (named
/// `other_name`) beside `viewed` (`viewed_name`) when their detectors, binned `bin`, differ.
pub fn check_shared_detector(
    viewed_name: &str,
    viewed: &Acquisition,
    other_name: &str,
    other: &Acquisition,
    bin: usize,
) -> Result<()> {
    let (a, b) = (viewed.shape.binned(bin).det, other.shape.binned(bin).det);
    if a == b {
        return Ok(());
    }
    let binned = if bin > 1 {
        format!(" (bin {bin})")
    } else {
        String::new()
    };
    Err(Error::format(
        other_name,
        format!(
            "its detector is {}×{} pixels{binned} and that of {viewed_name} is {}×{}: one detector \
             cannot be shared between them. Compare acquisitions of one detector shape, or open \
             this one on its own",
            b[0], b[1], a[0], a[1]
        ),
    ))
}

/// Bring the viewed session and every other of a compare grid up to `st`, recorded into
/// `enc`: a detector drag then updates every panel in the one submission of `enc`.
pub async fn encode_compare(
    engine: &Engine,
    enc: &mut wgpu::CommandEncoder,
    viewed: &mut Session,
    others: &mut [&mut Session],
    st: &ViewState,
) -> Result<()> {
    viewed.encode_update(engine, enc, st, Planes::Both).await?;
    for other in others.iter_mut() {
        let theirs = st.for_compare(other.acq.shape.scan);
        other
            .encode_update(engine, enc, &theirs, Planes::Image)
            .await?;
    }
    Ok(())
}
