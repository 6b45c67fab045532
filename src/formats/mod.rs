//! Acquisition formats: detect what the opened files are and describe them as one logical
//! `I[Rr, Rc, Kr, Kc]` made of frame-ordered parts, with bad-pixel mask, calibration and the
//! provenance of the scan shape. Decoding is the next stage's job ([`crate::frames`]).

mod arina;
#[cfg(not(target_arch = "wasm32"))]
pub mod beside;
mod calibration;
mod empad;
mod empad_xml;
mod generic;
pub mod grouping;
mod index_feed;
pub mod info;
mod mib;
pub mod mib_raw;
pub mod prepared;
pub mod synthetic;

pub use calibration::{Calibration, Field as CalibrationField};
pub use index_feed::IndexFeed;

use std::sync::Arc;

use serde::Serialize;

use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::hdf5_index::{DatasetIndex, H5Set};
use crate::source::{open_gathered, ByteSource, FileSet, Gathering};

/// Largest detector and frame count we accept; beyond these a file is lying or absurd.
pub const MAX_DET_PIXELS: u64 = 1 << 24;
pub const MAX_FRAMES: u64 = 1 << 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Dectris Arina/Eiger master + linked data files.
    Arina,
    /// py4DSTEM EMD 1.0.
    Emd,
    /// A plain HDF5 data set `(N, Kr, Kc)`.
    #[serde(rename = "hdf5-3d")]
    Hdf5Stack3d,
    /// A plain HDF5 data set `(Rr, Rc, Kr, Kc)`.
    #[serde(rename = "hdf5-4d")]
    Hdf5Stack4d,
    /// EMPAD raw frames (130 × 128 float32, last two rows metadata).
    #[serde(rename = "empad")]
    EmpadRaw,
    /// Quantum Detectors Merlin MIB frames (and their `.hdr`).
    #[serde(rename = "mib")]
    Mib,
    /// Generated on the fly for benchmarks ([`synthetic`]).
    Synthetic,
    /// A stem4d prepared acquisition ([`prepared`]).
    Prepared,
}

/// User overrides, as `--scan-shape` and `--dataset` on the CLI.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub scan_shape: Option<[usize; 2]>,
    pub dataset: Option<String>,
}

/// Where a part's frames are stored.
#[derive(Clone, Debug)]
pub enum PartKind {
    /// An HDF5 data set of rank 3 `(n, Kr, Kc)` or rank 4 `(Rr, Rc, Kr, Kc)`.
    Hdf5(DatasetIndex),
    /// Raw frames: `stride` bytes apart from `offset`, each `stored_rows` rows of which the
    /// first `Kr` are data (EMPAD keeps two metadata rows), their samples as `samples` says.
    Raw {
        offset: u64,
        stride: u64,
        stored_rows: usize,
        samples: RawSamples,
    },
    /// Generated samples ([`synthetic::sample`]); nothing is stored.
    Synthetic,
    /// A prepared acquisition's payload: tiles of the resident's layout ([`prepared`]).
    Tiled(Arc<prepared::TiledPayload>),
}

/// How raw frames hold their samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawSamples {
    /// The acquisition's dtype, little-endian (EMPAD).
    Little,
    /// The acquisition's dtype, big-endian (Merlin MIB U08/U16/U32).
    Big,
    /// Merlin's raw readout (R64), decoded frame by frame ([`mib_raw`]).
    MibRaw(mib_raw::MibRaw),
}

#[derive(Clone)]
pub struct Part {
    pub source: Arc<dyn ByteSource>,
    pub first_frame: usize,
    pub frames: usize,
    pub kind: PartKind,
}

#[derive(Clone)]
pub struct Acquisition {
    pub format: Format,
    pub files: FileSet,
    /// The file the user would name (the master for Arina).
    pub primary: String,
    pub dataset_path: String,
    pub shape: Shape4,
    pub dtype: Dtype,
    pub scan_shape_source: String,
    pub parts: Vec<Part>,
    /// Detector pixels flagged bad by the file (Dectris `pixel_mask` non-zero).
    pub pixel_mask: Option<Vec<bool>>,
    pub calibration: Calibration,
    /// A scan crop: `shape` is the cropped one, the parts still hold the stored frames.
    pub crop: Option<ScanCrop>,
    /// Files given with the acquisition that nothing in it reads (no link, companion or
    /// description names them): the CLI refuses them, the page says they were left out.
    pub unused_files: Vec<String>,
}

/// The scan positions kept by a crop, and the scan they were cut from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScanCrop {
    pub region: crate::contract::Region,
    pub stored_scan: [usize; 2],
}

impl Acquisition {
    /// The largest chunk of its HDF5 parts: bytes stored, and bytes decoded (0 and 0 where
    /// no part is chunked). The memory plan counts it (`ResidentPlan::with_largest_chunk`).
    pub fn largest_chunk(&self) -> (u64, u64) {
        let mut out = (0u64, 0u64);
        for part in &self.parts {
            let PartKind::Hdf5(ix) = &part.kind else {
                continue;
            };
            let Some(logical) = ix.chunk_bytes() else {
                continue;
            };
            let stored = ix.chunks.iter().map(|c| c.size).max().unwrap_or(0);
            out = (out.0.max(stored), out.1.max(logical));
        }
        out
    }

    /// Detect the format of `files` and describe the acquisition, reading metadata only.
    pub fn open(files: FileSet, opts: &OpenOptions) -> Result<Acquisition> {
        Acquisition::open_with(files, opts, false)
    }

    /// [`Acquisition::open`], with `defer_leaves` leaving the leaves of chunk B-trees of two
    /// levels or more unread: their chunks come through an [`IndexFeed`] and
    /// [`Acquisition::finish_index`] before anything else reads the acquisition.
    pub fn open_with(
        files: FileSet,
        opts: &OpenOptions,
        defer_leaves: bool,
    ) -> Result<Acquisition> {
        if let Some(src) = files
            .files()
            .iter()
            .find(|f| prepared::is_prepared(f.as_ref()))
        {
            let name = src.name().to_string();
            return match &opts.dataset {
                Some(ds) => Err(Error::format(
                    &name,
                    format!("a prepared acquisition holds no data sets: drop --dataset {ds}"),
                )),
                None => prepared::open(files.clone(), &name, opts),
            };
        }
        let empad_raw = ("an EMPAD raw file", empad::is_raw_name as fn(&str) -> bool);
        if let Some(opened) = open_raw_frames(&files, opts, empad_raw, empad::open) {
            return opened;
        }
        if let Some(e) = empad::description_without_raw(&files) {
            return Err(e);
        }
        let merlin = ("a Merlin MIB file", mib::is_mib_name as fn(&str) -> bool);
        if let Some(opened) = open_raw_frames(&files, opts, merlin, mib::open) {
            return opened;
        }
        if let Some(e) = mib::header_without_frames(&files) {
            return Err(e);
        }
        let h5 = H5Set::with_leaves(files.clone(), defer_leaves);
        let primary = choose_primary(&files)?;
        let file = h5.open(&primary)?;
        let acq = if opts.dataset.is_none() && arina::is_master(&h5, &primary, &file)? {
            arina::open(&h5, &primary, opts)?
        } else {
            generic::open(&h5, &primary, &file, opts)?
        };
        Ok(Acquisition {
            unused_files: unused_files(&files, &h5.opened_names()),
            ..acq
        })
    }

    /// [`Acquisition::open`] for files where every read is a round trip (a browser's): the
    /// metadata reads are gathered, each round fetching together what the last attempt
    /// missed (`source::gather`). The same result as `open_with`, and the rounds it took.
    pub async fn open_gathered(
        files: Vec<Arc<dyn ByteSource>>,
        opts: &OpenOptions,
        defer_leaves: bool,
    ) -> (Result<Acquisition>, usize) {
        let gathering: Vec<Arc<Gathering>> = files.into_iter().map(Gathering::new).collect();
        open_gathered(&gathering, || {
            let files = gathering
                .iter()
                .map(|g| g.clone() as Arc<dyn ByteSource>)
                .collect();
            Acquisition::open_with(FileSet::new(files)?, opts, defer_leaves)
        })
        .await
    }

    /// The settings a session saved with this prepared acquisition, if it is one that has
    /// them.
    pub fn saved_session(&self) -> Option<&prepared::SavedSession> {
        self.parts.iter().find_map(|p| match &p.kind {
            PartKind::Tiled(t) => t.session.as_ref(),
            _ => None,
        })
    }

    /// Whether a part's chunk index still has unread leaves (an open that deferred them).
    pub fn index_pending(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(&p.kind, PartKind::Hdf5(ix) if ix.pending.is_some()))
    }

    /// How many B-tree leaves the open deferred, over every part.
    pub fn pending_leaves(&self) -> usize {
        self.parts
            .iter()
            .filter_map(|p| match &p.kind {
                PartKind::Hdf5(ix) => ix.pending.as_ref().map(|l| l.leaves.len()),
                _ => None,
            })
            .sum()
    }

    /// Complete the parts' chunk indexes with the chunks `feed` read (reading the leaves it
    /// did not), checked as an open that read them checks them: sorted, without repeats,
    /// every chunk of the grid stored (C-INCOMPLETE).
    pub async fn finish_index(&mut self, feed: IndexFeed) -> Result<()> {
        let chunks = feed.into_chunks().await?;
        self.take_chunks(chunks)
    }

    /// [`Acquisition::finish_index`] from a feed still in use (its chunks copied).
    pub async fn complete_index(&mut self, feed: &IndexFeed) -> Result<()> {
        let chunks = feed.chunks().await?;
        self.take_chunks(chunks)
    }

    /// The parts' chunk indexes completed with `chunks` (part, its chunks not yet listed).
    fn take_chunks(
        &mut self,
        chunks: Vec<(usize, Vec<crate::hdf5_index::ChunkRef>)>,
    ) -> Result<()> {
        for (part, chunks) in chunks {
            let Some(Part {
                kind: PartKind::Hdf5(ix),
                ..
            }) = self.parts.get_mut(part)
            else {
                continue;
            };
            ix.chunks.extend(chunks);
            crate::hdf5_index::sort_chunks(&mut ix.chunks);
        }
        for part in &mut self.parts {
            if let PartKind::Hdf5(ix) = &mut part.kind {
                if ix.pending.take().is_some() {
                    check_chunk_coverage(ix)?;
                }
            }
        }
        Ok(())
    }

    /// Keep only the scan positions of `region` (rows r0..r1, cols c0..c1 of the scan as
    /// opened): what fits when the whole acquisition does not. Nothing stored is changed;
    /// frames are read through the crop, renumbered from 0 (C-CROP).
    pub fn crop_scan(mut self, region: crate::contract::Region) -> Result<Acquisition> {
        if self.crop.is_some() {
            return Err(Error::param(format!(
                "{}: the scan is already cropped",
                self.primary
            )));
        }
        let region = region.checked(self.shape.scan, "scan crop")?;
        self.set_crop(ScanCrop {
            region,
            stored_scan: self.shape.scan,
        });
        self.scan_shape_source = format!(
            "{} cropped to rows {}..{}, cols {}..{}",
            self.scan_shape_source, region.r0, region.r1, region.c0, region.c1
        );
        Ok(self)
    }

    /// The crop keeping scan rows `r0..r1` of the scan as it is (within any crop already
    /// made), every column: one block of a streaming pass (`products::stream`), made
    /// with [`Acquisition::set_crop`] on a copy. It composes with a user's crop, so the
    /// block's frames are the same stored frames either way.
    pub fn scan_rows_crop(&self, r0: usize, r1: usize) -> Result<ScanCrop> {
        let [rows, cols] = self.shape.scan;
        if r0 >= r1 || r1 > rows {
            return Err(Error::param(format!(
                "{}: scan rows {r0}..{r1} outside the {rows} rows",
                self.primary
            )));
        }
        Ok(match &self.crop {
            Some(c) => ScanCrop {
                region: crate::contract::Region {
                    r0: c.region.r0 + r0,
                    r1: c.region.r0 + r1,
                    ..c.region
                },
                stored_scan: c.stored_scan,
            },
            None => ScanCrop {
                region: crate::contract::Region {
                    r0,
                    r1,
                    c0: 0,
                    c1: cols,
                },
                stored_scan: self.shape.scan,
            },
        })
    }

    /// Read the frames through `crop` (of the scan as stored): the scan becomes its region.
    pub fn set_crop(&mut self, crop: ScanCrop) {
        let r = crop.region;
        self.shape.scan = [r.r1 - r.r0, r.c1 - r.c0];
        self.crop = Some(crop);
    }

    /// The shape of the frames as stored (before any scan crop).
    pub fn stored_shape(&self) -> Shape4 {
        match &self.crop {
            Some(c) => Shape4 {
                scan: c.stored_scan,
                det: self.shape.det,
            },
            None => self.shape,
        }
    }

    pub fn logical_bytes(&self) -> u64 {
        self.shape.frames() as u64 * self.shape.det_len() as u64 * self.dtype.size() as u64
    }

    pub fn stored_bytes(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| match &p.kind {
                PartKind::Hdf5(ix) => ix.stored_bytes(),
                PartKind::Raw { stride, .. } => stride * p.frames as u64,
                PartKind::Synthetic => 0,
                PartKind::Tiled(t) => t.blocks.iter().map(|b| b.bytes).sum(),
            })
            .sum()
    }
}

/// The acquisition of the first of `files` that a format of raw frames takes (`format`: its
/// words and its test of a file name), opened by `open`; `None` where no file is one. Raw
/// frames hold no data sets: one asked for is an error, never silently ignored.
fn open_raw_frames(
    files: &FileSet,
    opts: &OpenOptions,
    (what, takes): (&str, fn(&str) -> bool),
    open: fn(FileSet, &str, &OpenOptions) -> Result<Acquisition>,
) -> Option<Result<Acquisition>> {
    let name = files
        .files()
        .iter()
        .find(|f| takes(f.name()))?
        .name()
        .to_string();
    Some(match &opts.dataset {
        Some(ds) => Err(Error::format(
            &name,
            format!("{what} holds no data sets: drop --dataset {ds}"),
        )),
        None => open(files.clone(), &name, opts),
    })
}

/// The source `name` of `files` and its length, refused by name when it is empty (`frames`:
/// what it should hold).
pub(super) fn frames_source(
    files: &FileSet,
    name: &str,
    frames: &str,
) -> Result<(Arc<dyn ByteSource>, u64)> {
    let src = files
        .get(name)
        .ok_or_else(|| Error::param(format!("{name} not among the files")))?;
    let len = src.len();
    if len == 0 {
        return Err(Error::format(
            name,
            format!("the file is empty (0 bytes): no {frames}"),
        ));
    }
    Ok((src, len))
}

/// The files among `files` that are not `used`, in the order given.
pub(crate) fn unused_files(files: &FileSet, used: &[String]) -> Vec<String> {
    files
        .files()
        .iter()
        .map(|f| f.name().to_string())
        .filter(|n| !used.contains(n))
        .collect()
}

/// The file to start from: an Arina master if there is one, else the first HDF5 file.
fn choose_primary(files: &FileSet) -> Result<String> {
    let names: Vec<&str> = files.files().iter().map(|f| f.name()).collect();
    if let Some(m) = names.iter().find(|n| n.ends_with("_master.h5")) {
        return Ok(m.to_string());
    }
    Ok(names[0].to_string())
}

/// Check a scan shape against the frame count, or explain how to give one (C-SCAN).
pub(crate) fn resolve_scan_shape(
    file: &str,
    frames: u64,
    explicit: Option<[usize; 2]>,
    from_file: Option<([u64; 2], String)>,
) -> Result<([usize; 2], String)> {
    // Shapes from files are 64-bit whatever the platform: a file name's or a data set's
    // numbers past a 32-bit usize (the browser's) are checked, never dropped or cut.
    let (shape, source) = match (explicit, from_file) {
        (Some(s), _) => (s.map(|d| d as u64), "--scan-shape".to_string()),
        (None, Some((s, src))) => (s, src),
        (None, None) => {
            let root = (frames as f64).sqrt().round() as u64;
            let hint = if root * root == frames {
                format!(" (a square scan would be --scan-shape {root},{root})")
            } else {
                String::new()
            };
            return Err(Error::ScanShape {
                file: file.to_string(),
                message: format!(
                    "the files do not record the scan shape of these {frames} frames: pass --scan-shape ROWS,COLS{hint}"
                ),
            });
        }
    };
    // The product in 128 bits: two 64-bit sides never wrap there, so a shape whose product
    // only matches the frame count modulo 2^64 is refused, and the message shows the true one.
    let positions = shape[0] as u128 * shape[1] as u128;
    if shape[0] == 0 || shape[1] == 0 || positions != frames as u128 {
        return Err(Error::ScanShape {
            file: file.to_string(),
            message: format!(
                "wrong scan shape {}x{} from {source}: {positions} positions but the data hold {frames} frames",
                shape[0], shape[1],
            ),
        });
    }
    // Each side is at most the frame count now, which the engine indexes.
    let side = |d: u64| {
        usize::try_from(d).map_err(|_| Error::ScanShape {
            file: file.to_string(),
            message: format!(
                "scan shape side {d} from {source} is past what this platform indexes"
            ),
        })
    };
    Ok(([side(shape[0])?, side(shape[1])?], source))
}

/// A scan dimension a file records as a number (`value`, read from `what` in `file`): a whole
/// number from 1 to `frames`, or an error that names the file, the field and the value.
pub(crate) fn scan_dimension(file: &str, what: &str, value: f64, frames: u64) -> Result<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= frames as f64 {
        return Ok(value as usize);
    }
    // Very large values in exponent form: 1e300 is not written out in 301 digits.
    let said = if value.abs() >= 1e15 {
        format!("{value:e}")
    } else {
        format!("{value}")
    };
    Err(Error::ScanShape {
        file: file.to_string(),
        message: format!(
            "{what} is {said}, not a scan dimension of these {frames} frames (a whole number from 1 to {frames}); pass --scan-shape ROWS,COLS"
        ),
    })
}

pub(crate) fn check_detector(file: &str, det: [u64; 2]) -> Result<[usize; 2]> {
    if det[0] == 0 || det[1] == 0 {
        return Err(Error::format(
            file,
            format!(
                "empty detector shape {}x{}: no pixels to read",
                det[0], det[1]
            ),
        ));
    }
    if det[0].saturating_mul(det[1]) > MAX_DET_PIXELS {
        return Err(Error::format(
            file,
            format!(
                "detector shape {}x{} is too large (at most {MAX_DET_PIXELS} pixels supported): corrupt or absurd header",
                det[0], det[1]
            ),
        ));
    }
    Ok([det[0] as usize, det[1] as usize])
}

pub(crate) fn check_frames(file: &str, frames: u64) -> Result<u64> {
    if frames == 0 {
        return Err(Error::format(
            file,
            "the data set holds no frames (0 scan positions)",
        ));
    }
    if frames > MAX_FRAMES {
        return Err(Error::format(
            file,
            format!(
                "frame count {frames} is too large (at most {MAX_FRAMES} supported): corrupt or absurd header"
            ),
        ));
    }
    Ok(frames)
}

/// Every frame of a chunked data set must be written: a missing chunk means an incomplete
/// or corrupt acquisition, never silent zeros (C-INCOMPLETE).
pub(crate) fn check_chunk_coverage(ix: &DatasetIndex) -> Result<()> {
    if ix.pending.is_some() {
        // Checked by `Acquisition::finish_index` once the leaves are read.
        return Ok(());
    }
    if let Some(cs) = ix.chunk_shape() {
        let expected: u64 = ix
            .shape
            .iter()
            .zip(cs)
            .map(|(&s, &c)| s.div_ceil(c))
            .product();
        if ix.chunks.len() as u64 != expected {
            return Err(Error::format(
                &ix.file,
                format!(
                    "data set {}: {} of {expected} chunks are stored: the acquisition is incomplete or the file corrupt",
                    ix.path,
                    ix.chunks.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod scan_shape_tests {
    use super::*;

    #[test]
    fn recorded_scan_dimensions_are_whole_numbers_within_the_frames() {
        assert_eq!(scan_dimension("c.h5", "NumPixelsX", 4.0, 24).unwrap(), 4);
        for v in [1e300, f64::NAN, -3.0, 2.5, 0.0, 25.0, f64::INFINITY] {
            let e = scan_dimension("c.h5", "STEM Metadata NumPixelsX", v, 24)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("c.h5: STEM Metadata NumPixelsX is ") && e.contains("--scan-shape"),
                "{v}: {e}"
            );
        }
    }

    #[test]
    fn a_product_that_wraps_is_not_the_frame_count() {
        let e = resolve_scan_shape("s.h5", 24, Some([5, 3_689_348_814_741_910_328]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("18446744073709551640 positions"), "{e}");
        assert!(resolve_scan_shape("s.h5", 24, Some([6, 4]), None).is_ok());
    }
}
