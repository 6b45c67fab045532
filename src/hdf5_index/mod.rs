//! HDF5 index stage: open HDF5 files from a [`FileSet`] (external links resolved among the
//! opened files by name), describe data sets, and list their chunk table — offsets, sizes
//! and filter masks — without reading a byte of payload. Adjacent chunks are then coalesced
//! into large reads by [`SpanPlan`].

mod attrs;
mod btree_v1;
mod set;
mod spans;
mod storage;

pub use attrs::*;
pub use set::H5Set;
pub use spans::{Span, SpanPlan};
use storage::*;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hdf5_reader::error::{Error as H5Error, Result as H5Result};
use hdf5_reader::messages::layout::{ChunkIndexing, DataLayout};
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::storage::{Storage, StorageBuffer};
use hdf5_reader::{Dataset, Datatype, Hdf5File, OpenOptions};
use serde::Serialize;

use crate::contract::Dtype;
use crate::decode::Filter;
use crate::error::{Error, Result};
use crate::source::{ByteSource, FileSet};

pub(crate) fn h5_err(file: &str, what: &str, e: H5Error) -> Error {
    let msg = e.to_string();
    let hint = if msg.contains("I/O")
        || msg.contains("out of bounds")
        || msg.contains("past the end")
        || msg.contains("unexpected end")
    {
        " (the file looks truncated)"
    } else if msg.contains("signature") {
        " (the file is corrupt)"
    } else {
        ""
    };
    Error::format(file, format!("{what}: {msg}{hint}"))
}

/// Where the bytes of one chunk lie.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkRef {
    /// Dataset coordinates of the chunk's first element.
    pub coords: Vec<u64>,
    pub offset: u64,
    pub size: u64,
    pub filter_mask: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Layout {
    Chunked {
        chunk_shape: Vec<u64>,
    },
    Contiguous {
        offset: u64,
        size: u64,
    },
    /// Data inside the object header (tiny data sets only).
    Compact {
        #[serde(skip)]
        bytes: Vec<u8>,
    },
}

/// A data set's description and chunk table, read from metadata alone.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetIndex {
    pub file: String,
    pub path: String,
    pub shape: Vec<u64>,
    pub dtype: Dtype,
    pub layout: Layout,
    pub filters: Vec<Filter>,
    /// Sorted by dataset coordinates (row-major). Empty while [`DatasetIndex::pending`]
    /// holds the leaves that list the chunks.
    pub chunks: Vec<ChunkRef>,
    /// The chunk B-tree's leaves, not read yet (an open that defers them).
    #[serde(skip)]
    pub pending: Option<Arc<PendingLeaves>>,
}

/// The leaves of a chunk B-tree an open left unread, in key order (so in chunk order), and
/// what checks the chunks they list as the open checks them.
pub struct PendingLeaves {
    pub leaves: Vec<u64>,
    src: Arc<dyn ByteSource>,
    os: u8,
    check: ChunkCheck,
}

impl std::fmt::Debug for PendingLeaves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} unread B-tree leaves of {}",
            self.leaves.len(),
            self.check.file
        )
    }
}

impl PendingLeaves {
    /// The chunks listed by `leaves[range]`, checked and sorted as an open's; their reads
    /// are in flight at once.
    pub async fn read(&self, range: std::ops::Range<usize>) -> Result<Vec<ChunkRef>> {
        let leaves = self.leaves.get(range.clone()).ok_or_else(|| {
            Error::param(format!(
                "leaves {range:?} of {} asked for",
                self.leaves.len()
            ))
        })?;
        let entries = btree_v1::leaf_entries(&*self.src, leaves, self.os, self.check.rank)
            .await
            .map_err(|m| self.check.index_error(m))?;
        self.check.chunk_refs(entries)
    }

    /// [`PendingLeaves::read`] from bytes at hand (`node(addr, len)`, see
    /// `btree_v1::leaf_entries_from`); `None` where they do not hold every leaf whole.
    pub fn read_from(
        &self,
        range: std::ops::Range<usize>,
        node: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<ChunkRef>>> {
        let Some(leaves) = self.leaves.get(range) else {
            return Ok(None);
        };
        let entries = btree_v1::leaf_entries_from(
            node,
            self.check.file_len,
            leaves,
            self.os,
            self.check.rank,
        )
        .map_err(|m| self.check.index_error(m))?;
        entries.map(|e| self.check.chunk_refs(e)).transpose()
    }

    /// The file the leaves are in.
    pub fn source(&self) -> &std::sync::Arc<dyn ByteSource> {
        &self.src
    }

    /// The length of that file.
    pub fn file_len(&self) -> u64 {
        self.check.file_len
    }
}

/// What every chunk entry of a data set's index must satisfy before it is read.
#[derive(Clone)]
struct ChunkCheck {
    file: String,
    path: String,
    shape: Vec<u64>,
    rank: usize,
    chunk_logical: u64,
    file_len: u64,
    /// Whether the index stores each chunk's size (a v1 B-tree always does, the others
    /// when the data are filtered): a size of 0 there is corrupt, as h5py holds it.
    sizes_stored: bool,
}

impl ChunkCheck {
    fn index_error(&self, m: String) -> Error {
        Error::format(
            &self.file,
            format!("cannot read the chunk index of {}: {m}", self.path),
        )
    }

    /// The entries as chunk references sorted by coordinates, without stale chunks (outside
    /// the extent: legal in HDF5) or repeats; a chunk past the end of the file, or larger
    /// than any supported filter writes, is refused (C-INCOMPLETE).
    fn chunk_refs(
        &self,
        entries: Vec<hdf5_reader::chunk_index::ChunkEntry>,
    ) -> Result<Vec<ChunkRef>> {
        let (file, path, file_len) = (&self.file, &self.path, self.file_len);
        let mut chunks = Vec::with_capacity(entries.len());
        for e in entries {
            if e.size == 0 && self.sizes_stored {
                return Err(Error::format(
                    file,
                    format!(
                        "data set {path}: chunk at {:?} has a stored size of 0 bytes: corrupt chunk index",
                        e.offsets
                    ),
                ));
            }
            // Unfiltered entries of indexes that keep no sizes report 0: the logical size.
            let size = if e.size == 0 {
                self.chunk_logical
            } else {
                e.size
            };
            if e.offsets.len() != self.rank
                || e.offsets.iter().zip(&self.shape).any(|(o, s)| o >= s)
            {
                continue;
            }
            if e.address.checked_add(size).is_none_or(|end| end > file_len) {
                return Err(Error::format(
                    file,
                    format!(
                        "data set {path}: chunk at {:?} claims {size} bytes at offset {} beyond the end of the file ({file_len} bytes): truncated or corrupt",
                        e.offsets, e.address
                    ),
                ));
            }
            if size > max_stored_bytes(self.chunk_logical) {
                return Err(Error::format(
                    file,
                    format!(
                        "data set {path}: chunk at {:?} claims {size} stored bytes for {} decoded bytes, more than any supported filter writes: corrupt chunk index",
                        e.offsets, self.chunk_logical
                    ),
                ));
            }
            chunks.push(ChunkRef {
                coords: e.offsets,
                offset: e.address,
                size,
                filter_mask: e.filter_mask,
            });
        }
        sort_chunks(&mut chunks);
        Ok(chunks)
    }
}

/// Sort chunk references by coordinates and keep the first of each (an index may list a
/// chunk twice), as every chunk table here is kept.
pub fn sort_chunks(chunks: &mut Vec<ChunkRef>) {
    chunks.sort_by(|a, b| a.coords.cmp(&b.coords));
    chunks.dedup_by(|a, b| a.coords == b.coords);
}

/// Map an HDF5 datatype to a supported sample type.
pub fn sample_dtype(file: &str, path: &str, dt: &Datatype) -> Result<Dtype> {
    use hdf5_reader::ByteOrder;
    let unsupported = |what: String| {
        Error::format(
            file,
            format!("data set {path} has {what}; supported: uint8, uint16, uint32, float32 (little-endian)"),
        )
    };
    match dt {
        Datatype::FixedPoint {
            size,
            signed,
            byte_order,
        } => {
            if *byte_order != ByteOrder::LittleEndian {
                return Err(unsupported("big-endian integers".into()));
            }
            match (size, signed) {
                (1, false) => Ok(Dtype::U8),
                (2, false) => Ok(Dtype::U16),
                (4, false) => Ok(Dtype::U32),
                _ => Err(unsupported(format!(
                    "{}int{} samples",
                    if *signed { "" } else { "u" },
                    u64::from(*size) * 8
                ))),
            }
        }
        Datatype::FloatingPoint { size, byte_order } => {
            if *byte_order != ByteOrder::LittleEndian {
                return Err(unsupported("big-endian floats".into()));
            }
            match size {
                4 => Ok(Dtype::F32),
                _ => Err(unsupported(format!(
                    "float{} samples",
                    u64::from(*size) * 8
                ))),
            }
        }
        other => Err(unsupported(format!("a non-numeric type ({other:?})"))),
    }
}

impl DatasetIndex {
    /// Build the index of `ds`, which lives in `file` of `set`.
    pub fn build(set: &H5Set, file: &str, path: &str, ds: &Dataset) -> Result<Self> {
        let h5 = set.open(file)?;
        let src = set.source(file)?;
        let header = h5
            .get_or_parse_header(ds.address())
            .map_err(|e| h5_err(file, &format!("cannot read the header of {path}"), e))?;
        let shape = ds.shape().to_vec();
        let dtype = sample_dtype(file, path, ds.dtype())?;
        let mut layout_msg = None;
        let mut filters = Vec::new();
        for m in &header.messages {
            match m {
                HdfMessage::DataLayout(l) => layout_msg = Some(l.layout.clone()),
                HdfMessage::FilterPipeline(p) => {
                    for f in &p.filters {
                        let filter = Filter::from_hdf5(f.id, f.name.as_deref(), &f.client_data)
                            .map_err(|m| Error::format(file, format!("data set {path}: {m}")))?;
                        check_filter_elem_size(file, path, &filter, dtype)?;
                        filters.push(filter);
                    }
                }
                _ => {}
            }
        }
        let layout_msg = layout_msg.ok_or_else(|| {
            Error::format(file, format!("data set {path} has no data layout message"))
        })?;
        let sb = h5.superblock();
        let (os, ls) = (sb.offset_size, sb.length_size);
        let file_len = src.len();
        let mut pending = None;
        let (layout, chunks) = match layout_msg {
            DataLayout::Compact { data } => (Layout::Compact { bytes: data }, Vec::new()),
            DataLayout::Contiguous { address, size } => {
                let logical = logical_bytes(&shape, dtype)
                    .map_err(|e| Error::format(file, format!("data set {path}: {e}")))?;
                if address == u64::MAX {
                    return Err(Error::format(
                        file,
                        format!("data set {path} was never written (no storage allocated)"),
                    ));
                }
                if size < logical || address.checked_add(logical).is_none_or(|e| e > file_len) {
                    return Err(Error::format(
                        file,
                        format!(
                            "data set {path}: contiguous data of {logical} bytes at offset {address} does not fit in the file ({file_len} bytes): truncated or lying sizes"
                        ),
                    ));
                }
                (
                    Layout::Contiguous {
                        offset: address,
                        size: logical,
                    },
                    Vec::new(),
                )
            }
            DataLayout::Chunked {
                address,
                mut dims,
                element_size: _,
                chunk_indexing,
            } => {
                if dims.len() == shape.len() + 1 {
                    dims.pop();
                }
                if dims.len() != shape.len() || dims.contains(&0) {
                    return Err(Error::format(
                        file,
                        format!(
                            "data set {path}: chunk shape {dims:?} does not match rank {}",
                            shape.len()
                        ),
                    ));
                }
                check_chunk_grid(file, path, &shape, &dims, dtype, file_len)?;
                let check = ChunkCheck {
                    file: file.to_string(),
                    path: path.to_string(),
                    shape: shape.clone(),
                    rank: shape.len(),
                    chunk_logical: dims.iter().map(|&d| d as u64).product::<u64>()
                        * dtype.size() as u64,
                    file_len,
                    sizes_stored: chunk_indexing.is_none() || !filters.is_empty(),
                };
                let storage = SourceStorage::new(src.clone());
                let ndim = shape.len();
                let h5e = |e| h5_err(file, &format!("cannot read the chunk index of {path}"), e);
                let entries: Vec<hdf5_reader::chunk_index::ChunkEntry> = if address == u64::MAX
                    || (os < 8 && address == (1u64 << (8 * os as u32)) - 1)
                {
                    Vec::new()
                } else {
                    match chunk_indexing {
                        None => {
                            // Stale chunks outside the extent are legal: leave them room.
                            let grid: u64 = shape
                                .iter()
                                .zip(&dims)
                                .map(|(&s, &d)| s.div_ceil(d as u64).max(1))
                                .product();
                            let limit = (grid.saturating_mul(2) + 64).min(usize::MAX as u64);
                            let walked = btree_v1::chunk_entries(
                                &*src,
                                address,
                                os,
                                ndim,
                                limit as usize,
                                set.inner.defer_leaves,
                            )
                            .map_err(|m| check.index_error(m))?;
                            if !walked.leaves.is_empty() {
                                pending = Some(Arc::new(PendingLeaves {
                                    leaves: walked.leaves,
                                    src: src.clone(),
                                    os,
                                    check: check.clone(),
                                }));
                            }
                            walked.entries
                        }
                        Some(ChunkIndexing::SingleChunk {
                            filtered_size,
                            filters,
                        }) => vec![hdf5_reader::chunk_index::single_chunk_entry(
                            address,
                            filtered_size,
                            filters,
                            ndim,
                        )],
                        Some(ChunkIndexing::BTreeV2) => {
                            hdf5_reader::chunk_index::collect_v2_chunk_entries_storage(
                                &storage,
                                address,
                                os,
                                ls,
                                ndim as u32,
                                &dims,
                                None,
                            )
                            .map_err(h5e)?
                        }
                        Some(ChunkIndexing::Implicit) => {
                            hdf5_reader::chunk_index::collect_implicit_chunk_entries(
                                address,
                                &shape,
                                &dims,
                                dtype.size(),
                                None,
                                file_len,
                            )
                            .map_err(h5e)?
                        }
                        Some(ChunkIndexing::FixedArray { .. }) => {
                            hdf5_reader::fixed_array::collect_fixed_array_chunk_entries_storage(
                                &storage, address, os, ls, &shape, &dims, None,
                            )
                            .map_err(h5e)?
                        }
                        Some(ChunkIndexing::ExtensibleArray { .. }) => {
                            hdf5_reader::extensible_array::collect_extensible_array_chunk_entries_storage(
                                &storage,
                                address,
                                os,
                                ls,
                                &shape,
                                ds.max_dims(),
                                &dims,
                                None,
                            )
                            .map_err(h5e)?
                        }
                    }
                };
                let chunks = check.chunk_refs(entries)?;
                (
                    Layout::Chunked {
                        chunk_shape: dims.iter().map(|&d| d as u64).collect(),
                    },
                    chunks,
                )
            }
        };
        Ok(DatasetIndex {
            file: file.to_string(),
            path: path.to_string(),
            shape,
            dtype,
            layout,
            filters,
            chunks,
            pending,
        })
    }

    pub fn chunk_shape(&self) -> Option<&[u64]> {
        match &self.layout {
            Layout::Chunked { chunk_shape } => Some(chunk_shape),
            _ => None,
        }
    }

    /// Decoded bytes of one chunk (`u64::MAX` where that overflows); `None` unless chunked.
    pub fn chunk_bytes(&self) -> Option<u64> {
        let dims = self.chunk_shape()?;
        Some(logical_bytes(dims, self.dtype).unwrap_or(u64::MAX))
    }

    /// Bytes stored in the file for this data set.
    pub fn stored_bytes(&self) -> u64 {
        match &self.layout {
            Layout::Chunked { .. } => self.chunks.iter().map(|c| c.size).sum(),
            Layout::Contiguous { size, .. } => *size,
            Layout::Compact { bytes } => bytes.len() as u64,
        }
    }
}

/// Bitshuffle records the element size it was set up with (`cd_values[2]`); a value other
/// than the data set's sample size means the chunks cannot be unshuffled as declared.
fn check_filter_elem_size(file: &str, path: &str, f: &Filter, dtype: Dtype) -> Result<()> {
    if f.kind == crate::decode::FilterKind::BitshuffleLz4 {
        if let Some(&e) = f.cd_values.get(2) {
            if e != 0 && e as usize != dtype.size() {
                return Err(Error::format(
                    file,
                    format!(
                        "data set {path}: bitshuffle filter elem_size {e} does not match the {}-byte {} samples (corrupt filter parameters)",
                        dtype.size(),
                        dtype.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Largest decoded chunk we accept; real detectors write chunks of a few MiB.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Refuse chunk grids the file cannot hold before anything is sized by them: every chunk
/// must be stored (see `formats::check_chunk_coverage`), so a grid of more chunks than the
/// file has bytes, or one decoded chunk beyond [`MAX_CHUNK_BYTES`], is a lying header.
fn check_chunk_grid(
    file: &str,
    path: &str,
    shape: &[u64],
    dims: &[u32],
    dtype: Dtype,
    file_len: u64,
) -> Result<()> {
    let chunk_bytes = dims
        .iter()
        .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&b| b <= MAX_CHUNK_BYTES);
    if chunk_bytes.is_none() {
        return Err(Error::format(
            file,
            format!(
                "data set {path}: chunk shape {dims:?} is too large (at most {MAX_CHUNK_BYTES} decoded bytes per chunk supported): corrupt or absurd header"
            ),
        ));
    }
    let grid = shape
        .iter()
        .zip(dims)
        .try_fold(1u64, |a, (&s, &d)| a.checked_mul(s.div_ceil(d as u64)));
    match grid {
        Some(n) if n <= file_len => Ok(()),
        _ => Err(Error::format(
            file,
            format!(
                "data set {path}: shape {shape:?} in chunks of {dims:?} is too large for a file of {file_len} bytes (more chunks than bytes): corrupt or absurd dimensions"
            ),
        )),
    }
}

/// The most stored bytes a chunk of `logical` decoded bytes can take under the supported
/// filters, with room to spare: HDF5's LZ4 filter in one-byte blocks writes 21 bytes a byte
/// (a 4-byte length and LZ4's worst case of 16 bytes more), bitshuffle/LZ4 in blocks of 8
/// elements 3.5, deflate its stored blocks a few bytes per 16 KiB. A larger claim is a lying
/// index, refused before anything reads (or allocates) that many bytes.
pub fn max_stored_bytes(logical: u64) -> u64 {
    logical.saturating_mul(32).saturating_add(64)
}

pub fn logical_bytes(shape: &[u64], dtype: Dtype) -> Result<u64> {
    shape
        .iter()
        .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            Error::param(format!(
                "shape {shape:?} is too large (overflows 64-bit sizes)"
            ))
        })
}
