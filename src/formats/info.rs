//! What `stem4d info --json` reports: shape, dtype, format, files, filters, chunk table,
//! span plan, sizes, scan-shape provenance, calibration and a source identity: the metadata
//! of C-AXES, whatever the storage layout.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::formats::{Acquisition, Calibration, Format, PartKind};
use crate::hdf5_index::{ChunkRef, SpanPlan};

/// Gaps up to this size are read through rather than splitting a read.
pub const SPAN_MAX_GAP: u64 = 64 << 10;
/// Upper bound of one coalesced read.
pub const SPAN_MAX_BYTES: u64 = 64 << 20;
/// Chunk tables longer than this are summarised unless asked for in full.
pub const CHUNK_LIST_LIMIT: usize = 4096;

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct FileInfo {
    pub name: String,
    pub bytes: u64,
}

impl FileInfo {
    /// The name and length of each of `files`.
    pub fn list(files: &crate::source::FileSet) -> Vec<FileInfo> {
        files
            .files()
            .iter()
            .map(|f| FileInfo {
                name: f.name().to_string(),
                bytes: f.len(),
            })
            .collect()
    }
}

#[derive(Serialize)]
pub struct ChunkTableInfo {
    pub file: String,
    pub dataset: String,
    pub count: usize,
    pub stored_bytes: u64,
    pub min_chunk_bytes: u64,
    pub max_chunk_bytes: u64,
    /// Every chunk when the table is short (or `--chunks`), else empty.
    pub chunks: Vec<ChunkRef>,
    pub spans: usize,
    pub span_bytes: u64,
}

#[derive(Serialize)]
pub struct Info {
    pub shape: [usize; 4],
    pub dtype: &'static str,
    pub format: Format,
    pub files: Vec<FileInfo>,
    pub dataset: String,
    pub filters: Vec<&'static str>,
    pub chunk_shape: Option<Vec<u64>>,
    pub compressed_bytes: u64,
    pub logical_bytes: u64,
    pub scan_shape_source: String,
    pub calibration: Calibration,
    pub pixel_mask_bad: Option<usize>,
    pub chunk_tables: Vec<ChunkTableInfo>,
    pub source_sha256: String,
    /// Files given that the acquisition does not use (left out, and said).
    pub unused_files: Vec<String>,
    /// The settings a prepared file was saved with from a session (bin, masking, BF fit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_session: Option<super::prepared::SavedSession>,
}

impl Info {
    pub fn of(acq: &Acquisition, all_chunks: bool) -> Info {
        let mut filters = Vec::new();
        let mut chunk_shape = None;
        let mut tables = Vec::new();
        let mut hasher = Sha256::new();
        hasher.update(format!(
            "{:?}|{}|{}",
            acq.shape.as_array(),
            acq.dtype.name(),
            acq.dataset_path
        ));
        for part in &acq.parts {
            hasher.update(part.source.name().as_bytes());
            hasher.update(part.source.len().to_le_bytes());
            match &part.kind {
                PartKind::Hdf5(ix) => {
                    for f in &ix.filters {
                        if !filters.contains(&f.kind.name()) {
                            filters.push(f.kind.name());
                        }
                    }
                    if chunk_shape.is_none() {
                        chunk_shape = ix.chunk_shape().map(<[u64]>::to_vec);
                    }
                    for c in &ix.chunks {
                        hasher.update(c.offset.to_le_bytes());
                        hasher.update(c.size.to_le_bytes());
                        hasher.update(c.filter_mask.to_le_bytes());
                    }
                    let plan = SpanPlan::coalesce(ix, SPAN_MAX_GAP, SPAN_MAX_BYTES);
                    tables.push(ChunkTableInfo {
                        file: ix.file.clone(),
                        dataset: ix.path.clone(),
                        count: ix.chunks.len(),
                        stored_bytes: ix.stored_bytes(),
                        min_chunk_bytes: ix.chunks.iter().map(|c| c.size).min().unwrap_or(0),
                        max_chunk_bytes: ix.chunks.iter().map(|c| c.size).max().unwrap_or(0),
                        chunks: if all_chunks || ix.chunks.len() <= CHUNK_LIST_LIMIT {
                            ix.chunks.clone()
                        } else {
                            Vec::new()
                        },
                        spans: plan.spans.len(),
                        span_bytes: plan.bytes(),
                    });
                }
                PartKind::Synthetic => {}
                PartKind::Tiled(t) => {
                    for b in &t.blocks {
                        hasher.update(b.sha256.as_bytes());
                    }
                }
                PartKind::Raw {
                    offset,
                    stride,
                    samples,
                    ..
                } => {
                    hasher.update(offset.to_le_bytes());
                    hasher.update(stride.to_le_bytes());
                    match samples {
                        super::RawSamples::Little => {}
                        super::RawSamples::Big => hasher.update(b"big-endian"),
                        super::RawSamples::MibRaw(raw) => {
                            hasher.update(b"mib-raw");
                            hasher.update(raw.depth.to_le_bytes());
                            hasher.update([raw.quad as u8]);
                        }
                    }
                }
            }
        }
        let digest = hasher.finalize();
        Info {
            shape: acq.shape.as_array(),
            dtype: acq.dtype.name(),
            format: acq.format,
            files: FileInfo::list(&acq.files),
            dataset: acq.dataset_path.clone(),
            filters,
            chunk_shape,
            compressed_bytes: acq.stored_bytes(),
            logical_bytes: acq.logical_bytes(),
            scan_shape_source: acq.scan_shape_source.clone(),
            calibration: acq.calibration.clone(),
            pixel_mask_bad: acq
                .pixel_mask
                .as_ref()
                .map(|m| m.iter().filter(|&&b| b).count()),
            chunk_tables: tables,
            source_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            unused_files: acq.unused_files.clone(),
            saved_session: acq.saved_session().cloned(),
        }
    }

    pub fn text(&self) -> String {
        let mut s = format!(
            "format        {:?}\nshape         {:?} (scan rows, scan cols, det rows, det cols)\ndtype         {}\nscan shape    from {}\nfiles         {}\nfilters       {}\nchunk shape   {:?}\nstored bytes  {}\nlogical bytes {}\nsha256        {}\n",
            self.format,
            self.shape,
            self.dtype,
            self.scan_shape_source,
            self.files.iter().map(|f| format!("{} ({} B)", f.name, f.bytes)).collect::<Vec<_>>().join(", "),
            if self.filters.is_empty() { "none".to_string() } else { self.filters.join(" + ") },
            self.chunk_shape,
            self.compressed_bytes,
            self.logical_bytes,
            self.source_sha256,
        );
        for t in &self.chunk_tables {
            s.push_str(&format!(
                "chunks        {}:{} {} chunks, {} coalesced reads\n",
                t.file, t.dataset, t.count, t.spans
            ));
        }
        let calibration = self.calibration.text_lines();
        if calibration.is_empty() {
            s.push_str("calibration   none in the files\n");
        }
        for (i, line) in calibration.iter().enumerate() {
            let head = if i == 0 { "calibration" } else { "" };
            s.push_str(&format!("{head:<14}{line}\n"));
        }
        if let Some(saved) = &self.saved_session {
            let fit = saved.bf_fit.map_or("none".to_string(), |[r, c, radius]| {
                format!("centre ({r:.2}, {c:.2}), radius {radius:.2} px")
            });
            s.push_str(&format!(
                "saved with    bin {}, bad-pixel masking {}, BF fit {fit}\n",
                saved.bin,
                if saved.mask_bad_pixels { "on" } else { "off" },
            ));
        }
        s
    }
}
