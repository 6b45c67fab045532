//! TIFF of a product image, as ImageJ/Fiji, tifffile and napari open it with its pixel size
//! (issue #33, decision 0034). One page per plane: a scan or detector image is one page, the
//! row and column planes of CoM and DPC are two. Vectors (`fit-bf`, `dpc-rotation`) and the
//! 4-D `binned` product are not images and are refused; `.npy` holds every product.
//!
//! Sample types keep the values: uint8, uint16 and uint32 as they are; uint64 sums as
//! uint32 where every value fits (ImageJ opens no 64-bit integers), else as uint64; float32
//! as it is. Float64 products are written as the float32 rounding of each value (the TIFF
//! readers people use open no float64); their exact values are the `.npy` export's.
//!
//! The pixel size goes where ImageJ reads it: XResolution = YResolution = pixels per unit
//! (ResolutionUnit none) and `unit=` in an ImageJ ImageDescription, which every TIFF reader
//! keeps as text.

use std::io::Cursor;

use tiff::encoder::{colortype, Rational, TiffEncoder, TiffKindStandard};
use tiff::tags::{ResolutionUnit, Tag};

use crate::error::{Error, Result};
use crate::products::{ArrayData, ProductArray};

/// The size of one pixel: `step` in `units` (`nm`, `mrad`, …).
#[derive(Clone, Debug, PartialEq)]
pub struct PixelSize {
    pub step: f64,
    pub units: String,
}

impl PixelSize {
    /// The pixel size in a unit TIFF text can carry (7-bit ASCII) and ImageJ knows:
    /// µm as `micron`, Å as tenths of `nm`.
    fn for_imagej(&self) -> PixelSize {
        match self.units.as_str() {
            "µm" | "μm" | "um" => PixelSize {
                step: self.step,
                units: "micron".into(),
            },
            "Å" | "A" | "angstrom" => PixelSize {
                step: self.step / 10.0,
                units: "nm".into(),
            },
            u if u.is_ascii() && !u.contains(['\n', '=']) => self.clone(),
            _ => PixelSize {
                step: self.step,
                units: "pixel".into(),
            },
        }
    }
}

/// The pixel size of product `kind`'s image under detector binning `bin`: the scan step for
/// scan images, the detector step (times the bin) for patterns; none where the files give
/// none.
pub fn pixel_of(
    kind: crate::products::ProductKind,
    cal: &crate::formats::Calibration,
    bin: usize,
) -> Option<PixelSize> {
    use crate::products::ProductKind as K;
    let detector = matches!(kind, K::SumDp | K::MeanDp | K::MaxDp | K::Pattern);
    let (step, units) = match detector {
        true => (cal.detector_step? * bin as f64, cal.detector_units.clone()?),
        false => (cal.scan_step?, cal.scan_units.clone()?),
    };
    (step.is_finite() && step > 0.0).then_some(PixelSize { step, units })
}

/// Whether `path` names a TIFF (`.tif` or `.tiff`, any case): what `--out` writes.
pub fn is_tiff_path(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("tif") || e.eq_ignore_ascii_case("tiff"))
}

/// `1/step` as a TIFF rational, good to about 1e-9 relative.
fn per_unit(step: f64) -> Option<Rational> {
    let value = 1.0 / step;
    if !value.is_finite() || value <= 0.0 {
        return None;
    }
    let mut d: u64 = 1 << 31;
    while d > 1 && (value * d as f64).round() > u32::MAX as f64 {
        d /= 2;
    }
    let n = (value * d as f64).round();
    (n >= 1.0 && n <= u32::MAX as f64).then_some(Rational {
        n: n as u32,
        d: d as u32,
    })
}

/// The planes of `array`: (pages, rows, cols), or why it is no image.
fn planes(array: &ProductArray, what: &str) -> Result<(usize, usize, usize)> {
    match array.shape[..] {
        [rows, cols] => Ok((1, rows, cols)),
        [pages @ 1..=4, rows, cols] => Ok((pages, rows, cols)),
        _ => Err(Error::param(format!(
            "{what} has shape {:?}: a TIFF holds images (rows x cols, or a few planes of them); write .npy",
            array.shape
        ))),
    }
    .and_then(|(pages, rows, cols)| {
        if rows == 0 || cols == 0 || rows > u32::MAX as usize || cols > u32::MAX as usize {
            return Err(Error::param(format!(
                "{what}: an image of {rows} x {cols} pixels cannot be a TIFF"
            )));
        }
        Ok((pages, rows, cols))
    })
}

/// The TIFF bytes of `array` (the product `what`, named in errors), with `pixel` as its
/// pixel size when the acquisition gives one.
pub fn to_bytes(array: &ProductArray, pixel: Option<&PixelSize>, what: &str) -> Result<Vec<u8>> {
    let (pages, rows, cols) = planes(array, what)?;
    let plane = rows * cols;
    let fail = |e: tiff::TiffError| Error::param(format!("{what}: cannot write the TIFF: {e}"));
    let pixel = pixel.map(PixelSize::for_imagej);
    let mut description = format!("ImageJ=1.11a\nimages={pages}\n");
    if pages > 1 {
        description.push_str(&format!("slices={pages}\n"));
    }
    if let Some(p) = &pixel {
        description.push_str(&format!("unit={}\n", p.units));
    }
    let resolution = pixel.as_ref().and_then(|p| per_unit(p.step));
    let mut out = Cursor::new(Vec::new());
    let mut tiff = TiffEncoder::new(&mut out).map_err(fail)?;
    for page in 0..pages {
        let range = page * plane..(page + 1) * plane;
        let (w, h) = (cols as u32, rows as u32);
        let tags = |enc: &mut tiff::encoder::DirectoryEncoder<'_, _, TiffKindStandard>| {
            enc.write_tag(Tag::ImageDescription, description.as_str())?;
            enc.write_tag(Tag::Software, concat!("stem4d ", env!("CARGO_PKG_VERSION")))?;
            if let Some(r) = &resolution {
                enc.write_tag(Tag::ResolutionUnit, ResolutionUnit::None.to_u16())?;
                enc.write_tag(Tag::XResolution, r.clone())?;
                enc.write_tag(Tag::YResolution, r.clone())?;
            }
            Ok::<_, tiff::TiffError>(())
        };
        macro_rules! page {
            ($color:ty, $values:expr) => {{
                let mut image = tiff.new_image::<$color>(w, h).map_err(fail)?;
                tags(image.encoder()).map_err(fail)?;
                image.write_data($values).map_err(fail)?;
            }};
        }
        match &array.data {
            ArrayData::U8(v) => page!(colortype::Gray8, &v[range]),
            ArrayData::U16(v) => page!(colortype::Gray16, &v[range]),
            ArrayData::U32(v) => page!(colortype::Gray32, &v[range]),
            ArrayData::U64(v) if v.iter().all(|&x| x <= u32::MAX as u64) => {
                let narrow: Vec<u32> = v[range].iter().map(|&x| x as u32).collect();
                page!(colortype::Gray32, &narrow)
            }
            ArrayData::U64(v) => page!(colortype::Gray64, &v[range]),
            ArrayData::F32(v) => page!(colortype::Gray32Float, &v[range]),
            ArrayData::F64(v) => {
                let rounded: Vec<f32> = v[range].iter().map(|&x| x as f32).collect();
                page!(colortype::Gray32Float, &rounded)
            }
        }
    }
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiff::decoder::{Decoder, DecodingResult};

    /// A page read back: its values, (width, height), description and pixels per unit.
    type Page = (DecodingResult, (u32, u32), String, Option<f64>);

    fn read_pages(bytes: &[u8]) -> Vec<Page> {
        let mut d = Decoder::new(Cursor::new(bytes)).unwrap();
        let mut pages = Vec::new();
        loop {
            let dims = d.dimensions().unwrap();
            let text = d.get_tag_ascii_string(Tag::ImageDescription).unwrap();
            let res = d
                .get_tag(Tag::XResolution)
                .ok()
                .and_then(|v| v.into_u64_vec().ok())
                .map(|v| v[0] as f64 / v[1] as f64);
            pages.push((d.read_image().unwrap(), dims, text, res));
            if !d.more_images() {
                return pages;
            }
            d.next_image().unwrap();
        }
    }

    #[test]
    fn an_odd_rectangular_image_keeps_its_values_and_pixel_size() {
        let (rows, cols) = (5usize, 7usize);
        let v: Vec<u64> = (0..35).map(|k| k * 97 + 3).collect();
        let a = ProductArray {
            shape: vec![rows, cols],
            data: ArrayData::U64(v.clone()),
        };
        let px = PixelSize {
            step: 0.125,
            units: "nm".into(),
        };
        let pages = read_pages(&to_bytes(&a, Some(&px), "bf").unwrap());
        assert_eq!(pages.len(), 1);
        let (data, dims, text, res) = &pages[0];
        assert_eq!(*dims, (cols as u32, rows as u32));
        let DecodingResult::U32(got) = data else {
            panic!("u64 sums that fit are uint32: {data:?}")
        };
        assert_eq!(got.iter().map(|&x| x as u64).collect::<Vec<_>>(), v);
        assert!(
            text.starts_with("ImageJ=") && text.contains("unit=nm\n"),
            "{text}"
        );
        assert!((res.unwrap() - 8.0).abs() < 1e-9, "{res:?}");
    }

    #[test]
    fn sums_past_32_bits_stay_exact_and_planes_are_pages() {
        let big = ProductArray {
            shape: vec![2, 3],
            data: ArrayData::U64(vec![1 << 40, 0, 5, 6, 7, u64::MAX]),
        };
        let pages = read_pages(&to_bytes(&big, None, "total").unwrap());
        let DecodingResult::U64(got) = &pages[0].0 else {
            panic!("{:?}", pages[0].0)
        };
        assert_eq!(got, &vec![1 << 40, 0, 5, 6, 7, u64::MAX]);
        // Without a calibration: one pixel per pixel, no unit.
        assert_eq!(pages[0].3, Some(1.0));
        assert!(!pages[0].2.contains("unit="), "{}", pages[0].2);

        let com = ProductArray {
            shape: vec![2, 3, 4],
            data: ArrayData::F64((0..24).map(|k| k as f64 / 3.0).collect()),
        };
        let pages = read_pages(&to_bytes(&com, None, "com").unwrap());
        assert_eq!(pages.len(), 2);
        assert!(
            pages[1].2.contains("images=2\nslices=2\n"),
            "{}",
            pages[1].2
        );
        let DecodingResult::F32(second) = &pages[1].0 else {
            panic!("{:?}", pages[1].0)
        };
        let want: Vec<f32> = (12..24).map(|k| (k as f64 / 3.0) as f32).collect();
        assert_eq!(second, &want);
    }

    #[test]
    fn vectors_and_units_tiff_cannot_carry_are_handled() {
        let fit = ProductArray {
            shape: vec![3],
            data: ArrayData::F64(vec![1.0, 2.0, 3.0]),
        };
        let e = to_bytes(&fit, None, "fit-bf").unwrap_err().to_string();
        assert!(e.contains("fit-bf") && e.contains(".npy"), "{e}");
        let a = ProductArray {
            shape: vec![1, 2],
            data: ArrayData::F32(vec![1.0, 2.0]),
        };
        for (units, step, want, res) in [
            ("µm", 0.5, "unit=micron", 2.0),
            ("Å", 2.0, "unit=nm", 5.0),
            ("mrad", 0.25, "unit=mrad", 4.0),
        ] {
            let px = PixelSize {
                step,
                units: units.into(),
            };
            let pages = read_pages(&to_bytes(&a, Some(&px), "adf").unwrap());
            assert!(pages[0].2.contains(want), "{units}: {}", pages[0].2);
            assert!((pages[0].3.unwrap() - res).abs() < 1e-9, "{units}");
        }
    }
}
