//! Prepared acquisitions (`formats::prepared`, decision 0037): written from the fixtures,
//! reopened, and every product the same bytes as from the files, on the CPU reference and
//! on the GPU (where the payload is copied into the resident as it is); a corrupted,
//! truncated or tampered container refused by name, never half-used.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use stem4d::formats::prepared::Payload;
use stem4d::formats::{Acquisition, OpenOptions};
use stem4d::frames::Correction;
use stem4d::products::npy::to_bytes;
use stem4d::source::{ByteSource, FileSet, FsSource};
use stem4d::upload::prepare::{write, write_with, Preparer};

/// The error of `r`, which must have failed.
fn refused<T>(r: stem4d::error::Result<T>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stem4d-prepared-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn open_prepared(path: &Path) -> stem4d::error::Result<Acquisition> {
    let src: std::sync::Arc<dyn ByteSource> = std::sync::Arc::new(FsSource::open(path)?);
    Acquisition::open(FileSet::new(vec![src])?, &OpenOptions::default())
}

/// Small blocks, so that every fixture has several and a tile range crosses them.
const BLOCK: u64 = 4096;

const FIXTURES: [&str; 8] = [
    "arina_u16",
    "arina_u8",
    "arina_u32",
    "hot_stack_u16",
    "emd_f32",
    "empad_hot",
    "mib_raw_r6",
    "gzip_noshuffle_u32_3d",
];

/// `acq` written at `out` with a payload of `payload`, in small blocks.
fn write_as(
    acq: &Acquisition,
    out: &Path,
    payload: Payload,
) -> stem4d::error::Result<stem4d::formats::prepared::Description> {
    write_with(
        Preparer::with_payload(acq.clone(), BLOCK, payload),
        out,
        &mut |_, _| {},
    )
}

#[test]
fn a_prepared_acquisition_gives_the_products_of_its_files() {
    let dir = temp_dir("same");
    let engine = engine();
    for (name, payload) in FIXTURES
        .iter()
        .flat_map(|n| [(*n, Payload::Smallest), (*n, Payload::Raw)])
    {
        let fx = fixture_named(name);
        let acq = open_fixture(&fx);
        let out = dir.join(format!("{name}.stem4d"));
        let d = write_as(&acq, &out, payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Counts are packed unless asked raw; float32 is always as it is.
        assert_eq!(
            d.layout.is_packed(),
            payload == Payload::Smallest && !acq.dtype.is_float(),
            "{name} {payload:?}"
        );
        let name = &format!("{name} {payload:?}");
        assert!(
            d.blocks.len() > 1 || acq.shape.frames() <= 32,
            "{name}: {} blocks",
            d.blocks.len()
        );
        let back = open_prepared(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back.format, stem4d::formats::Format::Prepared);
        assert_eq!((back.shape, back.dtype), (acq.shape, acq.dtype), "{name}");
        assert_eq!(
            back.pixel_mask, acq.pixel_mask,
            "{name}: the files' bad pixels"
        );
        assert_eq!(
            serde_json::to_value(&back.calibration).unwrap(),
            serde_json::to_value(&acq.calibration).unwrap(),
            "{name}: calibration"
        );
        for p in fx["products"].as_array().unwrap() {
            let (params, corr) = params(p["kind"].as_str().unwrap(), &p["params"]);
            let want = stem4d::cpu::compute(&acq, &params, corr).unwrap();
            let got = stem4d::cpu::compute(&back, &params, corr)
                .unwrap_or_else(|e| panic!("{name} {}: {e}", p["ref"]));
            assert!(
                to_bytes(&got) == to_bytes(&want),
                "{name} {}: CPU differs",
                p["ref"]
            );
        }
        let Some(engine) = &engine else { continue };
        // The GPU's side of each upload timed, as `bench gpu` asks: the products below
        // come from uploads with their batches stamped.
        let timed = engine.time_upload_batches(true);
        for corr in [
            Correction::default(),
            Correction {
                mask_bad_pixels: true,
                bin: 1,
            },
            Correction {
                mask_bad_pixels: false,
                bin: 2,
            },
        ] {
            let (a, b) = match (
                pollster::block_on(engine.upload(&acq, corr)),
                pollster::block_on(engine.upload(&back, corr)),
            ) {
                (Ok(a), Ok(b)) => (a, b),
                // Refused alike (a binned sum past uint32), each naming its own file.
                (Err(x), Err(y)) => {
                    let (x, y) = (x.to_string(), y.to_string());
                    // (through the GPU decoder or the CPU, worded a little apart)
                    let head = |s: &str| {
                        s.split_once(": ")
                            .map(|t| t.1.chars().take(16).collect::<String>())
                    };
                    assert_eq!(head(&x), head(&y), "{name} {corr:?}: {x} / {y}");
                    assert!(
                        y.contains(&*out.file_name().unwrap().to_string_lossy()),
                        "{y}"
                    );
                    continue;
                }
                (x, y) => panic!("{name} {corr:?}: {:?} against {:?}", x.err(), y.err()),
            };
            // Without a bin the payload is the resident: copied, nothing decoded (masking
            // then zeroes the file's bad pixels and sentinels on the GPU).
            let copied = b
                .upload_times
                .0
                .iter()
                .any(|(s, _)| s.starts_with("read + check"));
            assert_eq!(copied, corr.bin == 1, "{name} {corr:?}");
            // A reopen's batches are timed on the GPU where asked and the device stamps
            // inside encoders (lavapipe does): one batch of at most 16 blocks here.
            if copied && timed {
                let g = b.gpu_batches.as_ref().expect("the reopen's batches timed");
                assert!(g.batches >= 1 && g.busy_ms > 0.0, "{name}: {g:?}");
            }
            for p in fx["products"].as_array().unwrap() {
                let (params, c) = params(p["kind"].as_str().unwrap(), &p["params"]);
                if c != corr {
                    continue;
                }
                let run = |acq: &Acquisition, res| {
                    pollster::block_on(stem4d::products::gpu::compute_resident(
                        engine, acq, res, &params,
                    ))
                };
                match (run(&acq, &a), run(&back, &b)) {
                    (Ok(x), Ok(y)) => assert!(
                        to_bytes(&x) == to_bytes(&y),
                        "{name} {}: GPU differs",
                        p["ref"]
                    ),
                    (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string()),
                    (x, y) => panic!("{name} {}: {x:?} against {y:?}", p["ref"]),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A packed payload reopened as a compressed resident is kept as it is (decision 0055):
/// its blocks joined into segments, their indexes moved, the file's bad pixels and
/// saturation sentinels zeroed in place where masking is on; every product the same bytes
/// as from the compressed resident the files build, and as the raw resident's.
#[test]
fn a_packed_payload_kept_packed_gives_the_products_of_its_files() {
    use stem4d::products::ProductParams;
    let Some(engine) = engine() else { return };
    let dir = temp_dir("kept");
    let masked = Correction {
        mask_bad_pixels: true,
        bin: 1,
    };
    for name in FIXTURES {
        let fx = fixture_named(name);
        let acq = open_fixture(&fx);
        if acq.dtype.is_float() {
            continue;
        }
        let back = prepared_a_tile_a_block(&acq, &dir.join(format!("{name}.stem4d")));
        for corr in [Correction::default(), masked] {
            let products: Vec<ProductParams> = fx["products"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| params(p["kind"].as_str().unwrap(), &p["params"]))
                .filter(|(_, c)| *c == corr)
                .map(|(p, _)| p)
                .collect();
            let segments = kept_as_built(&engine, name, (&acq, &back), corr, &products);
            assert_eq!(segments, 1, "{name}: a few tiles, one segment");
        }
    }
    // 22 tiles of 16 positions, a block each: segments of 16 blocks and of 6.
    let acq = stem4d::formats::synthetic::open_compressed([13, 27, 9, 11]).unwrap();
    let back = prepared_a_tile_a_block(&acq, &dir.join("synthetic.stem4d"));
    let products = five_products([4.3, 5.6], 2.5);
    for corr in [Correction::default(), masked] {
        let segments = kept_as_built(&engine, "synthetic", (&acq, &back), corr, &products);
        assert_eq!(segments, 2, "synthetic: 22 blocks");
    }
    // Bindings of five tiles' raw bytes (3,168 bytes a tile): segments of five blocks, so
    // a batch of 16 blocks spans four segments, hashed and rebased one segment at a time
    // (decision 0057).
    let mut small = common::engine().expect("the engine comes up again");
    small.adapter.limits.max_storage_binding = 5 * 16 * 99 * 2;
    for corr in [Correction::default(), masked] {
        let name = "synthetic, five tiles a binding";
        let segments = kept_as_built(&small, name, (&acq, &back), corr, &products);
        assert_eq!(segments, 5, "{name}: 22 blocks");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A packed payload's first memory plan is the compressed resident that keeps it, its sizes
/// exact; a raw payload, a bin or a budget it passes leave the plans as they were, and a
/// session opens the packed file kept unless the resident plan is named.
#[test]
fn a_packed_payload_is_kept_unless_the_resident_is_asked_for() {
    use stem4d::session::{OpenRequest, Session};
    use stem4d::upload::memory::PlanKind;
    let Some(engine) = engine() else { return };
    let dir = temp_dir("kept-plan");
    // 64 tiles, a block each: four segments, whose scratch is a quarter of the raw bytes.
    let acq = stem4d::formats::synthetic::open_compressed([32, 32, 9, 11]).unwrap();
    let (packed, raw) = (dir.join("packed.stem4d"), dir.join("raw.stem4d"));
    prepared_a_tile_a_block(&acq, &packed);
    write_as(&acq, &raw, Payload::Raw).unwrap();
    let limits = engine.adapter.limits;
    let plans = |path: &Path, bin, budget| {
        let a = open_prepared(path).unwrap();
        let corr = Correction {
            mask_bad_pixels: false,
            bin,
        };
        stem4d::gpu::memory_plans(&a, corr, limits, budget)
    };
    let kept = plans(&packed, 1, None);
    assert_eq!(kept[0].kind, PlanKind::Compressed, "{kept:?}");
    assert!(
        kept[0].fits && kept[0].note.contains("kept packed"),
        "{kept:?}"
    );
    assert_eq!(kept[1].kind, PlanKind::Resident, "{kept:?}");
    assert!(kept[0].payload_bytes < kept[1].payload_bytes, "{kept:?}");
    assert_eq!(
        kept.iter()
            .filter(|p| p.kind == PlanKind::Compressed)
            .count(),
        1
    );
    assert_eq!(plans(&raw, 1, None)[0].kind, PlanKind::Resident);
    assert_eq!(plans(&packed, 2, None)[0].kind, PlanKind::Resident);
    let tight = plans(&packed, 1, Some(kept[0].peak_bytes - 1));
    assert!(
        !tight[0].fits && tight[0].kind == PlanKind::Compressed,
        "{tight:?}"
    );
    let open = |plan| {
        let req = OpenRequest {
            bin: 1,
            memory_plan: plan,
            ..Default::default()
        };
        let back = open_prepared(&packed).unwrap();
        pollster::block_on(Session::open(&engine, back, &req, 0.0, &mut |_, _, _| {})).unwrap()
    };
    let (mut by_default, mut resident) = (open(None), open(Some(PlanKind::Resident)));
    // A small acquisition, whose scratch is most of its raw bytes, is resident first.
    let small = dir.join("small.stem4d");
    write_as(
        &open_fixture(&fixture_named("arina_u16")),
        &small,
        Payload::Smallest,
    )
    .unwrap();
    let order: Vec<_> = plans(&small, 1, None).iter().map(|p| p.kind).collect();
    assert_eq!(order[..2], [PlanKind::Resident, PlanKind::Compressed]);
    assert_eq!(by_default.profile.memory_plan.kind, PlanKind::Compressed);
    assert_eq!(resident.profile.memory_plan.kind, PlanKind::Resident);
    let p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Com);
    let corr = Correction::default();
    let a = pollster::block_on(by_default.product(&engine, &p, corr)).unwrap();
    let b = pollster::block_on(resident.product(&engine, &p, corr)).unwrap();
    assert!(to_bytes(&a) == to_bytes(&b), "kept and expanded differ");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Total, BF, CoM, mean and max pattern, the disk at `center` of `radius` where one is read.
fn five_products(center: [f64; 2], radius: f64) -> Vec<stem4d::products::ProductParams> {
    use stem4d::products::{ProductKind, ProductParams};
    let kinds = [
        ProductKind::Total,
        ProductKind::Bf,
        ProductKind::Com,
        ProductKind::MeanDp,
        ProductKind::MaxDp,
    ];
    kinds
        .into_iter()
        .map(|kind| {
            let mut p = ProductParams::new(kind);
            p.center = Some(center);
            p.radius = Some(radius);
            p
        })
        .collect()
}

/// `acq` written at `out` with a packed payload, a tile a block, and opened again.
fn prepared_a_tile_a_block(acq: &Acquisition, out: &Path) -> Acquisition {
    let one_tile = Preparer::with_payload(acq.clone(), 1, Payload::Smallest);
    write_with(one_tile, out, &mut |_, _| {}).unwrap();
    open_prepared(out).unwrap()
}

/// The compressed residents of `acq` (built from its files) and of `back` (its prepared
/// file, kept) under `corr` give the raw resident's bytes for every one of `products`;
/// the kept one's segments.
fn kept_as_built(
    engine: &stem4d::gpu::Engine,
    name: &str,
    (acq, back): (&Acquisition, &Acquisition),
    corr: Correction,
    products: &[stem4d::products::ProductParams],
) -> usize {
    let tile = 256 / stem4d::formats::prepared::bits_of(acq.dtype) as usize;
    let rows = stem4d::upload::packed::block_rows(2, acq.shape.scan[1], tile);
    let compressed = |a: &Acquisition| {
        let quiet = &mut |_, _| {};
        pollster::block_on(engine.upload_packed((a, None), corr, rows, false, None, quiet))
            .unwrap_or_else(|e| panic!("{name} {corr:?}: {e}"))
    };
    let (built, kept) = (compressed(acq), compressed(back));
    let raw = pollster::block_on(engine.upload(acq, corr)).unwrap();
    // Kept: read, checked and copied, never decoded or encoded.
    let steps: Vec<&str> = kept.upload_times.0.iter().map(|(s, _)| *s).collect();
    assert!(
        steps.iter().any(|s| s.starts_with("read + check")) && !steps.contains(&"encode"),
        "{name}: {steps:?}"
    );
    let (b, k) = (
        built.packed.as_ref().unwrap(),
        kept.packed.as_ref().unwrap(),
    );
    assert_eq!(b.raw_bytes, k.raw_bytes, "{name}");
    assert_eq!(kept.plan.shape, raw.plan.shape, "{name}");
    for params in products {
        let run = |a: &Acquisition, res| {
            pollster::block_on(stem4d::products::gpu::compute_resident(
                engine, a, res, params,
            ))
        };
        let want = run(acq, &raw);
        for (what, got) in [("built", run(acq, &built)), ("kept", run(back, &kept))] {
            let kind = params.kind;
            match (&want, got) {
                (Ok(x), Ok(y)) => assert!(
                    to_bytes(x) == to_bytes(&y),
                    "{name} {corr:?} {kind:?} {what}: GPU differs"
                ),
                (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string()),
                (x, y) => panic!("{name} {kind:?} {what}: {x:?} against {y:?}"),
            }
        }
    }
    kept.plan.segments.len()
}

/// `acq` kept packed as a compressed resident, whole (a block of scan rows a reopen).
fn kept_whole(
    engine: &stem4d::gpu::Engine,
    acq: &Acquisition,
) -> stem4d::error::Result<stem4d::gpu::Resident> {
    let quiet = &mut |_, _| {};
    pollster::block_on(engine.upload_packed(
        (acq, None),
        Correction::default(),
        1,
        false,
        None,
        quiet,
    ))
}

/// Flip one byte at `at` of `path`.
fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_prepared_acquisition_is_refused_by_name() {
    let dir = temp_dir("damaged");
    let fx = fixture_named("arina_u16");
    let acq = open_fixture(&fx);
    let good = dir.join("good.stem4d");
    let d = write(&acq, &good, BLOCK, None, &mut |_, _| {}).unwrap();
    let copy = |name: &str| {
        let p = dir.join(name);
        std::fs::copy(&good, &p).unwrap();
        p
    };
    // A byte of the second block: the open succeeds (the header and description are
    // whole), every read of that block is refused, on the CPU and on the GPU.
    let corrupt = copy("corrupt.stem4d");
    flip(&corrupt, d.blocks[1].offset + 17);
    let acq_bad = open_prepared(&corrupt).expect("the description is whole");
    let p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Total);
    let e = stem4d::cpu::compute(&acq_bad, &p, Correction::default()).unwrap_err();
    let said = e.to_string();
    assert!(
        said.contains("corrupt.stem4d")
            && said.contains("payload block 1")
            && said.contains("SHA-256"),
        "{said}"
    );
    if let Some(engine) = engine() {
        let e = refused(pollster::block_on(
            engine.upload(&acq_bad, Correction::default()),
        ));
        assert!(e.contains("payload block 1"), "{e}");
        // Kept packed as a compressed resident, refused alike.
        let e = refused(kept_whole(&engine, &acq_bad));
        assert!(
            e.contains("corrupt.stem4d") && e.contains("payload block 1"),
            "{e}"
        );
        // A byte of a block's data (past its index, which the CPU still reads): only the
        // block's pieces SHA-256 on the GPU sees it, expanded or kept (decision 0056).
        let in_data = copy("in_data.stem4d");
        let det_len = acq.shape.det_len();
        let index =
            stem4d::formats::prepared::packed_sectors::index_bytes(d.blocks[1].tiles, det_len);
        assert!(d.blocks[1].bytes > index + 8, "block 1 has data");
        flip(&in_data, d.blocks[1].offset + index + 5);
        let bad = open_prepared(&in_data).unwrap();
        let kept = kept_whole(&engine, &bad);
        for e in [
            refused(pollster::block_on(
                engine.upload(&bad, Correction::default()),
            )),
            refused(kept),
        ] {
            assert!(
                e.contains("in_data.stem4d")
                    && e.contains("payload block 1")
                    && e.contains("SHA-256"),
                "{e}"
            );
        }
        // The good file's blocks are hashed on the GPU where they are kept, on the CPU
        // where they are expanded (decision 0057).
        let whole = open_prepared(&good).expect("the good file opens");
        let kept = kept_whole(&engine, &whole).unwrap();
        let expanded = pollster::block_on(engine.upload(&whole, Correction::default())).unwrap();
        let steps = |res: &stem4d::gpu::Resident| -> Vec<&'static str> {
            res.upload_times.0.iter().map(|(s, _)| *s).collect()
        };
        let (on_gpu, on_cpu) = (steps(&kept), steps(&expanded));
        assert!(
            on_gpu.contains(&"blocks' SHA-256 on the GPU (waited)")
                && on_gpu.contains(&"read + check structure + stage"),
            "{on_gpu:?}"
        );
        assert!(
            on_cpu.contains(&"read + check + stage")
                && !on_cpu.contains(&"blocks' SHA-256 on the GPU (waited)"),
            "{on_cpu:?}"
        );
        // The engine goes on: the whole file uploads after the refused one (the refused
        // upload's staged writes went to buffers let go with it).
        let whole = open_prepared(&good).expect("the good file opens");
        pollster::block_on(engine.upload(&whole, Correction::default()))
            .expect("the good file uploads after a refused one");
    }
    // Cut short: refused at the open, by name.
    let short = copy("short.stem4d");
    let len = std::fs::metadata(&short).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&short)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let said = refused(open_prepared(&short));
    assert!(
        said.contains("short.stem4d") && said.contains("truncated"),
        "{said}"
    );
    // The description altered: its hash no longer matches the header's.
    let tampered = copy("tampered.stem4d");
    let json_at = u64::from_le_bytes(
        std::fs::read(&tampered).unwrap()[16..24]
            .try_into()
            .unwrap(),
    );
    flip(&tampered, json_at + 40);
    let said = refused(open_prepared(&tampered));
    assert!(
        said.contains("tampered.stem4d") && said.contains("SHA-256"),
        "{said}"
    );
    // Only the start of a header.
    let stub = dir.join("stub.stem4d");
    std::fs::write(&stub, &std::fs::read(&good).unwrap()[..20]).unwrap();
    let said = refused(open_prepared(&stub));
    assert!(
        said.contains("stub.stem4d") && said.contains("truncated"),
        "{said}"
    );
    // Another container version.
    let newer = copy("newer.stem4d");
    flip(&newer, 9);
    let said = refused(open_prepared(&newer));
    assert!(said.contains("version"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrite the SHA-256 of block `k` of the prepared file `path` to match its bytes, and the
/// description's in the header: what a writer other than stem4d's could make.
fn rehash_block(path: &Path, d: &stem4d::formats::prepared::Description, k: usize) {
    use sha2::{Digest, Sha256};
    let mut bytes = std::fs::read(path).unwrap();
    let b = &d.blocks[k];
    let block = &bytes[b.offset as usize..(b.offset + b.bytes) as usize];
    let fresh: String = Sha256::digest(block)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let at = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    let len = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
    let json = String::from_utf8(bytes[at..at + len].to_vec()).unwrap();
    let json = json.replacen(&b.sha256, &fresh, 1);
    assert_eq!(json.len(), len);
    bytes[at..at + len].copy_from_slice(json.as_bytes());
    let digest = Sha256::digest(json.as_bytes());
    bytes[32..64].copy_from_slice(&digest);
    std::fs::write(path, bytes).unwrap();
}

/// A file of container version 1 (position-tiled payloads, before packed ones) still opens
/// and gives its products; a packed payload claiming version 1 is refused.
#[test]
fn a_version_1_container_still_opens() {
    use sha2::{Digest, Sha256};
    let dir = temp_dir("version1");
    let acq = open_fixture(&fixture_named("arina_u16"));
    // `as` (a raw or packed file) relabelled version 1 in its header and description.
    let as_version_1 = |payload: Payload, name: &str| {
        let p = dir.join(name);
        write_as(&acq, &p, payload).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        let at = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
        let len = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
        let json = String::from_utf8(bytes[at..at + len].to_vec()).unwrap();
        let json = json.replacen("\"version\": 2", "\"version\": 1", 1);
        assert_eq!(json.len(), len);
        bytes[at..at + len].copy_from_slice(json.as_bytes());
        let digest = Sha256::digest(json.as_bytes());
        bytes[32..64].copy_from_slice(&digest);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let old = open_prepared(&as_version_1(Payload::Raw, "old.stem4d")).unwrap();
    let total = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Total);
    let want = stem4d::cpu::compute(&acq, &total, Correction::default()).unwrap();
    let got = stem4d::cpu::compute(&old, &total, Correction::default()).unwrap();
    assert!(to_bytes(&got) == to_bytes(&want));
    let said = refused(open_prepared(&as_version_1(
        Payload::Smallest,
        "odd.stem4d",
    )));
    assert!(
        said.contains("odd.stem4d") && said.contains("version 1"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A packed block whose SHA-256 matches but whose index is not one the encoder makes (a
/// group's data moved, a width past the samples' bits) is refused by name and block on
/// the CPU and the GPU, never decoded out of bounds; the engine goes on after it.
#[test]
fn a_packed_block_with_a_malformed_index_is_refused() {
    let dir = temp_dir("malformed");
    let acq = open_fixture(&fixture_named("arina_u8"));
    let good = dir.join("good.stem4d");
    let d = write(&acq, &good, BLOCK, None, &mut |_, _| {}).unwrap();
    assert!(d.layout.is_packed());
    let k = d.blocks.len() - 1;
    let engine = engine();
    // Group 1's start word, then group 0's first width code set to 12 (u8 samples).
    for (name, at, value) in [("moved.stem4d", 8u64, 0x01u8), ("wide.stem4d", 4, 0x0c)] {
        let p = dir.join(name);
        std::fs::copy(&good, &p).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let i = (d.blocks[k].offset + at) as usize;
        match value {
            0x0c => bytes[i] = (bytes[i] & 0xf0) | 0x0c,
            v => bytes[i] ^= v,
        }
        std::fs::write(&p, bytes).unwrap();
        rehash_block(&p, &d, k);
        let bad = open_prepared(&p).expect("the description is whole");
        let total = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Total);
        let said = stem4d::cpu::compute(&bad, &total, Correction::default())
            .unwrap_err()
            .to_string();
        assert!(
            said.contains(name) && said.contains(&format!("block {k} is malformed")),
            "{said}"
        );
        if let Some(engine) = &engine {
            let said = refused(pollster::block_on(
                engine.upload(&bad, Correction::default()),
            ));
            assert!(said.contains(&format!("block {k} is malformed")), "{said}");
            let whole = open_prepared(&good).unwrap();
            pollster::block_on(engine.upload(&whole, Correction::default()))
                .expect("the good file uploads after a refused one");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The page checks a packed block's structure from its index alone (`accept` given the
/// block's first `accepted_prefix_bytes`: the
/// block stays in the buffer its Worker read it into): every block is judged as whole,
/// as written and with its index changed (a group's data moved, a width past the samples'
/// bits), and the prefix is the index, shorter than the block.
#[test]
fn a_block_judged_from_its_index_alone_is_judged_as_whole() {
    let dir = temp_dir("prefix");
    let acq = open_fixture(&fixture_named("arina_u8"));
    let good = dir.join("good.stem4d");
    let d = write(&acq, &good, BLOCK, None, &mut |_, _| {}).unwrap();
    let opened = open_prepared(&good).unwrap();
    let stem4d::formats::PartKind::Tiled(payload) = &opened.parts[0].kind else {
        panic!("a prepared acquisition's part is its payload");
    };
    let file = std::fs::read(&good).unwrap();
    let mut refused_changes = 0;
    for (k, b) in d.blocks.iter().enumerate() {
        let n = payload.accepted_prefix_bytes(k) as usize;
        assert!(
            n > 0 && n < b.bytes as usize,
            "block {k}: prefix {n} of {}",
            b.bytes
        );
        for change in [None, Some((8usize, 0x01u8)), Some((4, 0x0c))] {
            let mut block = file[b.offset as usize..(b.offset + b.bytes) as usize].to_vec();
            match change {
                Some((at, 0x0c)) => block[at] = (block[at] & 0xf0) | 0x0c,
                Some((at, v)) => block[at] ^= v,
                None => {}
            }
            let whole = payload.accept("f", k, &block).map_err(|e| e.to_string());
            let prefix = payload
                .accept("f", k, &block[..n])
                .map_err(|e| e.to_string());
            assert_eq!(whole, prefix, "block {k}, change {change:?}");
            assert_eq!(
                whole.is_ok(),
                change.is_none(),
                "block {k}, change {change:?}"
            );
            refused_changes += whole.is_err() as usize;
        }
    }
    assert_eq!(refused_changes, 2 * d.blocks.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The page's suite opens `tests/fixtures/data/arina_u16.stem4d` (`stem4d prepare` of the
/// arina_u16 fixture) and its compare grid `arina_u16_crop.stem4d` (`--crop 1,4,0,5`);
/// the browser's kernel tests reopen `synthetic_u16_blocks.stem4d`. Writing them again
/// gives the same bytes, so they stay what the writer makes (regenerate them with
/// `STEM4D_WRITE_FIXTURES=1` when the container changes).
#[test]
fn the_prepared_fixtures_are_what_prepare_writes() {
    let dir = temp_dir("fixture");
    let whole = open_fixture(&fixture_named("arina_u16"));
    let crop = stem4d::contract::Region {
        r0: 1,
        r1: 4,
        c0: 0,
        c1: 5,
    };
    let full = stem4d::upload::prepare::BLOCK_BYTES;
    // And a synthetic acquisition in blocks of one tile (the browser's kernel tests take it
    // through the page's reopen: 20 blocks, two batches).
    let synthetic = stem4d::formats::synthetic::open([16, 20, 13, 11]).unwrap();
    for (name, acq, block_bytes) in [
        ("arina_u16.stem4d", whole.clone(), full),
        (
            "arina_u16_crop.stem4d",
            whole.crop_scan(crop).unwrap(),
            full,
        ),
        ("synthetic_u16_blocks.stem4d", synthetic, BLOCK),
    ] {
        let out = dir.join(name);
        let d = write(&acq, &out, block_bytes, None, &mut |_, _| {}).unwrap();
        if block_bytes == BLOCK {
            assert_eq!(d.blocks.len(), 20, "{name}");
        }
        let committed = fixtures().join("data").join(name);
        let same = std::fs::read(&committed).is_ok_and(|c| c == std::fs::read(&out).unwrap());
        if !same && std::env::var_os("STEM4D_WRITE_FIXTURES").is_some() {
            std::fs::copy(&out, &committed).unwrap();
            continue;
        }
        assert!(
            same,
            "{} is stale: prepare it again (STEM4D_WRITE_FIXTURES=1 writes it)",
            committed.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Within a small budget a prepared acquisition is compressed or streamed from its blocks of
/// whole tiles (copied as they are where a block of rows starts and ends on a tile), with
/// the products of the files' resident.
#[test]
fn a_prepared_acquisition_within_a_budget_gives_the_same_products() {
    use stem4d::products::{ProductKind, ProductParams};
    use stem4d::session::{OpenRequest, Session};
    use stem4d::upload::memory::PlanKind;
    let Some(engine) = engine() else { return };
    let dir = temp_dir("budget");
    for name in ["arina_u16", "hot_stack_u16", "arina_u8"] {
        let acq = open_fixture(&fixture_named(name));
        let out = dir.join(format!("{name}.stem4d"));
        write(&acq, &out, BLOCK, None, &mut |_, _| {}).unwrap();
        let open = |acq: Acquisition, budget, memory_plan| {
            let req = OpenRequest {
                bin: 1,
                memory_budget: budget,
                memory_plan,
                ..Default::default()
            };
            pollster::block_on(Session::open(&engine, acq, &req, 0.0, &mut |_, _, _| {}))
                .unwrap_or_else(|e| panic!("{name} {memory_plan:?}: {e}"))
        };
        // A block of whole rows on tile boundaries is copied too; one off them is not.
        let back = open_prepared(&out).unwrap();
        let [rows, cols] = back.shape.scan;
        let tile = 256 / stem4d::formats::prepared::bits_of(back.dtype) as usize;
        let step = tile / gcd(tile, cols);
        for (r0, r1, copied) in [(step, rows, true), (1, rows, step == 1)] {
            if r0 >= rows {
                continue;
            }
            let mut block = back.clone();
            block.set_crop(back.scan_rows_crop(r0, r1).unwrap());
            let res = pollster::block_on(engine.upload(&block, Correction::default())).unwrap();
            let got = res
                .upload_times
                .0
                .iter()
                .any(|(s, _)| s.starts_with("read + check"));
            assert_eq!(
                got, copied,
                "{name}: rows {r0}..{r1} of {rows}, tiles of {tile}"
            );
            let mut sub = acq.clone();
            sub.set_crop(acq.scan_rows_crop(r0, r1).unwrap());
            let want = pollster::block_on(engine.upload(&sub, Correction::default())).unwrap();
            let total = ProductParams::new(ProductKind::Total);
            let run = |a: &Acquisition, r| {
                pollster::block_on(stem4d::products::gpu::compute_resident(
                    &engine, a, r, &total,
                ))
                .unwrap()
            };
            assert!(
                to_bytes(&run(&block, &res)) == to_bytes(&run(&sub, &want)),
                "{name}"
            );
        }
        let mut plain = open(acq, None, None);
        for (plan, budget) in [
            (PlanKind::Compressed, 1 << 20),
            (PlanKind::Streaming, 262144),
        ] {
            let mut within = open(open_prepared(&out).unwrap(), Some(budget), Some(plan));
            assert_eq!(within.profile.memory_plan.kind, plan, "{name}");
            let [cr, cc, r] = plain.bf_fit;
            for p in five_products([cr, cc], r.max(1.0)) {
                let kind = p.kind;
                let corr = Correction::default();
                let a = pollster::block_on(plain.product(&engine, &p, corr)).unwrap();
                let b = pollster::block_on(within.product(&engine, &p, corr))
                    .unwrap_or_else(|e| panic!("{name} {plan:?} {kind:?}: {e}"));
                assert!(
                    to_bytes(&a) == to_bytes(&b),
                    "{name} {plan:?}: {kind:?} differs"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A prepared file saved from a session keeps its bin, masking and BF fit: `info` says
/// them, and a reopen that asks for them (the page's chooser and drop) views it so, with
/// the products of the files under that correction; one that does not ask keeps the
/// request's. The CLI's file has none.
#[test]
fn a_session_saves_its_settings_and_a_reopen_takes_them_when_asked() {
    use stem4d::products::{ProductKind, ProductParams};
    use stem4d::session::{OpenRequest, Session};
    let Some(engine) = engine() else { return };
    let dir = temp_dir("session");
    let acq = open_fixture(&fixture_named("hot_stack_u16"));
    let viewed = |acq: Acquisition, req: &OpenRequest| {
        pollster::block_on(Session::open(&engine, acq, req, 0.0, &mut |_, _, _| {})).unwrap()
    };
    let masked_bin2 = OpenRequest {
        bin: 2,
        mask_bad_pixels: true,
        ..Default::default()
    };
    let original = viewed(acq.clone(), &masked_bin2);
    let saved = original.saved_settings();
    assert_eq!((saved.bin, saved.mask_bad_pixels), (2, true));
    assert_eq!(saved.bf_fit, Some(original.bf_fit));
    let out = dir.join("session.stem4d");
    write(&acq, &out, BLOCK, Some(saved.clone()), &mut |_, _| {}).unwrap();
    let back = open_prepared(&out).unwrap();
    assert_eq!(back.saved_session(), Some(&saved));
    let text = stem4d::formats::info::Info::of(&back, false).text();
    assert!(
        text.contains("saved with    bin 2, bad-pixel masking on, BF fit centre"),
        "{text}"
    );
    let plain = OpenRequest {
        bin: 1,
        ..Default::default()
    };
    let asked = OpenRequest {
        saved_settings: true,
        ..plain.clone()
    };
    let mut reopened = viewed(back.clone(), &asked);
    let corr = reopened.correction();
    assert_eq!((corr.bin, corr.mask_bad_pixels), (2, true));
    assert_eq!(reopened.bf_fit, original.bf_fit);
    let mut original = original;
    for kind in [ProductKind::Total, ProductKind::MaxDp, ProductKind::Com] {
        let p = ProductParams::new(kind);
        let got = pollster::block_on(reopened.product(&engine, &p, corr)).unwrap();
        let want = pollster::block_on(original.product(&engine, &p, corr)).unwrap();
        assert!(to_bytes(&got) == to_bytes(&want), "{kind:?}");
    }
    let unasked = viewed(back, &plain);
    assert_eq!(unasked.correction(), Correction::default());
    // The CLI's (and Python's) prepared files hold no session.
    assert_eq!(
        open_prepared(&fixtures().join("data/arina_u16.stem4d"))
            .unwrap()
            .saved_session(),
        None
    );
    let _ = std::fs::remove_dir_all(&dir);
}
