//! The CPU reference streams: its peak memory is a few blocks of frames plus the product,
//! not the acquisition. Every allocation of this test binary is counted, and the same
//! products of a synthetic acquisition eight times larger (a longer scan) must peak within
//! the product's growth of the smaller one's. `binned`, whose product is the whole
//! acquisition, streams to its writer the same way (`cpu::write_binned_npy`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use stem4d::frames::Correction;
use stem4d::products::{ProductKind, ProductParams};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// One measurement at a time (tests run on threads of one process).
static ONE: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes allocated at the peak of `f`, above what was allocated before it.
fn peak_of(f: impl FnOnce()) -> usize {
    let before = NOW.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed) - before
}

const BLOCK: usize = 1 << 20;

#[test]
fn the_reference_holds_blocks_not_the_acquisition() {
    let _one = ONE.lock().unwrap();
    // 2 MiB and 16 MiB of uint16 frames (64 × 64 detector): 2 and 16 blocks.
    let small = stem4d::formats::synthetic::open([16, 16, 64, 64]).unwrap();
    let large = stem4d::formats::synthetic::open([128, 16, 64, 64]).unwrap();
    let mut bf = ProductParams::new(ProductKind::Bf);
    (bf.center, bf.radius) = (Some([31.5, 30.0]), Some(12.0));
    for (p, corr) in [
        (bf, Correction::default()),
        (
            ProductParams::new(ProductKind::SumDp),
            Correction::default(),
        ),
        (ProductParams::new(ProductKind::Com), Correction::default()),
        (
            ProductParams::new(ProductKind::Total),
            Correction {
                mask_bad_pixels: true,
                bin: 2,
            },
        ),
    ] {
        let run = |acq| {
            peak_of(|| {
                stem4d::cpu::compute_in_blocks(acq, &p, corr, BLOCK).unwrap();
            })
        };
        let (a, b) = (run(&small), run(&large));
        // The products grow with the scan (at most 16 bytes a position here); the frames
        // held do not: one block decoded and its widened samples.
        let product_growth = (128 - 16) * 16 * 16;
        assert!(
            b <= a + product_growth + (64 << 10),
            "{:?}: peak {a} B on 2 MiB, {b} B on 16 MiB",
            p.kind
        );
        assert!(b < 6 * BLOCK, "{:?}: peak {b} B, blocks of {BLOCK}", p.kind);
    }
}

#[test]
fn binned_streams_to_its_writer() {
    let _one = ONE.lock().unwrap();
    let acq = stem4d::formats::synthetic::open([128, 16, 64, 64]).unwrap();
    let corr = Correction::default();
    let mut written = 0usize;
    struct Count<'a>(&'a mut usize);
    impl std::io::Write for Count<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            *self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let peak = peak_of(|| {
        stem4d::cpu::write_binned_npy(&acq, corr, BLOCK, &mut Count(&mut written), "sink").unwrap();
    });
    // 32 MiB of u32 written; a few blocks held at once.
    assert_eq!(written, 128 + 128 * 16 * 64 * 64 * 4);
    assert!(peak < 8 * BLOCK, "peak {peak} B writing {written} B");
    // The same values as the product held whole.
    let whole = stem4d::cpu::compute(&acq, &ProductParams::new(ProductKind::Binned), corr).unwrap();
    let mut bytes = Vec::new();
    stem4d::cpu::write_binned_npy(&acq, corr, BLOCK, &mut bytes, "vec").unwrap();
    assert_eq!(bytes, stem4d::products::npy::to_bytes(&whole));
}
