//! The browser opens acquisitions over `Gathering` sources (reads fetched together, the open
//! retried until it misses nothing). Its result must be exactly that of an ordinary open —
//! the same chunk tables and info, or the same error — for every fixture and every bad
//! input, and a chunk B-tree must cost a round per level, not a read per node.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use serde_json::Value;
use stem4d::formats::{Acquisition, IndexFeed, OpenOptions, PartKind};
use stem4d::source::{ByteSource, FileSet, FsSource};

/// What an open produced: the info JSON and every chunk table, or the error message.
fn outcome(r: &stem4d::Result<Acquisition>) -> String {
    match r {
        Ok(acq) => {
            let chunks: Vec<String> = acq
                .parts
                .iter()
                .map(|p| match &p.kind {
                    PartKind::Hdf5(ix) => format!("{:?} {:?}", ix.layout, ix.chunks),
                    _ => String::new(),
                })
                .collect();
            format!(
                "{} {chunks:?}",
                serde_json::to_string(&stem4d::formats::info::Info::of(acq, false)).unwrap()
            )
        }
        Err(e) => format!("error: {e}"),
    }
}

/// Outcomes of a plain and a gathered open of `files`, and the rounds the gathered one took.
/// The gathered open is also run as the browser's is, its B-tree leaves deferred and read
/// afterwards in batches of two; the outcome is the gathered one's only if both agree.
fn both_of(files: Vec<Arc<dyn ByteSource>>, opts: &OpenOptions) -> (String, String, usize) {
    let plain = FileSet::new(files.clone()).and_then(|set| Acquisition::open(set, opts));
    let deferred = pollster::block_on(async {
        let (opened, _) = Acquisition::open_gathered(files.clone(), opts, true).await;
        let mut acq = opened?;
        let feed = IndexFeed::with_batch(&acq, 2);
        acq.finish_index(feed).await?;
        Ok(acq)
    });
    let (gathered, rounds) = pollster::block_on(Acquisition::open_gathered(files, opts, false));
    let (gathered, deferred) = (outcome(&gathered), outcome(&deferred));
    let agreed = if gathered == deferred {
        gathered
    } else {
        format!("gathered: {gathered}\ndeferred leaves: {deferred}")
    };
    (outcome(&plain), agreed, rounds)
}

fn both(paths: &[PathBuf], scan_shape: Option<[usize; 2]>) -> (String, String, usize) {
    let files = paths
        .iter()
        .map(|p| Arc::new(FsSource::open(p).unwrap()) as Arc<dyn ByteSource>)
        .collect();
    let opts = OpenOptions {
        scan_shape,
        dataset: None,
    };
    both_of(files, &opts)
}

#[test]
fn a_gathered_open_is_an_ordinary_open() {
    let mut cases: Vec<(String, Vec<PathBuf>, Option<[usize; 2]>)> = Vec::new();
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let paths = fixture_paths(fx);
        if paths.iter().all(|p| p.exists()) {
            cases.push((fx["name"].to_string(), paths, usize2(&fx["scan_shape"])));
        }
    }
    let bad: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("bad/manifest.json")).unwrap(),
    )
    .unwrap();
    for case in bad["cases"].as_array().unwrap() {
        let paths = case["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| fixtures().join("bad").join(f.as_str().unwrap()))
            .collect();
        cases.push((case["name"].to_string(), paths, usize2(&case["scan_shape"])));
    }
    assert!(cases.len() > 30, "{} cases", cases.len());
    let mut errors = 0;
    for (name, paths, scan_shape) in &cases {
        let (plain, gathered, rounds) = both(paths, *scan_shape);
        assert_eq!(
            plain, gathered,
            "{name}: gathered open differs ({rounds} rounds)"
        );
        assert!(rounds < 64, "{name}: {rounds} rounds");
        errors += usize::from(plain.starts_with("error"));
    }
    assert!(
        errors > 10,
        "the bad inputs fail the same way ({errors} errors)"
    );
}

/// 50 B-tree nodes on 3 levels (K = 4), and nodes of 115 entries (K = 64, read again whole
/// once their size is known), spread over ~1 MB: rounds grow with levels, not nodes.
#[test]
fn a_chunk_b_tree_costs_a_round_per_level() {
    for (name, most) in [("btree_k4.h5", 12), ("btree_k64.h5", 12)] {
        let path = fixtures().join("index").join(name);
        let (plain, gathered, rounds) = both(std::slice::from_ref(&path), None);
        assert_eq!(plain, gathered, "{name}");
        assert!(rounds <= most, "{name}: {rounds} rounds");
        // The browser's open stops above the leaves: a round fewer, the leaves left unread.
        let src = Arc::new(FsSource::open(&path).unwrap()) as Arc<dyn ByteSource>;
        let (deferred, deferred_rounds) = pollster::block_on(Acquisition::open_gathered(
            vec![src],
            &OpenOptions::default(),
            true,
        ));
        assert!(deferred.unwrap().index_pending(), "{name}");
        assert!(
            deferred_rounds < rounds,
            "{name}: {deferred_rounds} rounds deferred"
        );
        let acq = open_paths(&[path], None, None).unwrap();
        assert_eq!(acq.shape.as_array(), [15, 20, 24, 24]);
        let PartKind::Hdf5(ix) = &acq.parts[0].kind else {
            panic!("{name}: not HDF5")
        };
        assert_eq!(ix.chunks.len(), 300, "{name}");
        // Every value is a function of its flat index: each chunk was found where it is.
        let raw = stem4d::frames::FrameReader::new(&acq)
            .read_raw(0, 300)
            .unwrap();
        for (i, v) in raw.chunks_exact(2).enumerate() {
            let want = (i as u64 * 40503 % 65536) as u16;
            assert_eq!(u16::from_le_bytes([v[0], v[1]]), want, "{name} sample {i}");
        }
        eprintln!("{name}: {rounds} rounds");
    }
}

/// Outcomes of a plain and a gathered open of in-memory files.
fn both_in_memory(files: &[(&str, Vec<u8>)]) -> (String, String) {
    use stem4d::source::MemSource;
    let files = files
        .iter()
        .map(|(n, b)| Arc::new(MemSource::new(*n, b.clone())) as Arc<dyn ByteSource>)
        .collect();
    let (plain, gathered, _) = both_of(files, &OpenOptions::default());
    (plain, gathered)
}

/// EMPAD: the browser reads the .xml beside the .raw as an ordinary open does (its scan
/// shape and calibration), and a malformed one fails the same way.
#[test]
fn an_empad_raw_with_its_xml_opens_alike() {
    let raw = vec![0u8; 6 * 130 * 128 * 4];
    let xml = b"<root><raw_file filename=\"acq.raw\"/><pix_x>3</pix_x><pix_y>2</pix_y>\
<iom_measurements><high_voltage>200000</high_voltage></iom_measurements></root>"
        .to_vec();
    let (plain, gathered) = both_in_memory(&[("acq.raw", raw.clone()), ("acq.xml", xml)]);
    assert_eq!(plain, gathered);
    assert!(
        plain.contains("\"shape\":[2,3,128,128]") && plain.contains("\"energy_ev\":200000.0"),
        "{plain}"
    );
    let (plain, gathered) =
        both_in_memory(&[("acq.raw", raw), ("acq.xml", b"<root><pix_x>".to_vec())]);
    assert_eq!(plain, gathered);
    assert!(plain.starts_with("error: acq.xml: "), "{plain}");
}

mod corrupted_trees {
    use super::*;
    use proptest::prelude::*;

    /// The byte offsets of the B-tree nodes of the 3-level index fixture.
    fn fixture() -> (Vec<u8>, Vec<usize>) {
        let bytes = std::fs::read(fixtures().join("index/btree_k4.h5")).unwrap();
        let nodes = bytes
            .windows(4)
            .enumerate()
            .filter(|(_, w)| w == b"TREE")
            .map(|(i, _)| i)
            .collect();
        (bytes, nodes)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

        /// Flipped bits in the nodes of a 3-level chunk B-tree (signatures, levels, entry
        /// counts, keys, child addresses: cycles and out-of-file pointers included) never
        /// panic or hang, fail with one line naming the file, and a gathered open ends
        /// exactly as a plain one.
        #[test]
        fn corrupted_b_tree_nodes_fail_cleanly_and_alike(
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0usize..520, 1u8..=255), 1..4),
        ) {
            let (mut bytes, nodes) = fixture();
            prop_assume!(!nodes.is_empty());
            for (node, at, mask) in &flips {
                let k = (nodes[node.index(nodes.len())] + at).min(bytes.len() - 1);
                bytes[k] ^= mask;
            }
            let r = std::panic::catch_unwind(|| both_in_memory(&[("btree_k4.h5", bytes)]));
            prop_assert!(r.is_ok(), "panicked on {flips:?}");
            let (plain, gathered) = r.unwrap();
            prop_assert_eq!(&plain, &gathered);
            if let Some(msg) = plain.strip_prefix("error: ") {
                prop_assert!(msg.contains("btree_k4.h5") && !msg.contains('\n'), "{}", msg);
            }
        }
    }
}
