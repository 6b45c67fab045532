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

/// Every chunk entry of the tree rooted at `root` (`os`: the file's offset size; `rank`: the
/// data set's rank; keys hold `rank + 1` offsets, the last one for the element size). A
/// level holding more than `max_entries` nodes or entries is a corrupt (cyclic) tree: a tree
/// over the data set's chunk grid never does.
pub fn chunk_entries(
    src: &dyn ByteSource,
    root: u64,
    os: u8,
    rank: usize,
    max_entries: usize,
) -> Result<Vec<ChunkEntry>, String> {
    let os = os as usize;
    if !matches!(os, 2 | 4 | 8) {
        return Err(format!("offset size {os} is not 2, 4 or 8"));
    }
    let key = 8 + 8 * (rank + 1);
    let header = 8 + 2 * os;
    let node_len = |children: usize| header + children * (key + os) + key;
    let mut level: Vec<(u64, Option<u8>)> = vec![(root, None)];
    let mut entries = Vec::new();
    while !level.is_empty() {
        if level.len() > max_entries || entries.len() > max_entries {
            return Err(format!(
                "more than {max_entries} B-tree nodes or chunks for the chunk grid (a cycle?)"
            ));
        }
        let mut nodes = read_all(src, &level, |_| node_len(USUAL_CHILDREN))?;
        // Nodes with more children than usual: read again whole, together.
        let used: Vec<usize> = nodes.iter().map(|n| entries_used(n)).collect();
        let long: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].len() < node_len(used[i]))
            .collect();
        if !long.is_empty() {
            let again: Vec<(u64, Option<u8>)> = long.iter().map(|&i| level[i]).collect();
            let whole = read_all(src, &again, |k| node_len(used[long[k]]))?;
            for (i, bytes) in long.into_iter().zip(whole) {
                nodes[i] = bytes;
            }
        }
        let mut next = Vec::new();
        for ((addr, want), node) in level.iter().zip(&nodes) {
            let bad = |what: String| format!("B-tree node at {addr}: {what}");
            if node.len() < header {
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
            if node.len() < node_len(n) {
                return Err(bad(format!(
                    "truncated: its {n} entries run past the end of the file"
                )));
            }
            for e in 0..n {
                let k = &node[header + e * (key + os)..];
                let child = uint(&k[key..key + os]);
                if node_level == 0 {
                    entries.push(ChunkEntry {
                        address: child,
                        size: u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as u64,
                        filter_mask: u32::from_le_bytes([k[4], k[5], k[6], k[7]]),
                        offsets: (0..rank).map(|d| uint(&k[8 + 8 * d..16 + 8 * d])).collect(),
                    });
                } else {
                    next.push((child, Some(node_level - 1)));
                }
            }
        }
        level = next;
    }
    Ok(entries)
}

/// Read each node (`len(i)` bytes, cut at the end of the file), asking for all of them
/// before failing on the first error: a gathering source sees the whole level's misses.
fn read_all(
    src: &dyn ByteSource,
    nodes: &[(u64, Option<u8>)],
    len: impl Fn(usize) -> usize,
) -> Result<Vec<Vec<u8>>, String> {
    let mut first_error = None;
    let mut out = Vec::with_capacity(nodes.len());
    for (i, &(addr, _)) in nodes.iter().enumerate() {
        let n = (len(i) as u64).min(src.len().saturating_sub(addr));
        match src.read_vec(addr, n) {
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
            let ours = chunk_entries(&*src, address, sb.offset_size, rank, 1 << 20).unwrap();
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
