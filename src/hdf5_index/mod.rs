//! HDF5 index stage: open HDF5 files from a [`FileSet`] (external links resolved among the
//! opened files by name), describe data sets, and list their chunk table — offsets, sizes
//! and filter masks — without reading a byte of payload. Adjacent chunks are then coalesced
//! into large reads by [`SpanPlan`].

mod btree_v1;

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

const HDF5_MAGIC: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// hdf5-reader storage over one of our byte sources. Metadata comes in many small reads (a
/// B-tree node's header, then its entries, ...): those are served from a few cached 64 KiB
/// pages, so each costs one read of the source, which in a browser is a File API call of
/// about half a millisecond whatever its size.
struct SourceStorage {
    src: Arc<dyn ByteSource>,
    pages: Mutex<Vec<(u64, Arc<Vec<u8>>)>>,
}

const PAGE: u64 = 64 << 10;
/// Reads up to this size go through the page cache; larger ones go straight to the source.
const SMALL_READ: usize = 16 << 10;
const PAGES_KEPT: usize = 16;

impl SourceStorage {
    fn new(src: Arc<dyn ByteSource>) -> Self {
        SourceStorage {
            src,
            pages: Mutex::new(Vec::new()),
        }
    }

    fn page(&self, index: u64) -> Result<Arc<Vec<u8>>> {
        if let Ok(pages) = self.pages.lock() {
            if let Some((_, p)) = pages.iter().find(|(i, _)| *i == index) {
                return Ok(p.clone());
            }
        }
        let start = index * PAGE;
        let len = PAGE.min(self.src.len().saturating_sub(start));
        let page = Arc::new(self.src.read_vec(start, len)?);
        if let Ok(mut pages) = self.pages.lock() {
            if pages.len() == PAGES_KEPT {
                pages.remove(0);
            }
            pages.push((index, page.clone()));
        }
        Ok(page)
    }

    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if len > SMALL_READ {
            return self.src.read_vec(offset, len as u64);
        }
        let mut out = Vec::with_capacity(len);
        let end = offset + len as u64;
        let mut at = offset;
        while at < end {
            let page = self.page(at / PAGE)?;
            let from = (at % PAGE) as usize;
            let take = (end - at).min((page.len() - from.min(page.len())) as u64) as usize;
            if take == 0 {
                break;
            }
            out.extend_from_slice(&page[from..from + take]);
            at += take as u64;
        }
        Ok(out)
    }
}

impl Storage for SourceStorage {
    fn len(&self) -> u64 {
        self.src.len()
    }
    fn read_range(&self, offset: u64, len: usize) -> H5Result<StorageBuffer> {
        // Like hdf5-reader's own storages: a range past the end is an error, never a short
        // buffer (its parser indexes the buffer it asked for; a short one panicked).
        let file_len = self.src.len();
        if (offset as u128) + (len as u128) > file_len as u128 {
            return Err(H5Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: file_len.saturating_sub(offset),
            });
        }
        let buf = self
            .read(offset, len)
            .map_err(|e| H5Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(StorageBuffer::from_vec(buf))
    }
}

/// Opened HDF5 files of one acquisition, shared by the link resolver.
#[derive(Clone)]
pub struct H5Set {
    inner: Arc<H5SetInner>,
}

struct H5SetInner {
    files: FileSet,
    /// Leave chunk B-trees' leaves unread ([`DatasetIndex::pending`]).
    defer_leaves: bool,
    opened: Mutex<HashMap<String, Hdf5File>>,
    /// Link targets asked for, in order; tells which file a linked data set lives in and
    /// which linked file was missing.
    requested: Mutex<Vec<String>>,
}

struct Resolver(std::sync::Weak<H5SetInner>);

impl hdf5_reader::ExternalLinkResolver for Resolver {
    fn resolve_external_link(&self, filename: &str) -> H5Result<Option<Hdf5File>> {
        let Some(inner) = self.0.upgrade() else {
            return Ok(None);
        };
        let name = crate::source::base_name(filename).to_string();
        if let Ok(mut r) = inner.requested.lock() {
            r.push(name.clone());
        }
        let set = H5Set { inner };
        match set.open(&name) {
            Ok(f) => Ok(Some(f)),
            Err(Error::MissingFile { .. }) => Ok(None),
            Err(e) => Err(H5Error::InvalidData(e.to_string())),
        }
    }
}

impl H5Set {
    pub fn new(files: FileSet) -> Self {
        H5Set::with_leaves(files, false)
    }

    /// A set whose data sets' chunk B-trees are read down to their leaves' parents only
    /// (`defer_leaves`): the leaves are read later, by [`PendingLeaves::read`].
    pub fn with_leaves(files: FileSet, defer_leaves: bool) -> Self {
        H5Set {
            inner: Arc::new(H5SetInner {
                files,
                defer_leaves,
                opened: Mutex::new(HashMap::new()),
                requested: Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn files(&self) -> &FileSet {
        &self.inner.files
    }

    pub fn source(&self, name: &str) -> Result<Arc<dyn ByteSource>> {
        self.inner
            .files
            .get(name)
            .ok_or_else(|| Error::MissingFile {
                missing: name.to_string(),
                referenced_by: "HDF5 external link".into(),
            })
    }

    /// Open (or reuse) an HDF5 file of the set.
    pub fn open(&self, name: &str) -> Result<Hdf5File> {
        if let Some(f) = self
            .inner
            .opened
            .lock()
            .ok()
            .and_then(|m| m.get(name).cloned())
        {
            return Ok(f);
        }
        let src = self.source(name)?;
        if src.is_empty() {
            return Err(Error::format(
                src.name(),
                "the file is empty (0 bytes): not an HDF5 file",
            ));
        }
        if !is_hdf5(src.as_ref())? {
            return Err(Error::format(
                src.name(),
                "not an HDF5 file (no HDF5 signature at offset 0, 512, 1024, ...)",
            ));
        }
        let opts = OpenOptions::default()
            .with_external_link_resolver(Arc::new(Resolver(Arc::downgrade(&self.inner))));
        let storage: Arc<dyn Storage> = Arc::new(SourceStorage::new(src.clone()));
        let file = Hdf5File::from_storage_with_options(storage, opts)
            .map_err(|e| h5_err(src.name(), "cannot open HDF5 file", e))?;
        if let Ok(mut m) = self.inner.opened.lock() {
            m.insert(name.to_string(), file.clone());
        }
        Ok(file)
    }

    /// Follow `path` in `file` (maybe through an external link) to a data set; returns the
    /// name of the file that holds it.
    pub fn dataset(&self, file: &str, path: &str) -> Result<(String, Dataset)> {
        let h5 = self.open(file)?;
        let before = self.requested_len();
        let found = h5.dataset(path);
        let linked = self.requested_since(before);
        match found {
            Ok(ds) => Ok((
                linked.last().cloned().unwrap_or_else(|| file.to_string()),
                ds,
            )),
            Err(e) => {
                if let Some(missing) = linked.iter().find(|n| self.inner.files.get(n).is_none()) {
                    return Err(Error::MissingFile {
                        missing: missing.clone(),
                        referenced_by: format!("{file}:{path}"),
                    });
                }
                Err(h5_err(file, &format!("cannot read data set {path}"), e))
            }
        }
    }

    /// Link targets asked for so far that are not among the opened files, in order.
    pub(crate) fn missing_link_targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in self.requested_since(0) {
            if self.inner.files.get(&n).is_none() && !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    fn requested_len(&self) -> usize {
        self.inner.requested.lock().map(|r| r.len()).unwrap_or(0)
    }

    fn requested_since(&self, start: usize) -> Vec<String> {
        self.inner
            .requested
            .lock()
            .map(|r| r.get(start..).map(<[String]>::to_vec).unwrap_or_default())
            .unwrap_or_default()
    }
}

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

fn is_hdf5(src: &dyn ByteSource) -> Result<bool> {
    let mut at = 0u64;
    while at + 8 <= src.len() {
        let mut sig = [0u8; 8];
        src.read_at(at, &mut sig)?;
        if &sig == HDF5_MAGIC {
            return Ok(true);
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    Ok(false)
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
    /// than any supported filter writes, is refused.
    fn chunk_refs(
        &self,
        entries: Vec<hdf5_reader::chunk_index::ChunkEntry>,
    ) -> Result<Vec<ChunkRef>> {
        let (file, path, file_len) = (&self.file, &self.path, self.file_len);
        let mut chunks = Vec::with_capacity(entries.len());
        for e in entries {
            // Unfiltered entries from some indexes report size 0: it is the logical size.
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

/// Chunk byte ranges coalesced into large sequential reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    pub file: String,
    pub offset: u64,
    pub len: u64,
    /// Index range into the data set's chunk table.
    pub first_chunk: usize,
    pub chunk_count: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpanPlan {
    pub spans: Vec<Span>,
}

impl SpanPlan {
    /// Merge chunks that follow each other in the file (gaps up to `max_gap` bytes are read
    /// and dropped) into spans of at most `max_span` bytes.
    pub fn coalesce(index: &DatasetIndex, max_gap: u64, max_span: u64) -> SpanPlan {
        let mut spans: Vec<Span> = Vec::new();
        for (i, c) in index.chunks.iter().enumerate() {
            if let Some(s) = spans.last_mut() {
                let end = s.offset + s.len;
                let new_end = c.offset + c.size;
                if c.offset >= end && c.offset - end <= max_gap && new_end - s.offset <= max_span {
                    s.len = new_end - s.offset;
                    s.chunk_count += 1;
                    continue;
                }
            }
            spans.push(Span {
                file: index.file.clone(),
                offset: c.offset,
                len: c.size,
                first_chunk: i,
                chunk_count: 1,
            });
        }
        SpanPlan { spans }
    }

    pub fn bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.len).sum()
    }
}

/// Read a numeric attribute as f64 whatever its stored integer/float type or rank.
pub fn attr_f64(attrs: &[hdf5_reader::Attribute], name: &str) -> Option<f64> {
    let a = attrs.iter().find(|a| a.name == name)?;
    if let Ok(v) = a.read_as_f64() {
        return Some(v);
    }
    a.read_1d::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .or_else(|| {
            a.read_1d::<i64>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
        .or_else(|| {
            a.read_1d::<u64>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
        .or_else(|| {
            a.read_1d::<i32>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
}

/// A scalar numeric data set as f64 with its `units` attribute (NeXus style), if it has one.
pub fn dataset_f64_units(h5: &Hdf5File, path: &str) -> Option<(f64, Option<String>)> {
    let value = dataset_f64(h5, path)?;
    let units = h5
        .dataset(path)
        .ok()
        .and_then(|ds| ds.attribute("units").ok())
        .and_then(|a| a.read_string().ok())
        .map(|u| u.trim_end_matches('\0').trim().to_string());
    Some((value, units))
}

/// Read a scalar numeric data set as f64.
pub fn dataset_f64(h5: &Hdf5File, path: &str) -> Option<f64> {
    let ds = h5.dataset(path).ok()?;
    macro_rules! try_type {
        ($t:ty) => {
            if let Ok(a) = ds.read_array::<$t>() {
                return a.iter().next().map(|&v| v as f64);
            }
        };
    }
    try_type!(f64);
    try_type!(u64);
    try_type!(i64);
    try_type!(u32);
    try_type!(i32);
    try_type!(f32);
    try_type!(u16);
    try_type!(i8);
    None
}
