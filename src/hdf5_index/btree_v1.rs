//! The chunk index of HDF5's version-1 B-tree (what h5py and most detector software write),
//! walked level by level: every node of a level is asked for before any is parsed, so a
//! source that gathers reads (the browser's speculative open, which fetches an attempt's
//! misses together) needs one round per level instead of one per node. A 262,144-chunk
//! acquisition has ~4,100 nodes on 3 levels.

use hdf5_reader::chunk_index::ChunkEntry;

use crate::source::ByteSource;

const SIGNATURE: &[u8; 4] = b"TREE";
const RAW_DATA_NODE: u8 = 1;
/// The default K (32) of a chunk B-tree: a node of 64 children; larger nodes are read again
/// whole once their entry count is known.
const USUAL_CHILDREN: usize = 64;

/// A child of an inner node: its address, and the level its parent says it has.
type Child = (u64, Option<u8>);

/// What a walk of the tree found: its chunk entries, or with `defer_leaves` the addresses of
/// its leaves (in key order, so in chunk order) for [`leaf_entries`] to read later.
pub struct Walked {
    pub entries: Vec<ChunkEntry>,
    pub leaves: Vec<u64>,
}

/// Every chunk entry of the tree rooted at `root` (`os`: the file's offset size; `rank`: the
/// data set's rank; keys hold `rank + 1` offsets, the last one for the element size). A
/// level holding more than `max_entries` nodes or entries is a corrupt (cyclic) tree: a tree
/// over the data set's chunk grid never does. With `defer_leaves` the walk stops above the
/// leaves of a tree of two levels or more: their thousands of small reads can then run
/// while the chunks they list are read (the browser's load, where they take a second).
pub fn chunk_entries(
    src: &dyn ByteSource,
    root: u64,
    os: u8,
    rank: usize,
    max_entries: usize,
    defer_leaves: bool,
) -> Result<Walked, String> {
    let shape = NodeShape::new(os, rank)?;
    let mut level: Vec<Child> = vec![(root, None)];
    let mut entries = Vec::new();
    while !level.is_empty() {
        if level.len() > max_entries || entries.len() > max_entries {
            return Err(format!(
                "more than {max_entries} B-tree nodes or chunks for the chunk grid (a cycle?)"
            ));
        }
        if defer_leaves && level.iter().all(|&(_, want)| want == Some(0)) {
            let leaves = level.into_iter().map(|(addr, _)| addr).collect();
            return Ok(Walked { entries, leaves });
        }
        let nodes = read_nodes(src, &level, &shape)?;
        let mut next = Vec::new();
        for ((addr, want), node) in level.iter().zip(&nodes) {
            if let Some(children) = shape.parse(*addr, *want, node, &mut entries)? {
                next.extend(children);
            }
        }
        level = next;
    }
    Ok(Walked {
        entries,
        leaves: Vec::new(),
    })
}

/// The chunk entries of the leaves at `leaves` (found by a deferred [`chunk_entries`]),
/// checked as that walk checks them; their reads are all in flight at once.
pub async fn leaf_entries(
    src: &dyn ByteSource,
    leaves: &[u64],
    os: u8,
    rank: usize,
) -> Result<Vec<ChunkEntry>, String> {
    let shape = NodeShape::new(os, rank)?;
    let file_len = src.len();
    let mut nodes: Vec<Vec<u8>> = leaves
        .iter()
        .map(|&addr| vec![0u8; shape.read_len(file_len, addr, USUAL_CHILDREN)])
        .collect();
    let reads = leaves
        .iter()
        .zip(nodes.iter_mut())
        .map(|(&addr, b)| (addr, b.as_mut_slice()))
        .collect();
    src.read_many(reads).await.map_err(|e| e.to_string())?;
    // The usual length as read; a leaf with more children than usual is read again whole.
    let mut node = |i: usize, addr: u64, len: usize| match nodes[i].get(..len) {
        Some(held) => Ok(Some(held.to_vec())),
        None => src
            .read_vec(addr, len as u64)
            .map(Some)
            .map_err(|e| e.to_string()),
    };
    parse_leaves(&shape, &mut node, file_len, leaves).map(|e| e.unwrap_or_default())
}

/// [`leaf_entries`] of leaves whose bytes are at hand: `node(addr, len)` gives the `len`
/// bytes at `addr` (cut at the end of the file, as a read would be), `None` where it does
/// not hold them (the caller reads those leaves instead).
pub fn leaf_entries_from(
    node: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    file_len: u64,
    leaves: &[u64],
    os: u8,
    rank: usize,
) -> Result<Option<Vec<ChunkEntry>>, String> {
    let shape = NodeShape::new(os, rank)?;
    parse_leaves(
        &shape,
        &mut |_, addr, len| Ok(node(addr, len)),
        file_len,
        leaves,
    )
}

/// Parse `leaves` as leaves, each first at its usual length, again at its whole length if it
/// has more children: `node(i, addr, len)` gives leaf `i`'s bytes (`None`: not at hand,
/// and so no entries).
fn parse_leaves(
    shape: &NodeShape,
    node: &mut dyn FnMut(usize, u64, usize) -> Result<Option<Vec<u8>>, String>,
    file_len: u64,
    leaves: &[u64],
) -> Result<Option<Vec<ChunkEntry>>, String> {
    let mut entries = Vec::with_capacity(leaves.len() * USUAL_CHILDREN);
    for (i, &addr) in leaves.iter().enumerate() {
        let Some(mut bytes) = node(i, addr, shape.read_len(file_len, addr, USUAL_CHILDREN))? else {
            return Ok(None);
        };
        let used = entries_used(&bytes);
        if bytes.len() < shape.len(used) {
            match node(i, addr, shape.read_len(file_len, addr, used))? {
                Some(whole) => bytes = whole,
                None => return Ok(None),
            }
        }
        // Asked for as a leaf: a node of another level is refused, never descended.
        shape.parse(addr, Some(0), &bytes, &mut entries)?;
    }
    Ok(Some(entries))
}

/// The byte layout of a chunk B-tree's nodes.
struct NodeShape {
    os: usize,
    rank: usize,
    key: usize,
    header: usize,
}

impl NodeShape {
    fn new(os: u8, rank: usize) -> Result<NodeShape, String> {
        let os = os as usize;
        if !matches!(os, 2 | 4 | 8) {
            return Err(format!("offset size {os} is not 2, 4 or 8"));
        }
        Ok(NodeShape {
            os,
            rank,
            key: 8 + 8 * (rank + 1),
            header: 8 + 2 * os,
        })
    }

    /// Bytes of a node of `children` entries.
    fn len(&self, children: usize) -> usize {
        self.header + children * (self.key + self.os) + self.key
    }

    /// Bytes to read for a node of `children` entries at `addr`: cut at the end of a file of
    /// `file_len` bytes.
    fn read_len(&self, file_len: u64, addr: u64, children: usize) -> usize {
        (self.len(children) as u64).min(file_len.saturating_sub(addr)) as usize
    }

    /// Check the node read at `addr` (of level `want` when its parent says so): a leaf's
    /// entries go to `entries`; an inner node's children are returned with their level.
    fn parse(
        &self,
        addr: u64,
        want: Option<u8>,
        node: &[u8],
        entries: &mut Vec<ChunkEntry>,
    ) -> Result<Option<Vec<Child>>, String> {
        let bad = |what: String| format!("B-tree node at {addr}: {what}");
        if node.len() < self.header {
            return Err(bad("truncated: it runs past the end of the file".into()));
        }
        if &node[..4] != SIGNATURE {
            return Err(bad("no TREE signature".into()));
        }
        if node[4] != RAW_DATA_NODE {
            return Err(bad(format!("node type {} is not a chunk node", node[4])));
        }
        let node_level = node[5];
        if want.is_some_and(|w| w != node_level) {
            return Err(bad(format!(
                "level {node_level} under a node of level {}",
                want.unwrap_or(0) + 1
            )));
        }
        let n = entries_used(node);
        if node.len() < self.len(n) {
            return Err(bad(format!(
                "truncated: its {n} entries run past the end of the file"
            )));
        }
        let (key, os, rank) = (self.key, self.os, self.rank);
        let at = |e: usize| &node[self.header + e * (key + os)..];
        if node_level == 0 {
            entries.extend((0..n).map(|e| {
                let k = at(e);
                ChunkEntry {
                    address: uint(&k[key..key + os]),
                    size: u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as u64,
                    filter_mask: u32::from_le_bytes([k[4], k[5], k[6], k[7]]),
                    offsets: (0..rank).map(|d| uint(&k[8 + 8 * d..16 + 8 * d])).collect(),
                }
            }));
            return Ok(None);
        }
        Ok(Some(
            (0..n)
                .map(|e| (uint(&at(e)[key..key + os]), Some(node_level - 1)))
                .collect(),
        ))
    }
}

/// Read a level's nodes: first as nodes of the usual size, then those with more children
/// than usual again whole, together.
fn read_nodes(
    src: &dyn ByteSource,
    level: &[Child],
    shape: &NodeShape,
) -> Result<Vec<Vec<u8>>, String> {
    let file_len = src.len();
    let mut nodes = read_all(src, level, |i| {
        shape.read_len(file_len, level[i].0, USUAL_CHILDREN)
    })?;
    let used: Vec<usize> = nodes.iter().map(|n| entries_used(n)).collect();
    let long: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].len() < shape.len(used[i]))
        .collect();
    if !long.is_empty() {
        let again: Vec<Child> = long.iter().map(|&i| level[i]).collect();
        let whole = read_all(src, &again, |k| {
            shape.read_len(file_len, again[k].0, used[long[k]])
        })?;
        for (i, bytes) in long.into_iter().zip(whole) {
            nodes[i] = bytes;
        }
    }
    Ok(nodes)
}

/// Read each node (`len(i)` bytes), asking for all of them before failing on the first
/// error: a gathering source sees the whole level's misses.
fn read_all(
    src: &dyn ByteSource,
    nodes: &[Child],
    len: impl Fn(usize) -> usize,
) -> Result<Vec<Vec<u8>>, String> {
    let mut first_error = None;
    let mut out = Vec::with_capacity(nodes.len());
    for (i, &(addr, _)) in nodes.iter().enumerate() {
        match src.read_vec(addr, len(i) as u64) {
            Ok(bytes) => out.push(bytes),
            Err(e) => {
                first_error.get_or_insert(e.to_string());
                out.push(Vec::new());
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn entries_used(node: &[u8]) -> usize {
    node.get(6..8)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
}

fn uint(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |v, &x| v << 8 | x as u64)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::sync::Arc;

    use hdf5_reader::messages::layout::DataLayout;
    use hdf5_reader::messages::HdfMessage;

    use super::*;
    use crate::hdf5_index::{H5Set, SourceStorage};
    use crate::source::{FileSet, FsSource};

    /// The level-by-level walk finds the same entries, in the same order, as hdf5-reader's
    /// depth-first one, on one-leaf trees and on the three- and two-level index fixtures.
    #[test]
    fn the_level_walk_matches_hdf5_reader() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let cases = [
            ("data/gzip_stack_u16.h5", "data"),
            ("data/gzip_noshuffle_u32_3d.h5", "data"),
            ("data/lz4_stack_u16.h5", "data"),
            ("data/arina_u16_data_000001.h5", "entry/data/data"),
            ("index/btree_k4.h5", "data"),
            ("index/btree_k64.h5", "data"),
        ];
        for (file, path) in cases {
            let src: Arc<dyn ByteSource> = Arc::new(FsSource::open(&root.join(file)).unwrap());
            let name = src.name().to_string();
            let set = H5Set::new(FileSet::new(vec![src.clone()]).unwrap());
            let h5 = set.open(&name).unwrap();
            let (_, ds) = set.dataset(&name, path).unwrap();
            let header = h5.get_or_parse_header(ds.address()).unwrap();
            let Some((address, dims)) = header.messages.iter().find_map(|m| match m {
                HdfMessage::DataLayout(l) => match &l.layout {
                    DataLayout::Chunked {
                        address,
                        dims,
                        chunk_indexing: None,
                        ..
                    } => Some((*address, dims.clone())),
                    _ => None,
                },
                _ => None,
            }) else {
                panic!("{file}: no version-1 chunk B-tree");
            };
            let sb = h5.superblock();
            let rank = ds.shape().len();
            let theirs = hdf5_reader::btree_v1::collect_btree_v1_leaves_storage(
                &SourceStorage::new(src.clone()),
                address,
                sb.offset_size,
                sb.length_size,
                Some(rank as u32),
                &dims,
                None,
            )
            .unwrap();
            let ours = chunk_entries(&*src, address, sb.offset_size, rank, 1 << 20, false)
                .unwrap()
                .entries;
            assert!(!ours.is_empty(), "{file}");
            assert_eq!(ours.len(), theirs.len(), "{file}");
            for (o, (key, addr)) in ours.iter().zip(&theirs) {
                let hdf5_reader::btree_v1::BTreeV1Key::RawData {
                    chunk_size,
                    filter_mask,
                    offsets,
                } = key
                else {
                    panic!("{file}: not a chunk key");
                };
                assert_eq!(
                    (o.address, o.size, o.filter_mask, o.offsets.as_slice()),
                    (*addr, *chunk_size as u64, *filter_mask, &offsets[..rank]),
                    "{file}"
                );
            }
        }
    }
}
