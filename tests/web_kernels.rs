//! The WGSL kernels inside Chromium's WebGPU (SwiftShader in CI), through wasm-bindgen-test:
//! the browser's shader compiler (Tint) sees exactly the text naga validated natively, so
//! gaps between naga's validation and a real WebGPU implementation surface here. Fixture
//! bytes are embedded; every product is compared with the CPU reference in the same module.
#![cfg(target_arch = "wasm32")]

use std::sync::Arc;

use stem4d::contract::Region;
use stem4d::display::gpu::{Plane, PlaneSource};
use stem4d::formats::{Acquisition, IndexFeed, OpenOptions};
use stem4d::frames::{FrameReader, Samples};
use stem4d::gpu::{Engine, Resident};
use stem4d::products::gpu as products;
use stem4d::products::judge::judge;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::source::in_flight::{ReadKey, ReadsInFlight};
use stem4d::source::{ByteSource, FileSet, JsPiece, JsRead, MemSource, PieceCheck};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// A fixture's name and bytes, from `tests/fixtures/data/` or the folder given.
macro_rules! fixture {
    ($name:literal) => {
        fixture!("data", $name)
    };
    ($dir:literal, $name:literal) => {
        (
            $name,
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/",
                $dir,
                "/",
                $name
            ))
            .as_slice(),
        )
    };
}

fn open(files: &[(&str, &[u8])], scan: Option<[usize; 2]>) -> Acquisition {
    let sources: Vec<Arc<dyn ByteSource>> = files
        .iter()
        .map(|(n, b)| Arc::new(MemSource::new(*n, b.to_vec())) as Arc<dyn ByteSource>)
        .collect();
    let opts = OpenOptions {
        scan_shape: scan,
        dataset: None,
    };
    Acquisition::open(FileSet::new(sources).expect("file set"), &opts).expect("fixture opens")
}

/// How [`PiecedSource`] hands out the pieces it is asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Delivery {
    /// Each piece as JS buffers of this many bytes (odd-sized here, so that header words
    /// straddle two buffers and buffers start off word boundaries), unwalked.
    Split(usize),
    /// As asked, its chunks walked as a pool Worker walks them.
    Walked,
    /// As asked, every other piece unwalked (a Worker that could not walk).
    HalfWalked,
    /// As `Walked`, but a prepared file's block 1 judged malformed by its Worker.
    Refusing,
    /// As `Walked`, each read answered through a promise kept in flight as the page's pool
    /// source keeps it (`ReadsInFlight`), so that a read let go is taken by the next that
    /// asks for the same pieces; every read posted is counted in [`POOL_POSTS`].
    Pooled,
}

/// A file the way the browser's pool delivers it to the GPU decoder, its reads cut at
/// [`WALKED_PIECE`] bytes (a few chunks, so that a window comes in many pieces).
struct PiecedSource {
    mem: MemSource,
    bytes: Vec<u8>,
    delivery: Delivery,
    in_flight: ReadsInFlight,
}

// SAFETY: the tests are built for wasm32 without the `atomics` target feature: one thread,
// so the JS promises `in_flight` holds are never shared across threads.
#[cfg(not(target_feature = "atomics"))]
unsafe impl Send for PiecedSource {}
#[cfg(not(target_feature = "atomics"))]
unsafe impl Sync for PiecedSource {}

thread_local! {
    /// The ranges of every read a [`Delivery::Pooled`] source posted, in order.
    static POOL_POSTS: std::cell::RefCell<Vec<(u64, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Where walked reads are cut: a few of the fixtures' chunks (~230 bytes each).
const WALKED_PIECE: u64 = 500;

/// The most pieces one window was read in.
static MOST_PIECES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl ByteSource for PiecedSource {
    fn js_piece(&self) -> u64 {
        WALKED_PIECE
    }
    fn name(&self) -> &str {
        self.mem.name()
    }
    fn len(&self) -> u64 {
        self.mem.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stem4d::error::Result<()> {
        self.mem.read_at(offset, buf)
    }
    fn read_js(
        &self,
        pieces: Vec<JsPiece>,
    ) -> Option<stem4d::source::LocalFuture<'_, stem4d::error::Result<Vec<JsRead>>>> {
        if self.delivery == Delivery::Pooled {
            return Some(self.pooled(pieces));
        }
        let mut out = Vec::new();
        MOST_PIECES.fetch_max(pieces.len(), std::sync::atomic::Ordering::Relaxed);
        for (k, p) in pieces.into_iter().enumerate() {
            let span = &self.bytes[p.offset as usize..(p.offset + p.len) as usize];
            if let Some(check) = p.check {
                out.push(checked_read(span, check, self.delivery, k));
                continue;
            }
            // A leaf span's pieces come unwalked: nobody knows their chunks yet.
            let Some(jobs) = p.walk else {
                let buffers = match self.delivery {
                    Delivery::Split(n) => span.chunks(n).collect(),
                    _ => vec![span],
                };
                out.extend(buffers.into_iter().map(|b| JsRead {
                    bytes: js_sys::Uint8Array::from(b),
                    walk: None,
                    checked: None,
                }));
                continue;
            };
            match self.delivery {
                Delivery::Split(n) => out.extend(span.chunks(n).map(|b| JsRead {
                    bytes: js_sys::Uint8Array::from(b),
                    walk: None,
                    checked: None,
                })),
                Delivery::HalfWalked if k % 2 == 1 => out.push(JsRead {
                    bytes: js_sys::Uint8Array::from(span),
                    walk: None,
                    checked: None,
                }),
                Delivery::Walked | Delivery::HalfWalked | Delivery::Refusing | Delivery::Pooled => {
                    out.push(walked_read(js_sys::Uint8Array::from(span), &jobs))
                }
            }
        }
        Some(Box::pin(std::future::ready(Ok(out))))
    }
    fn walk_js(
        &self,
        pieces: Vec<(js_sys::Uint8Array, Vec<u32>)>,
    ) -> Option<stem4d::source::LocalFuture<'_, stem4d::error::Result<Vec<JsRead>>>> {
        if self.delivery == Delivery::HalfWalked {
            // A pool that cannot walk: the viewer walks the spans itself.
            return None;
        }
        // As the pool's Workers walk the pieces of a leaf span sent back to them: each
        // buffer moves (the view the caller holds is left empty, as after a postMessage).
        let out = pieces
            .into_iter()
            .map(|(piece, jobs)| walked_read(js_sys::Uint8Array::new(&transfer(&piece)), &jobs))
            .collect();
        Some(Box::pin(std::future::ready(Ok(out))))
    }
}

impl PiecedSource {
    /// [`Delivery::Pooled`]'s read of `pieces`: posted (counted) unless the same pieces are
    /// in flight, answered walked once the promise settles.
    fn pooled(
        &self,
        pieces: Vec<JsPiece>,
    ) -> stem4d::source::LocalFuture<'_, stem4d::error::Result<Vec<JsRead>>> {
        let key = ReadKey::of(&pieces);
        let span = pieces.first().map_or((0, 0), |p| {
            let last = pieces.last().map_or(p.offset, |q| q.offset + q.len);
            (p.offset, last - p.offset)
        });
        let promise = self.in_flight.promise(&key, || {
            POOL_POSTS.with(|p| p.borrow_mut().push(span));
            Ok(js_sys::Promise::resolve(&wasm_bindgen::JsValue::NULL))
        });
        let out: Vec<JsRead> = pieces
            .iter()
            .map(|p| {
                let span = &self.bytes[p.offset as usize..(p.offset + p.len) as usize];
                match &p.walk {
                    Some(jobs) => walked_read(js_sys::Uint8Array::from(span), jobs),
                    None => JsRead {
                        bytes: js_sys::Uint8Array::from(span),
                        walk: None,
                        checked: None,
                    },
                }
            })
            .collect();
        Box::pin(async move {
            let answered = wasm_bindgen_futures::JsFuture::from(promise?).await;
            self.in_flight.answered(&key);
            answered.map_err(|_| stem4d::error::Error::Gpu("a pooled read failed".into()))?;
            Ok(out)
        })
    }
}

/// `piece`'s buffer moved to a new one, as `postMessage` transfers it (the old is detached).
fn transfer(piece: &js_sys::Uint8Array) -> js_sys::ArrayBuffer {
    let clone: js_sys::Function =
        js_sys::Reflect::get(&js_sys::global(), &"structuredClone".into())
            .expect("structuredClone")
            .into();
    let buffer = piece.buffer();
    let options = js_sys::Object::new();
    let list = js_sys::Array::of1(&buffer);
    js_sys::Reflect::set(&options, &"transfer".into(), &list).expect("set");
    let moved = clone
        .call2(&wasm_bindgen::JsValue::NULL, &buffer, &options)
        .expect("transfer");
    assert_eq!(piece.length(), 0, "the buffer moved");
    moved.into()
}

/// A prepared file's block `span` read by a pool Worker asked to `check` it, as its answer
/// comes back (`web/pool_worker.js`'s checkAndAnswer, through the same `check_piece`): its
/// SHA-256 and index check where `delivery` lets the Worker check (`Walked`; every other
/// block with `HalfWalked`: a Worker whose wasm did not load), else the block alone.
fn checked_read(span: &[u8], check: PieceCheck, delivery: Delivery, k: usize) -> JsRead {
    let bytes = js_sys::Uint8Array::from(span);
    let can = match delivery {
        Delivery::Walked | Delivery::Refusing | Delivery::Pooled => true,
        Delivery::HalfWalked => k % 2 == 0,
        Delivery::Split(_) => false,
    };
    let checked = can.then(|| {
        let mut found = stem4d::web::check_piece(&bytes, check.index, check.hash);
        if delivery == Delivery::Refusing && k == 1 {
            found.index = Some(Err("a test's verdict".into()));
        }
        found
    });
    JsRead {
        bytes,
        walk: None,
        checked,
    }
}

/// `piece` with its chunks `jobs` walked, as a pool Worker walks a piece and as its answer
/// comes back.
fn walked_read(piece: js_sys::Uint8Array, jobs: &[u32]) -> JsRead {
    let answer = stem4d::web::walk_chunks(piece.clone(), jobs).expect("walk");
    js_sys::Reflect::set(&answer, &"bytes".into(), &piece.buffer()).expect("set");
    let (bytes, walk) = stem4d::web::walked_answer(&answer).expect("an answer");
    JsRead {
        bytes,
        walk: Some(walk),
        checked: None,
    }
}

fn open_pieced(
    files: &[(&str, &[u8])],
    scan: Option<[usize; 2]>,
    delivery: Delivery,
) -> Acquisition {
    open_pieced_with(files, scan, delivery, false)
}

/// [`open_pieced`], with `defer_leaves` as the page's open has it.
fn open_pieced_with(
    files: &[(&str, &[u8])],
    scan: Option<[usize; 2]>,
    delivery: Delivery,
    defer_leaves: bool,
) -> Acquisition {
    let sources: Vec<Arc<dyn ByteSource>> = files
        .iter()
        .map(|(n, b)| {
            Arc::new(PiecedSource {
                mem: MemSource::new(*n, b.to_vec()),
                bytes: b.to_vec(),
                delivery,
                in_flight: ReadsInFlight::default(),
            }) as Arc<dyn ByteSource>
        })
        .collect();
    let opts = OpenOptions {
        scan_shape: scan,
        dataset: None,
    };
    let files = FileSet::new(sources).expect("file set");
    Acquisition::open_with(files, &opts, defer_leaves).expect("fixture opens")
}

fn params(kind: ProductKind) -> ProductParams {
    let mut p = ProductParams::new(kind);
    p.center = Some([5.6, 4.3]);
    p.radius = Some(3.2);
    p.inner = Some(2.0);
    p.outer = Some(5.5);
    p.rect = Some(Region {
        r0: 1,
        r1: 6,
        c0: 2,
        c1: 9,
    });
    p.at = Some([1, 2]);
    p.rotation = 17.0;
    p.flip = true;
    p
}

async fn check_all(acq: &Acquisition, engine: &Engine, label: &str) -> usize {
    check_all_within(acq, engine, label, engine.adapter.limits).await
}

/// [`check_all`] with the acquisition uploaded under `limits`.
async fn check_all_within(
    acq: &Acquisition,
    engine: &Engine,
    label: &str,
    limits: stem4d::upload::plan::DeviceLimits,
) -> usize {
    let mut checked = 0;
    for bin in [1, 2] {
        for masked in [false, true] {
            let corr = stem4d::frames::Correction {
                mask_bad_pixels: masked,
                bin,
            };
            let mut res = engine
                .upload_with_limits(acq, corr, limits)
                .await
                .expect("upload");
            // The hot and dead pixels of the mean pattern are zeroed as the CPU reference
            // leaves them out (with masking on; a no-op otherwise).
            products::settle_bad_pixels(engine, acq, &mut res)
                .await
                .expect("bad pixels settled");
            for kind in [
                ProductKind::Total,
                ProductKind::Bf,
                ProductKind::Adf,
                ProductKind::Df,
                ProductKind::Rect,
                ProductKind::SumDp,
                ProductKind::MaxDp,
                ProductKind::MeanDp,
                ProductKind::Pattern,
                ProductKind::Com,
                ProductKind::Dpc,
                ProductKind::Binned,
            ] {
                let mut p = params(kind);
                if bin > 1 {
                    p.center = Some([2.6, 2.1]);
                    (p.radius, p.inner, p.outer) = (Some(1.6), Some(1.0), Some(2.5));
                    p.rect = Some(Region {
                        r0: 0,
                        r1: 3,
                        c0: 1,
                        c1: 4,
                    });
                }
                let what = format!("{label} {kind:?} bin {bin} masked {masked}");
                let gpu = products::compute_resident(engine, acq, &res, &p)
                    .await
                    .expect(&what);
                let cpu = stem4d::cpu::compute(acq, &p, corr).expect(&what);
                // The one judge of the contract's bounds, as `stem4d parity` and the native
                // parity tests judge.
                let verdict = judge(kind, &gpu, &cpu);
                assert!(verdict.pass(), "{what}: {:?}", verdict.failure);
                checked += 1;
            }
        }
    }
    checked
}

/// The Arina uint16 fixture with its companion.
fn arina_u16() -> Acquisition {
    open(
        &[
            fixture!("arina_u16_master.h5"),
            fixture!("arina_u16_data_000001.h5"),
            fixture!("arina_u16_data_000002.h5"),
            fixture!("arina_u16.h5"),
        ],
        None,
    )
}

/// The LZ4 uint16 stack, 6 × 4.
fn lz4_stack_u16() -> Acquisition {
    open(&[fixture!("lz4_stack_u16.h5")], Some([6, 4]))
}

#[wasm_bindgen_test]
async fn kernels_match_the_cpu_reference_in_the_browser() {
    let mut engine = Engine::new()
        .await
        .expect("a WebGPU adapter (SwiftShader in CI)");
    let (arina, lz4) = (arina_u16(), lz4_stack_u16());
    let u8s = open(
        &[
            fixture!("arina_u8_master.h5"),
            fixture!("arina_u8_data_000001.h5"),
        ],
        Some([4, 6]),
    );
    let mut n = 0;
    // Every way masked sums meet: both ways without subgroups (the engine picks one by
    // adapter), and through subgroups where the browser has them (`web_subgroups`).
    let has_subgroups = engine.subgroups();
    console_log!("masked sums through subgroups too: {has_subgroups}");
    let mut ways = 0;
    for (subgroups, atomics) in [(false, false), (false, true), (true, false)] {
        if subgroups && !has_subgroups {
            continue;
        }
        engine.use_subgroups(subgroups);
        engine.use_atomic_sums(atomics);
        assert_eq!(engine.subgroups(), subgroups);
        n += check_all(&arina, &engine, "arina_u16").await;
        n += check_all(&lz4, &engine, "lz4_stack_u16").await;
        n += check_all(&u8s, &engine, "arina_u8").await;
        ways += 1;
    }
    assert_eq!(n, ways * 3 * 4 * 12);
}

/// The parity matrix (`parity`: what `stem4d parity` and the page's
/// `stem4d.parity()` run) in the browser's WebGPU, with and without bad-pixel masking: no
/// row fails, and each product has a row on the GPU.
#[wasm_bindgen_test]
async fn the_parity_matrix_passes_in_the_browser() {
    use stem4d::parity::{matrix, run, Outcome};
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let (arina, lz4) = (arina_u16(), lz4_stack_u16());
    let mut passed = 0;
    for (label, acq) in [("arina_u16", &arina), ("lz4_stack_u16", &lz4)] {
        for masked in [false, true] {
            let requests = matrix(acq, masked).expect("matrix");
            let rows = run(Some(&engine), "wgpu", acq, &requests).await;
            let failed: Vec<_> = rows.iter().filter(|r| r.failed()).collect();
            assert!(failed.is_empty(), "{label} masked {masked}: {failed:?}");
            let gpu: Vec<_> = rows.iter().filter(|r| r.backend == "wgpu").collect();
            assert_eq!(gpu.len(), requests.len(), "{label}: a GPU row per product");
            passed += gpu.iter().filter(|r| r.outcome == Outcome::Pass).count();
        }
    }
    // Every product of these u16 acquisitions (each kind, and a sum over a scan ROI) is
    // computed on the GPU and passes.
    let per_matrix = ProductKind::ALL.len() + 1;
    assert_eq!(passed, 2 * 2 * per_matrix);
}

#[wasm_bindgen_test]
async fn display_and_synthetic_kernels_run_in_the_browser() {
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let acq = stem4d::formats::synthetic::open([6, 9, 13, 11]).expect("synthetic");
    let res = engine
        .upload(&acq, Default::default())
        .await
        .expect("generated on the GPU");
    let frames = products::frames(&engine, &res, 0, acq.shape.frames())
        .await
        .expect("frames");
    for (i, v) in frames.iter().enumerate() {
        let (f, k) = (i / acq.shape.det_len(), i % acq.shape.det_len());
        assert_eq!(
            *v,
            stem4d::formats::synthetic::sample(acq.shape, f, k) as u32,
            "frame {f} pixel {k}"
        );
    }
    let totals =
        stem4d::kernels::masked_sum::masked_sums(&engine, &res, &(0..143).collect::<Vec<u32>>())
            .await
            .expect("totals");
    let words: Vec<u32> = totals
        .iter()
        .flat_map(|t| [*t as u32, (*t >> 32) as u32])
        .collect();
    let buf = engine.input(&words);
    let plane = Plane::new(&engine, 9, 6);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let src = PlaneSource::U64 {
        buf: &buf,
        stride: 2,
        offset: 0,
        scale: 1.0,
    };
    plane.encode_prep(&engine, &mut enc, src).expect("prep");
    let limits = stem4d::display::Limits::Percentile { lo: 1.0, hi: 99.0 };
    plane
        .encode_stats(&engine, &mut enc, limits, stem4d::display::Scale::Linear)
        .expect("stats");
    engine.queue.submit([enc.finish()]);
    let values = plane.read_values(&engine).await.expect("plane");
    assert_eq!(values, totals.iter().map(|&t| t as f32).collect::<Vec<_>>());
    let stats = plane.read_stats(&engine).await.expect("stats");
    let cpu = stem4d::display::stats(&values, limits, stem4d::display::Scale::Linear);
    assert_eq!(
        (stats.min, stats.max, stats.finite),
        (cpu.min, cpu.max, cpu.finite)
    );
}

/// Every resident sample of `res` equals the CPU decode of `acq` (no correction).
async fn assert_frames_exact(acq: &Acquisition, engine: &Engine, res: &Resident, what: &str) {
    let n = acq.shape.frames();
    let gpu = products::frames(engine, res, 0, n).await.expect(what);
    let block = FrameReader::new(acq)
        .block(0, n, Default::default())
        .expect(what);
    let Samples::Int(cpu) = block.samples else {
        panic!("{what}: integer fixtures decode to integer samples");
    };
    assert!(
        gpu == cpu,
        "{what}: resident frames differ from the CPU decode"
    );
}

/// The browser's own path into the GPU decoder: windows that stay in JS buffers, their
/// headers read across buffer boundaries or walked by the Workers that read them, uploaded
/// through the staging ring (reused for every window) and decoded with reused scratch.
/// Every delivery decodes every sample exactly, in one buffer and split into one tile per
/// buffer; the Workers' delivery, the viewer's own, also gives every product exactly (the
/// products of the other deliveries read the same resident layout, so checking them again
/// would only make this test slower than CI allows).
#[wasm_bindgen_test]
async fn file_api_windows_decode_exactly_in_the_browser() {
    let engine = Engine::new().await.expect("a WebGPU adapter");
    for delivery in [
        Delivery::Split(7),
        Delivery::Split(4097),
        Delivery::Walked,
        Delivery::HalfWalked,
    ] {
        let arina = open_pieced(
            &[
                fixture!("arina_u16_master.h5"),
                fixture!("arina_u16_data_000001.h5"),
                fixture!("arina_u16_data_000002.h5"),
                fixture!("arina_u16.h5"),
            ],
            None,
            delivery,
        );
        let lz4 = open_pieced(&[fixture!("lz4_stack_u16.h5")], Some([6, 4]), delivery);
        for (acq, label) in [(&arina, "arina_u16"), (&lz4, "lz4_stack_u16")] {
            let label = format!("{label} {delivery:?}");
            let res = engine
                .upload(acq, Default::default())
                .await
                .expect("upload");
            assert!(
                res.file_buffer_windows > 0,
                "{label}: windows from JS buffers"
            );
            let (walked, windows) = (res.worker_walked_windows, res.file_buffer_windows);
            let expected = match delivery {
                Delivery::Split(_) => walked == 0,
                Delivery::Walked | Delivery::Refusing | Delivery::Pooled => walked == windows,
                // A window with an unwalked piece is walked by the viewer, whole.
                Delivery::HalfWalked => walked < windows,
            };
            assert!(expected, "{label}: {walked} of {windows} windows walked");
            assert_frames_exact(acq, &engine, &res, &label).await;
            // One tile per buffer: many windows, each through the staging ring in turn.
            let mut limits = engine.adapter.limits;
            limits.max_storage_binding = res.plan.tile_words as u64 * 4;
            let split = engine
                .upload_with_limits(acq, Default::default(), limits)
                .await
                .expect("split upload");
            assert!(
                split.file_buffer_windows >= 3,
                "{label}: {} windows",
                split.file_buffer_windows
            );
            let split_label = format!("{label} split");
            assert_frames_exact(acq, &engine, &split, &split_label).await;
            if delivery == Delivery::Walked {
                assert_eq!(check_all(acq, &engine, &label).await, 4 * 12, "{label}");
                assert_eq!(
                    check_all_within(acq, &engine, &split_label, limits).await,
                    4 * 12,
                    "{split_label}"
                );
            }
        }
    }
    let most = MOST_PIECES.load(std::sync::atomic::Ordering::Relaxed);
    assert!(most >= 4, "a window came in {most} pieces at most");
}

/// A prepared file's blocks read and checked as the page's pool Workers read and check them
/// (decision 0045) upload to the frames its CPU reader gives: every Worker checking, every
/// other one unable to (the viewer's Worker checks those blocks), none (pieces as the File
/// API gives them); a packed index a Worker judged malformed refuses the file by name and
/// block, and the engine opens it again after. The synthetic fixture has 20 blocks of one
/// tile, so that two batches, the second's reads posted ahead, and blocks staged together
/// all run.
#[wasm_bindgen_test]
async fn prepared_blocks_checked_in_the_pool_upload_exactly() {
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let files = [
        fixture!("arina_u16.stem4d"),
        fixture!("synthetic_u16_blocks.stem4d"),
    ];
    for delivery in [
        Delivery::Walked,
        Delivery::HalfWalked,
        Delivery::Split(4097),
    ] {
        for file in files {
            let label = format!("{} {delivery:?}", file.0);
            let acq = open_pieced(&[file], None, delivery);
            let res = engine.upload(&acq, Default::default()).await.expect(&label);
            assert_frames_exact(&acq, &engine, &res, &label).await;
        }
    }
    let blocks = files[1];
    let refused = open_pieced(&[blocks], None, Delivery::Refusing);
    let said = match engine.upload(&refused, Default::default()).await {
        Ok(_) => panic!("a block judged malformed was taken"),
        Err(e) => e.to_string(),
    };
    assert!(
        said.contains(blocks.0) && said.contains("block 1 is malformed: a test's verdict"),
        "{said}"
    );
    // The Workers' check judges a block's index as the viewer's `accept` does.
    let local = open(&[blocks], None);
    let stem4d::formats::PartKind::Tiled(payload) = &local.parts[0].kind else {
        panic!("a prepared acquisition's part is its payload");
    };
    let b = &payload.blocks[0];
    let mut block = blocks.1[b.offset as usize..(b.offset + b.bytes) as usize].to_vec();
    let index = payload.index_check_of(0);
    let worker =
        |block: &[u8]| stem4d::web::check_piece(&js_sys::Uint8Array::from(block), index, true);
    assert_eq!(worker(&block).index, Some(Ok(())));
    // Group 1's data start moved.
    block[8] ^= 1;
    let said = payload.accept("f", 0, &block).map_err(|e| e.to_string());
    match (worker(&block).index, said) {
        (Some(Err(why)), Err(viewer)) => assert!(viewer.contains(&why), "{why} / {viewer}"),
        other => panic!("a moved group passed: {other:?}"),
    }
    let again = open_pieced(&[blocks], None, Delivery::Walked);
    let res = engine
        .upload(&again, Default::default())
        .await
        .expect("the file again");
    assert_frames_exact(&again, &engine, &res, "after a refused block").await;
}

/// A corrupt chunk walked by the Workers that read it fails the load as the viewer's own
/// walk does: the same message, naming the file and the chunk.
#[wasm_bindgen_test]
async fn file_api_walk_failures_name_the_chunk_as_the_viewer_walk_does() {
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let bad = fixture!("bad/bslz4_truncated_chunk", "data.h5");
    let mut messages = Vec::new();
    for delivery in [Delivery::Split(4097), Delivery::Walked] {
        let acq = open_pieced(&[bad], Some([4, 6]), delivery);
        match engine.upload(&acq, Default::default()).await {
            Ok(_) => panic!("a truncated chunk uploaded, {delivery:?}"),
            Err(e) => messages.push(e.to_string()),
        }
    }
    assert_eq!(messages[0], messages[1]);
    assert!(
        messages[0].contains("data.h5") && messages[0].contains("truncated"),
        "{}",
        messages[0]
    );
}

/// Upload `file` as the page does, its open deferring the B-tree leaves to `feed` (made
/// from the open acquisition); every sample must equal the CPU decode of an ordinary open,
/// and the index completes. Returns the resident.
async fn fed_exactly(
    engine: &Engine,
    file: (&str, &[u8]),
    feed: impl Fn(&Acquisition) -> IndexFeed,
    delivery: Delivery,
    label: &str,
) -> Resident {
    let mut acq = open_pieced_with(&[file], None, delivery, true);
    assert!(acq.index_pending(), "{label}");
    let feed = feed(&acq);
    assert!(feed.len() > 1, "{label}: {} batches", feed.len());
    let plan =
        stem4d::upload::plan::ResidentPlan::new(acq.shape, acq.dtype, false, engine.adapter.limits)
            .expect("plan");
    let res = engine
        .upload_fed(&acq, &feed, Default::default(), plan, &mut |_, _| {})
        .await
        .expect("upload")
        .expect("the GPU decoder takes it all");
    acq.finish_index(feed).await.expect("the index completes");
    let eager = open_pieced(&[file], None, Delivery::Walked);
    assert_frames_exact(&eager, engine, &res, label).await;
    res
}

/// The page's load of a B-tree with a level above its leaves: the open leaves them unread,
/// the upload reads them in batches alongside windows the Workers walk, or (frames written
/// one by one) reads batches of them as the spans of their chunks from the File API's
/// buffers, whose pieces go back to the Workers to be walked once the leaves are parsed.
/// Where a span's buffers cut through chunks, or no Worker can walk, the viewer walks.
#[wasm_bindgen_test]
async fn deferred_leaves_upload_exactly_in_the_browser() {
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let k4 = fixture!("index", "btree_k4_bslz4.h5");
    let walked = Delivery::Walked;
    let res = fed_exactly(
        &engine,
        k4,
        |a| IndexFeed::with_batch(a, 3),
        walked,
        "leaves",
    )
    .await;
    assert!(
        res.worker_walked_windows > 0,
        "windows walked by the Workers"
    );
    let stream = fixture!("index", "stream_k32_bslz4.h5");
    let spans = |a: &Acquisition| IndexFeed::with_spans(a, 20_000);
    let res = fed_exactly(&engine, stream, spans, walked, "spans").await;
    assert!(res.leaf_span_windows > 0, "windows read as leaf spans");
    assert!(res.file_buffer_windows >= res.leaf_span_windows);
    // Their pieces, cut at the leaves, hold whole chunks: the Workers walk them all.
    assert_eq!(
        res.worker_walked_windows, res.file_buffer_windows,
        "leaf spans walked by the Workers"
    );
    // Odd-sized buffers put chunks across two of them; a pool that cannot walk sends none.
    for delivery in [Delivery::Split(333), Delivery::HalfWalked] {
        let what = format!("spans, {delivery:?}");
        let res = fed_exactly(&engine, stream, spans, delivery, &what).await;
        assert!(
            res.leaf_span_windows > 0,
            "{what}: windows read as leaf spans"
        );
        let walked = res.worker_walked_windows;
        assert!(
            walked + res.leaf_span_windows <= res.file_buffer_windows,
            "{what}: the viewer walks the spans ({walked} of {} walked)",
            res.file_buffer_windows
        );
    }
}

/// The products `ps` of `acq` under `corr` from its raw resident, as the streamed passes
/// must give them.
async fn residents(
    engine: &Engine,
    acq: &Acquisition,
    ps: &[ProductParams],
    corr: stem4d::frames::Correction,
) -> Vec<stem4d::products::ProductArray> {
    let mut out = Vec::new();
    for p in ps {
        out.push(
            products::compute(engine, acq, p, corr)
                .await
                .expect("resident"),
        );
    }
    out
}

/// Product-first streaming in the browser's WebGPU (decision 0023): every product of the
/// parity matrix (bad-pixel masking on), in one pass over blocks of one scan row, through
/// the GPU decoder and packed on the CPU, is the resident's byte for byte.
#[wasm_bindgen_test]
async fn streamed_products_equal_the_residents_in_the_browser() {
    use stem4d::products::npy::to_bytes;
    use stem4d::products::stream::{compute_streamed, Blocks};
    let engine = Engine::new().await.expect("a WebGPU adapter");
    for (label, acq) in [
        ("arina_u16", arina_u16()),
        ("lz4_stack_u16", lz4_stack_u16()),
    ] {
        let requests = stem4d::parity::matrix(&acq, true).expect("matrix");
        let corr = requests[0].correction;
        let ps: Vec<ProductParams> = requests
            .iter()
            .filter(|r| r.correction == corr)
            .map(|r| r.params.clone())
            .collect();
        let resident = residents(&engine, &acq, &ps, corr).await;
        for gpu_decode in [true, false] {
            let blocks = Blocks {
                rows: 1,
                gpu_decode,
            };
            let out = compute_streamed(&engine, &acq, &ps, corr, blocks, &mut |_, _| {})
                .await
                .expect("streamed");
            assert_eq!(out.len(), ps.len());
            for ((p, r), s) in ps.iter().zip(&resident).zip(&out) {
                assert!(
                    to_bytes(r) == to_bytes(s),
                    "{label} {} (gpu decode {gpu_decode}): streamed differs",
                    p.kind.name()
                );
            }
        }
    }
}

/// A streamed pass reads each block's first windows while the block before it uploads
/// (decision 0046). Through a source that keeps its reads in flight as the page's pool
/// source does, every block after the first takes its first window in flight, no range is
/// read twice in a pass, and every product is the resident's byte for byte.
#[wasm_bindgen_test]
async fn streamed_blocks_take_the_reads_started_ahead() {
    use stem4d::products::npy::to_bytes;
    use stem4d::products::stream::{compute_streamed, Blocks};
    use stem4d::source::in_flight::reads_taken_in_flight;
    let engine = Engine::new().await.expect("a WebGPU adapter");
    let files = [fixture!("lz4_stack_u16.h5")];
    let acq = open_pieced(&files, Some([6, 4]), Delivery::Pooled);
    let ps: Vec<ProductParams> = [ProductKind::Bf, ProductKind::Total, ProductKind::Com]
        .into_iter()
        .map(params)
        .collect();
    let corr = stem4d::frames::Correction::default();
    let resident = residents(&engine, &acq, &ps, corr).await;
    for rows in [1, 2, 4] {
        POOL_POSTS.with(|p| p.borrow_mut().clear());
        let taken = reads_taken_in_flight();
        let blocks = Blocks {
            rows,
            gpu_decode: true,
        };
        let out = compute_streamed(&engine, &acq, &ps, corr, blocks, &mut |_, _| {})
            .await
            .expect("streamed");
        for ((p, r), s) in ps.iter().zip(&resident).zip(&out) {
            assert!(
                to_bytes(r) == to_bytes(s),
                "{} in blocks of {rows} rows: streamed differs",
                p.kind.name()
            );
        }
        let posts = POOL_POSTS.with(|p| p.borrow().clone());
        let mut distinct = posts.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            posts.len(),
            "blocks of {rows} rows: a range read twice: {posts:?}"
        );
        let blocks_read = 6usize.div_ceil(rows);
        let took = reads_taken_in_flight() - taken;
        assert!(
            took as usize >= blocks_read,
            "blocks of {rows} rows: {took} reads taken in flight for {blocks_read} blocks"
        );
    }
}
