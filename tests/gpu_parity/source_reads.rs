//! Reads of the source, counted: the GPU upload reads neighbouring chunks in one call, and
//! indexing reads the metadata in pages.

use crate::common::*;
use stem4d::products::gpu as products;

/// Reads counted per source: the GPU upload must not read chunk by chunk (in a browser each
/// File API read costs ~0.5 ms: 262,144 chunk reads took 155 s on the H200 machine).
struct Counting {
    inner: std::sync::Arc<dyn stem4d::source::ByteSource>,
    reads: std::sync::atomic::AtomicUsize,
}

impl stem4d::source::ByteSource for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stem4d::Result<()> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
}

#[test]
fn gpu_upload_reads_neighbouring_chunks_in_one_call() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use stem4d::formats::synthetic;
    use stem4d::source::{ByteSource, FileSet};
    let Some(engine) = engine() else { return };
    // 60 chunks stored back to back in one "file".
    let acq = synthetic::open_compressed([6, 10, 40, 36]).unwrap();
    let counting = Arc::new(Counting {
        inner: acq.parts[0].source.clone(),
        reads: Default::default(),
    });
    let mut acq = acq;
    acq.parts[0].source = counting.clone();
    acq.files = FileSet::new(vec![counting.clone() as Arc<dyn ByteSource>]).unwrap();
    assert!(stem4d::upload::gpu_decode::supported(
        &acq,
        Default::default()
    ));
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    assert_eq!(
        counting.reads.load(Ordering::Relaxed),
        1,
        "one read for one window"
    );
    let got = pollster::block_on(products::frames(&engine, &res, 0, 60)).unwrap();
    let det = acq.shape.det_len();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(
            *v,
            synthetic::sample(acq.shape, i / det, i % det) as u32,
            "sample {i}"
        );
    }
}

/// Opening an acquisition reads its metadata (superblock, object headers, chunk B-trees)
/// through a page cache: small reads of neighbouring bytes cost one read of the source.
#[test]
fn indexing_reads_metadata_in_pages() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use stem4d::formats::{Acquisition, OpenOptions};
    use stem4d::source::{ByteSource, FileSet, FsSource};
    let fx = fixture_named("gzip_stack_u16");
    let counting: Vec<Arc<Counting>> = fixture_paths(&fx)
        .iter()
        .map(|p| {
            Arc::new(Counting {
                inner: Arc::new(FsSource::open(p).unwrap()),
                reads: Default::default(),
            })
        })
        .collect();
    let files = FileSet::new(
        counting
            .iter()
            .map(|c| c.clone() as Arc<dyn ByteSource>)
            .collect(),
    )
    .unwrap();
    let acq = Acquisition::open(files, &OpenOptions::default()).unwrap();
    let reads: usize = counting
        .iter()
        .map(|c| c.reads.load(Ordering::Relaxed))
        .sum();
    let chunks = match &acq.parts[0].kind {
        stem4d::formats::PartKind::Hdf5(ix) => ix.chunks.len(),
        _ => unreachable!(),
    };
    eprintln!("{reads} reads to index {chunks} chunks");
    // The whole fixture is a few pages: without the cache every header and node is a read.
    assert!(reads <= 4, "{reads} reads to index {chunks} chunks");
}
