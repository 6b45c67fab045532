//! The browser's open leaves a chunk B-tree's leaves unread; the GPU upload reads them in
//! batches a few ahead of the chunks they list (`IndexFeed`), and the index is completed
//! afterwards. The resident must equal the CPU decode of an ordinary open, the completed
//! index that open's chunk table, and a bad leaf must fail the upload as it fails the open
//! (C-INCOMPLETE).

mod common;

use std::sync::Arc;

use common::*;
use stem4d::formats::{Acquisition, IndexFeed, OpenOptions, PartKind};
use stem4d::frames::{Correction, FrameReader, Samples};
use stem4d::gpu::{Engine, Resident};
use stem4d::hdf5_index::ChunkRef;
use stem4d::products::npy::to_bytes;
use stem4d::products::stream::Blocks;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::session::{OpenRequest, Session};
use stem4d::source::{ByteSource, FileSet, MemSource};
use stem4d::upload::memory::PlanKind;
use stem4d::upload::plan::ResidentPlan;

/// The two K = 4 index fixtures the GPU decoder takes, with the scan shape each needs.
const CASES: [(&str, Option<[usize; 2]>); 2] = [
    ("btree_k4_bslz4.h5", None),
    ("btree_k4_lz4.h5", Some([13, 23])),
];

fn bytes_of(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("index").join(name)).unwrap()
}

fn open(
    name: &str,
    bytes: &[u8],
    scan: Option<[usize; 2]>,
    defer: bool,
) -> stem4d::Result<Acquisition> {
    let src = Arc::new(MemSource::new(name, bytes.to_vec())) as Arc<dyn ByteSource>;
    let opts = OpenOptions {
        scan_shape: scan,
        dataset: None,
    };
    Acquisition::open_with(FileSet::new(vec![src])?, &opts, defer)
}

fn chunks(acq: &Acquisition) -> Vec<ChunkRef> {
    acq.parts
        .iter()
        .flat_map(|p| match &p.kind {
            PartKind::Hdf5(ix) => ix.chunks.clone(),
            _ => Vec::new(),
        })
        .collect()
}

fn cpu_frames(acq: &Acquisition) -> Vec<u32> {
    let n = acq.shape.frames();
    match FrameReader::new(acq)
        .block(0, n, Correction::default())
        .unwrap()
        .samples
    {
        Samples::Int(v) => v,
        Samples::Float(_) => panic!("integer fixtures"),
    }
}

/// The fed upload of `acq` along `plan`, uncorrected.
fn upload_fed(
    engine: &Engine,
    acq: &Acquisition,
    feed: &IndexFeed,
    plan: ResidentPlan,
) -> stem4d::Result<Option<Resident>> {
    pollster::block_on(engine.upload_fed(acq, feed, Correction::default(), plan, &mut |_, _| {}))
}

/// `name`'s bytes with the first two children of a parent of leaves swapped (rank 4: keys
/// of 8 + 8 * 5 bytes): the open sorts their chunks, a feed of one leaf a batch cannot.
fn with_two_leaves_swapped(name: &str) -> Vec<u8> {
    let mut bytes = bytes_of(name);
    let parents = nodes_of_level(&bytes, 1);
    assert!(!parents.is_empty(), "{name}: a level above the leaves");
    let (header, key, os) = (24, 48, 8);
    let child = |e: usize| parents[0] + header + e * (key + os) + key;
    let (a, b) = (child(0), child(1));
    let first: Vec<u8> = bytes[a..a + os].to_vec();
    bytes.copy_within(b..b + os, a);
    bytes[b..b + os].copy_from_slice(&first);
    bytes
}

/// `name`'s bytes with its middle leaf's signature broken, and the error the open that
/// reads that leaf gives.
fn with_a_bad_leaf(name: &str, scan: Option<[usize; 2]>) -> (Vec<u8>, stem4d::Error) {
    let mut bytes = bytes_of(name);
    let leaves = nodes_of_level(&bytes, 0);
    let bad = leaves[leaves.len() / 2];
    bytes[bad..bad + 4].copy_from_slice(b"JUNK");
    let Err(opened) = open(name, &bytes, scan, false) else {
        panic!("{name}: a bad leaf opened");
    };
    (bytes, opened)
}

/// Every batch of `feed` read by the blocks of a pass or build (none handed it back to the
/// whole index), and `acq`'s index, completed from it, the one `eager` opened.
fn completed_by_the_blocks(
    acq: &mut Acquisition,
    feed: IndexFeed,
    eager: &Acquisition,
    what: &str,
) {
    let unread: Vec<usize> = (0..feed.len()).filter(|&b| !feed.is_read(b)).collect();
    assert!(
        unread.is_empty(),
        "{what}: batches {unread:?} not read by the blocks"
    );
    pollster::block_on(acq.finish_index(feed)).unwrap();
    assert_eq!(chunks(acq), chunks(eager), "{what}");
}

/// The resident's frames, all of them.
fn resident_frames(engine: &Engine, acq: &Acquisition, res: &Resident) -> Vec<u32> {
    let n = acq.shape.frames();
    pollster::block_on(stem4d::products::gpu::frames(engine, res, 0, n)).unwrap()
}

/// Offsets of the B-tree nodes of `level` in `bytes`.
fn nodes_of_level(bytes: &[u8], level: u8) -> Vec<usize> {
    bytes
        .windows(6)
        .enumerate()
        .filter(|(_, w)| &w[..4] == b"TREE" && w[4] == 1 && w[5] == level)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn a_deferred_index_uploads_exactly_and_completes_as_an_open() {
    let Some(engine) = engine() else { return };
    for (name, scan) in CASES {
        let bytes = bytes_of(name);
        let eager = open(name, &bytes, scan, false).unwrap();
        let (want, eager_chunks) = (cpu_frames(&eager), chunks(&eager));
        assert_eq!(eager_chunks.len(), 299, "{name}");
        for per_batch in [1, 3, 32] {
            for split in [false, true] {
                let what = format!("{name}, {per_batch} leaves a batch, split {split}");
                let mut acq = open(name, &bytes, scan, true).unwrap();
                assert!(acq.index_pending() && chunks(&acq).is_empty(), "{what}");
                let feed = IndexFeed::with_batch(&acq, per_batch);
                assert!(
                    feed.len() > usize::from(per_batch < 32),
                    "{what}: {} batches",
                    feed.len()
                );
                let mut limits = engine.adapter.limits;
                let plan = ResidentPlan::new(acq.shape, acq.dtype, false, limits).unwrap();
                if split {
                    // One tile a buffer: segments whose first and last chunks come in
                    // different batches.
                    limits.max_storage_binding = plan.tile_words as u64 * 4;
                }
                let plan = ResidentPlan::new(acq.shape, acq.dtype, false, limits).unwrap();
                assert!(!split || plan.segments.len() >= 3, "{what}");
                let res = upload_fed(&engine, &acq, &feed, plan)
                    .unwrap()
                    .unwrap_or_else(|| panic!("{what}: the GPU decoder takes it all"));
                let got = resident_frames(&engine, &acq, &res);
                assert!(
                    got == want,
                    "{what}: resident frames differ from the CPU decode"
                );
                pollster::block_on(acq.finish_index(feed)).unwrap();
                assert!(!acq.index_pending(), "{what}");
                assert_eq!(chunks(&acq), eager_chunks, "{what}");
            }
        }
    }
}

/// The page's feed: batches read as the file spans of their leaves (the leaves parsed out of
/// the span, the span the window of their chunks) where the chunks lie inside, windows of
/// their own where not; exact either way, and spans used where the layout allows.
#[test]
fn leaf_spans_upload_exactly() {
    let Some(engine) = engine() else { return };
    let stream = ("stream_k32_bslz4.h5", None);
    for (name, scan) in [CASES[0], CASES[1], stream] {
        let bytes = bytes_of(name);
        let eager = open(name, &bytes, scan, false).unwrap();
        let (want, eager_chunks) = (cpu_frames(&eager), chunks(&eager));
        let mut spans_used = 0;
        for max_span in [2_000, 6_000, 20_000, 1 << 26] {
            let what = format!("{name}, spans of {max_span} bytes at most");
            let mut acq = open(name, &bytes, scan, true).unwrap();
            let feed = IndexFeed::with_spans(&acq, max_span);
            let spans = (0..feed.len()).filter(|&b| feed.span(b).is_some()).count();
            if name == stream.0 && max_span == 1 << 26 {
                // The first leaf alone (the first root, moved aside after its chunks), one
                // span to the last leaf, the last leaf alone (nothing bounds its span).
                let kinds: Vec<bool> = (0..feed.len()).map(|b| feed.span(b).is_some()).collect();
                assert_eq!(kinds, [false, true, false], "{what}");
            }
            assert!(
                spans > 0 || max_span < 20_000,
                "{what}: no batch has a span"
            );
            let plan =
                ResidentPlan::new(acq.shape, acq.dtype, false, engine.adapter.limits).unwrap();
            let res = upload_fed(&engine, &acq, &feed, plan)
                .unwrap()
                .unwrap_or_else(|| panic!("{what}: the GPU decoder takes it all"));
            spans_used += res.leaf_span_windows;
            let got = resident_frames(&engine, &acq, &res);
            assert!(
                got == want,
                "{what}: resident frames differ from the CPU decode"
            );
            pollster::block_on(acq.finish_index(feed)).unwrap();
            assert_eq!(chunks(&acq), eager_chunks, "{what}");
            eprintln!(
                "{what}: {spans} span batches, {} windows from spans",
                res.leaf_span_windows
            );
        }
        // Frames written one by one keep each leaf among its chunks: the spans hold them.
        assert!(
            spans_used > 0 || name != stream.0,
            "{name}: no window came from a leaf span"
        );
    }
}

/// An Arina master linking two data files, each a tree of two levels: both parts' leaves
/// deferred, fed in frame order across the parts (alone, and as spans), exact either way.
#[test]
fn a_deferred_arina_acquisition_uploads_exactly() {
    let Some(engine) = engine() else { return };
    let names = [
        "arina_stream_master.h5",
        "arina_stream_data_000001.h5",
        "arina_stream_data_000002.h5",
    ];
    let open_all = |defer: bool| {
        let files = names
            .iter()
            .map(|n| Arc::new(MemSource::new(*n, bytes_of(n))) as Arc<dyn ByteSource>)
            .collect();
        let opts = OpenOptions {
            scan_shape: Some([20, 24]),
            dataset: None,
        };
        Acquisition::open_with(FileSet::new(files).unwrap(), &opts, defer).unwrap()
    };
    let eager = open_all(false);
    assert_eq!(eager.parts.len(), 2);
    let (want, eager_chunks) = (cpu_frames(&eager), chunks(&eager));
    type FeedOf = fn(&Acquisition) -> IndexFeed;
    let ways: [(&str, FeedOf); 3] = [
        ("batches of 2 leaves", |a| IndexFeed::with_batch(a, 2)),
        ("spans of 4 KB", |a| IndexFeed::with_spans(a, 4_000)),
        ("spans of a window", |a| IndexFeed::with_spans(a, 1 << 26)),
    ];
    for (what, feed_of) in ways {
        let mut acq = open_all(true);
        assert!(
            acq.parts
                .iter()
                .all(|p| matches!(&p.kind, PartKind::Hdf5(ix) if ix.pending.is_some())),
            "{what}: both parts deferred"
        );
        let feed = feed_of(&acq);
        let plan = ResidentPlan::new(acq.shape, acq.dtype, false, engine.adapter.limits).unwrap();
        let res = upload_fed(&engine, &acq, &feed, plan)
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the GPU decoder takes it all"));
        assert!(resident_frames(&engine, &acq, &res) == want, "{what}");
        pollster::block_on(acq.finish_index(feed)).unwrap();
        assert_eq!(chunks(&acq), eager_chunks, "{what}");
        eprintln!("{what}: {} windows from spans", res.leaf_span_windows);
    }
}

/// Leaves whose parent lists them out of key order: an open sorts their chunks, the fed
/// upload cannot take them in frame order and hands the acquisition back; the completed
/// index is the open's, and the ordinary upload of it is exact.
#[test]
fn leaves_out_of_key_order_go_back_to_the_whole_index() {
    let Some(engine) = engine() else { return };
    let (name, scan) = CASES[0];
    let bytes = with_two_leaves_swapped(name);
    let eager = open(name, &bytes, scan, false).unwrap();
    let mut acq = open(name, &bytes, scan, true).unwrap();
    let feed = IndexFeed::with_batch(&acq, 1);
    let plan = ResidentPlan::new(acq.shape, acq.dtype, false, engine.adapter.limits).unwrap();
    let fed = upload_fed(&engine, &acq, &feed, plan.clone()).unwrap();
    assert!(
        fed.is_none(),
        "leaves out of order were uploaded as they came"
    );
    // The ordinary upload refuses an index that is not complete.
    let refused = pollster::block_on(engine.upload_plan(
        &acq,
        Correction::default(),
        plan.clone(),
        &mut |_, _| {},
    ));
    assert!(refused.is_err());
    pollster::block_on(acq.finish_index(feed)).unwrap();
    assert_eq!(chunks(&acq), chunks(&eager));
    let res =
        pollster::block_on(engine.upload_plan(&acq, Correction::default(), plan, &mut |_, _| {}))
            .unwrap();
    let got = resident_frames(&engine, &acq, &res);
    assert!(
        got == cpu_frames(&eager),
        "the whole index's upload is exact"
    );
}

/// A leaf that is not a B-tree node fails the fed upload with the message the open that
/// reads it gives: the file, the data set and the node.
#[test]
fn a_bad_leaf_fails_the_upload_as_it_fails_the_open() {
    let Some(engine) = engine() else { return };
    // Leaves read in batches of three, and (frames written one by one) parsed out of the
    // span of their chunks.
    type FeedOf = fn(&Acquisition) -> IndexFeed;
    let ways: [(&str, Option<[usize; 2]>, FeedOf); 4] = [
        (CASES[0].0, CASES[0].1, |a| IndexFeed::with_batch(a, 3)),
        (CASES[1].0, CASES[1].1, |a| IndexFeed::with_batch(a, 3)),
        ("stream_k32_bslz4.h5", None, |a| {
            IndexFeed::with_spans(a, 20_000)
        }),
        ("stream_k32_bslz4.h5", None, |a| {
            IndexFeed::with_spans(a, 1 << 26)
        }),
    ];
    for (name, scan, feed_of) in ways {
        let (bytes, opened) = with_a_bad_leaf(name, scan);
        let acq = open(name, &bytes, scan, true).unwrap();
        let feed = feed_of(&acq);
        let plan = ResidentPlan::new(acq.shape, acq.dtype, false, engine.adapter.limits).unwrap();
        let uploaded = upload_fed(&engine, &acq, &feed, plan);
        let Err(e) = uploaded else {
            panic!("{name}: a bad leaf uploaded");
        };
        assert_eq!(e.to_string(), opened.to_string(), "{name}");
        assert!(
            e.to_string().contains(name) && e.to_string().contains("no TREE signature"),
            "{e}"
        );
    }
}

/// A session on `acq` along `req`.
fn session_of(engine: &Engine, acq: Acquisition, req: &OpenRequest) -> stem4d::Result<Session> {
    pollster::block_on(Session::open(engine, acq, req, 0.0, &mut |_, _, _| {}))
}

/// The streaming open (bad pixels masked): one block of the whole scan, as no budget is set.
fn streamed() -> OpenRequest {
    OpenRequest {
        bin: 1,
        mask_bad_pixels: true,
        memory_plan: Some(PlanKind::Streaming),
        ..Default::default()
    }
}

/// What a session shows, to compare: its fit, bad pixels and products.
fn shown(engine: &Engine, s: &mut Session, what: &str) -> Vec<Vec<u8>> {
    let [cr, cc, r] = s.bf_fit;
    let mut out = vec![
        format!("{:?}", s.bf_fit).into_bytes(),
        serde_json::to_vec(&s.profile.bad_pixels).unwrap(),
    ];
    let corr = Correction {
        mask_bad_pixels: true,
        bin: 1,
    };
    for kind in [
        ProductKind::Total,
        ProductKind::Bf,
        ProductKind::Com,
        ProductKind::MaxDp,
    ] {
        let mut p = ProductParams::new(kind);
        p.center = Some([cr, cc]);
        p.radius = Some(r.max(1.0));
        let a = pollster::block_on(s.product(engine, &p, corr))
            .unwrap_or_else(|e| panic!("{what} {}: {e}", kind.name()));
        out.push(to_bytes(&a));
    }
    out
}

/// The mean-pattern pass of a streamed open (`stream::settle`) over `acq` in GPU-decoded
/// blocks of `rows` scan rows, its deferred leaves from `feed`: the mean, bad pixels and
/// zeroed mask, as bytes to compare.
fn settled(
    engine: &Engine,
    acq: &Acquisition,
    feed: Option<&IndexFeed>,
    rows: usize,
) -> stem4d::Result<Vec<u8>> {
    let blocks = Blocks {
        rows,
        gpu_decode: true,
    };
    let corr = Correction {
        mask_bad_pixels: true,
        bin: 1,
    };
    let (mean, found, zeroed) = pollster::block_on(stem4d::products::stream::settle(
        engine,
        (acq, feed),
        corr,
        blocks,
        &mut |_, _| {},
    ))?;
    Ok(format!("{mean:?} {found:?} {zeroed:?}").into_bytes())
}

/// A streamed session of a file whose open deferred its B-tree leaves reads them in its
/// first pass, as the resident upload does (one block of the whole scan: the spans of
/// leaves and chunks). Its fit, bad pixels and products are those of the session opened
/// with the whole index, no stage read the leaves before the pass, and the index is
/// complete after it. A pass in several blocks takes the leaves (alone, or in spans) as its
/// blocks reach them, each block passing over the batches the blocks before it read: the
/// same mean pattern, and the whole index after it.
#[test]
fn a_streamed_session_reads_a_deferred_index_as_it_goes() {
    let Some(engine) = engine() else { return };
    for (name, scan) in [CASES[0], CASES[1], ("stream_k32_bslz4.h5", None)] {
        let bytes = bytes_of(name);
        let mut plain = session_of(
            &engine,
            open(name, &bytes, scan, false).unwrap(),
            &streamed(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut fed = session_of(
            &engine,
            open(name, &bytes, scan, true).unwrap(),
            &streamed(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let plan = &fed.profile.memory_plan;
        assert!(
            plan.kind == PlanKind::Streaming && plan.gpu_decode,
            "{name}: {plan:?}"
        );
        assert_eq!(plan.blocks, Some(1), "{name}");
        let stages: Vec<&str> = fed.profile.stages.iter().map(|s| s.name.as_str()).collect();
        assert!(
            !stages.contains(&"chunk index leaves"),
            "{name}: the leaves were read before the pass: {stages:?}"
        );
        assert!(!fed.acq.index_pending(), "{name}");
        assert_eq!(chunks(&fed.acq), chunks(&plain.acq), "{name}");
        let (a, b) = (
            shown(&engine, &mut plain, name),
            shown(&engine, &mut fed, name),
        );
        assert!(a == b, "{name}: the fed session shows something else");

        let eager = open(name, &bytes, scan, false).unwrap();
        type FeedOf = fn(&Acquisition) -> IndexFeed;
        let ways: [(usize, &str, FeedOf); 5] = [
            (2, "1 leaf a batch", |a| IndexFeed::with_batch(a, 1)),
            (3, "32 leaves a batch", |a| IndexFeed::with_batch(a, 32)),
            (5, "2 leaves a batch", |a| IndexFeed::with_batch(a, 2)),
            (2, "spans of 4 KB", |a| IndexFeed::with_spans(a, 4_000)),
            (3, "spans of a window", |a| {
                IndexFeed::with_spans(a, 1 << 26)
            }),
        ];
        for (rows, how, feed_of) in ways {
            let what = format!("{name}, blocks of {rows} rows, {how}");
            let want = settled(&engine, &eager, None, rows).unwrap();
            let mut acq = open(name, &bytes, scan, true).unwrap();
            let feed = feed_of(&acq);
            let got = settled(&engine, &acq, Some(&feed), rows).unwrap();
            assert!(got == want, "{what}: another mean pattern");
            completed_by_the_blocks(&mut acq, feed, &eager, &what);
        }
    }
}

/// Leaves out of key order stop a streamed pass's feed: the blocks go on through the whole
/// index, and the session shows what the open with the whole index shows. A bad leaf fails
/// the streamed open, and a pass in blocks, with the open's own message.
#[test]
fn a_streamed_session_of_a_deferred_index_falls_back_and_fails_as_the_open() {
    let Some(engine) = engine() else { return };
    let (name, scan) = CASES[0];
    let bytes = with_two_leaves_swapped(name);
    let eager = open(name, &bytes, scan, false).unwrap();
    let deferred = open(name, &bytes, scan, true).unwrap();
    // In batches of one leaf, the second batch comes before the first.
    let one_a_batch = IndexFeed::with_batch(&deferred, 1);
    let plan = ResidentPlan::new(deferred.shape, deferred.dtype, false, engine.adapter.limits);
    let fed = upload_fed(&engine, &deferred, &one_a_batch, plan.unwrap());
    assert!(fed.unwrap().is_none(), "{name}: the feed is as planned");
    for rows in [2, 100] {
        let want = settled(&engine, &eager, None, rows).unwrap();
        let got = settled(&engine, &deferred, Some(&one_a_batch), rows).unwrap();
        assert!(
            got == want,
            "{name}, blocks of {rows} rows: another mean pattern"
        );
    }
    let mut plain = session_of(&engine, eager, &streamed()).unwrap();
    let mut fed = session_of(&engine, deferred, &streamed()).unwrap();
    assert_eq!(chunks(&fed.acq), chunks(&plain.acq), "{name}");
    let (a, b) = (
        shown(&engine, &mut plain, name),
        shown(&engine, &mut fed, name),
    );
    assert!(a == b, "{name}: the session shows something else");

    for (name, scan) in [CASES[0], ("stream_k32_bslz4.h5", None)] {
        let (bytes, opened) = with_a_bad_leaf(name, scan);
        let acq = open(name, &bytes, scan, true).unwrap();
        let Err(e) = session_of(&engine, acq, &streamed()) else {
            panic!("{name}: a bad leaf streamed");
        };
        assert_eq!(e.to_string(), opened.to_string(), "{name}");
        let acq = open(name, &bytes, scan, true).unwrap();
        let Err(e) = settled(&engine, &acq, Some(&IndexFeed::with_batch(&acq, 2)), 2) else {
            panic!("{name}: a bad leaf streamed in blocks");
        };
        assert_eq!(e.to_string(), opened.to_string(), "{name} in blocks");
    }
}

/// Every packed segment of a compressed resident, read back.
fn packed_bytes(engine: &Engine, res: &Resident) -> Vec<Vec<u8>> {
    let packed = res.packed.as_ref().expect("a compressed resident");
    packed
        .buffers
        .iter()
        .map(|b| pollster::block_on(engine.read_back(b, b.size())).unwrap())
        .collect()
}

/// A compressed resident built from a file whose open deferred its leaves reads them in its
/// GPU-decoded blocks (in spans, or alone), as a streamed pass does: the same packed bytes
/// as the build from the whole index, every batch read by the blocks. A session that picks
/// the compressed plan reads no leaves before it and shows what the session with the
/// whole index shows.
#[test]
fn a_compressed_build_reads_a_deferred_index_as_it_goes() {
    let Some(engine) = engine() else { return };
    let quiet = &mut |_: usize, _: usize| {};
    for (name, scan) in [CASES[0], CASES[1], ("stream_k32_bslz4.h5", None)] {
        let bytes = bytes_of(name);
        let eager = open(name, &bytes, scan, false).unwrap();
        let plan = stem4d::gpu::plan_of(&eager, 1, engine.adapter.limits).unwrap();
        let cols = eager.shape.scan[1];
        type FeedOf = fn(&Acquisition) -> IndexFeed;
        let ways: [(usize, &str, FeedOf); 3] = [
            (1, "spans of 4 KB", |a| IndexFeed::with_spans(a, 4_000)),
            (3, "spans of a window", |a| {
                IndexFeed::with_spans(a, 1 << 26)
            }),
            (2, "3 leaves a batch", |a| IndexFeed::with_batch(a, 3)),
        ];
        for (want_rows, how, feed_of) in ways {
            let rows = stem4d::upload::packed::block_rows(want_rows, cols, plan.tile as usize);
            let what = format!("{name}, blocks of {rows} rows, {how}");
            // The compressed resident in blocks of `rows`, decoded on the GPU.
            let mut build = |acq, feed| {
                let corr = Correction::default();
                pollster::block_on(engine.upload_packed((acq, feed), corr, rows, true, None, quiet))
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
            };
            let whole = build(&eager, None);
            let mut acq = open(name, &bytes, scan, true).unwrap();
            let feed = feed_of(&acq);
            let built = build(&acq, Some(&feed));
            assert!(
                packed_bytes(&engine, &built) == packed_bytes(&engine, &whole),
                "{what}: other packed bytes"
            );
            completed_by_the_blocks(&mut acq, feed, &eager, &what);
        }
        let req = OpenRequest {
            memory_plan: Some(PlanKind::Compressed),
            ..streamed()
        };
        let mut plain = session_of(&engine, open(name, &bytes, scan, false).unwrap(), &req)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut fed = session_of(&engine, open(name, &bytes, scan, true).unwrap(), &req)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(fed.profile.memory_plan.kind, PlanKind::Compressed, "{name}");
        let stages: Vec<&str> = fed.profile.stages.iter().map(|s| s.name.as_str()).collect();
        assert!(
            !stages.contains(&"chunk index leaves"),
            "{name}: the leaves were read before the build: {stages:?}"
        );
        assert_eq!(chunks(&fed.acq), chunks(&plain.acq), "{name}");
        let (a, b) = (
            shown(&engine, &mut plain, name),
            shown(&engine, &mut fed, name),
        );
        assert!(
            a == b,
            "{name}: the compressed session shows something else"
        );
    }
}
