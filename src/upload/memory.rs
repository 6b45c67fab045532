//! Memory plans, GPU-free: before anything is allocated, the ways an acquisition can be
//! computed within the adapter's limits and a byte budget, each with the GPU bytes it holds
//! and its predicted peak. The engine takes the fastest exact plan at native sampling that
//! fits; a detector bin is listed, never taken unasked (decision 0023).
//!
//! - **resident**: the whole acquisition on the GPU (`ResidentPlan`); every product reads it.
//! - **compressed**: the whole acquisition on the GPU with each sector of samples cut to the
//!   bit width of its largest (`upload::packed`, decision 0025), built in blocks of scan
//!   rows; products unpack what they read into one scratch block. Its payload is known only
//!   once encoded: the plan fits when a block and the scratch do, and the engine streams
//!   instead when the packed segments pass the budget.
//! - **streaming**: blocks of whole scan rows, each uploaded, reduced and discarded; a
//!   product costs one pass over the files (two with bad-pixel masking, whose mean pattern
//!   comes first), and its results equal the resident's (`products::stream`).
//! - **cpu**: the CPU reference, which streams the frames itself and holds nothing on the GPU.

use serde::Serialize;

use crate::contract::{Dtype, Shape4};
use crate::error::Result;
use crate::upload::plan::{DeviceLimits, ResidentPlan};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanKind {
    Resident,
    Compressed,
    Streaming,
    Cpu,
}

impl PlanKind {
    pub fn name(self) -> &'static str {
        match self {
            PlanKind::Resident => "resident",
            PlanKind::Compressed => "compressed",
            PlanKind::Streaming => "streaming",
            PlanKind::Cpu => "cpu",
        }
    }
}

/// How the CUDA backend holds an acquisition: whole, as frame-major samples, or compressed
/// (decision 0064; float32 stays raw). It takes no budget and does not stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaHeld {
    Raw,
    Compressed,
}

impl CudaHeld {
    /// The backend's name (`parity --backends`, the parity rows).
    pub fn name(self) -> &'static str {
        match self {
            CudaHeld::Raw => "cuda",
            CudaHeld::Compressed => "cuda-compressed",
        }
    }

    /// The CUDA backend of that name, if `name` is one.
    pub fn parse(name: &str) -> Option<CudaHeld> {
        [CudaHeld::Raw, CudaHeld::Compressed]
            .into_iter()
            .find(|h| h.name() == name)
    }

    /// How a budget and a plan asked for (the CLI's `--memory-budget` and `--memory-plan`,
    /// Python's `memory_budget` and `memory_plan`) hold it on CUDA: none or `resident` raw,
    /// `compressed` compressed; `None` for a budget or another plan, which are the wgpu
    /// engine's (the caller refuses them in its own words).
    pub fn for_plan(budget: Option<u64>, plan: Option<PlanKind>) -> Option<CudaHeld> {
        match (budget, plan) {
            (None, None | Some(PlanKind::Resident)) => Some(CudaHeld::Raw),
            (None, Some(PlanKind::Compressed)) => Some(CudaHeld::Compressed),
            _ => None,
        }
    }
}

/// One way to compute an acquisition's products, and what it costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryPlan {
    pub kind: PlanKind,
    /// The detector bin the plan samples at (1: native sampling).
    pub bin: usize,
    /// GPU bytes held while products are computed: the resident, or one streaming block.
    pub payload_bytes: u64,
    /// Predicted peak of GPU memory (payload, upload windows, product buffers).
    pub peak_bytes: u64,
    /// Streaming: scan rows per block and blocks per pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_per_block: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
    /// Whether its uploads go through the GPU decoder (whose windows its peak counts); else
    /// the CPU decodes and packs them.
    pub gpu_decode: bool,
    /// Streaming: bytes kept for the ring sums about the BF centre (part of the peak),
    /// made in one pass after the open so that disks and annuli about the centre need no
    /// further pass (decision 0036).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_sums_bytes: Option<u64>,
    /// Whether it fits the adapter and the budget.
    pub fits: bool,
    /// What it costs, or why it does not fit, in words.
    pub note: String,
}

/// The plans of an acquisition of `shape` (before the bin) and `dtype`, with the correction's
/// `bin`, under `limits` and `budget` (bytes of GPU memory; `None`: the adapter's own), in
/// order of preference: resident, streaming, cpu, then resident with a further detector bin
/// (listed for the user to choose, never chosen by the engine). `largest_chunk` is the
/// largest stored and decoded chunk (`Acquisition::largest_chunk`); `gpu_decode`, whether
/// the resident upload goes through the GPU decoder (whose windows the peak then counts).
pub fn plans(
    shape: Shape4,
    dtype: Dtype,
    bin: usize,
    limits: DeviceLimits,
    budget: Option<u64>,
    largest_chunk: (u64, u64),
    gpu_decode: bool,
) -> Vec<MemoryPlan> {
    let within = |peak: u64| budget.is_none_or(|b| peak <= b);
    let budget_words = |peak: u64| match budget {
        Some(b) if peak > b => format!("; its peak is over the budget of {b} bytes"),
        _ => String::new(),
    };
    let mut out = Vec::new();
    let binned_shape = shape.binned(bin);
    match ResidentPlan::new(binned_shape, dtype, bin > 1, limits) {
        Ok(p) => {
            let p = match gpu_decode {
                true => p.with_largest_chunk(largest_chunk.0, largest_chunk.1),
                false => p.without_gpu_decode(),
            };
            out.push(MemoryPlan {
                kind: PlanKind::Resident,
                bin,
                payload_bytes: p.payload_bytes,
                peak_bytes: p.peak_bytes,
                rows_per_block: None,
                blocks: None,
                gpu_decode,
                fits: within(p.peak_bytes),
                ring_sums_bytes: None,
                note: format!(
                    "the whole acquisition on the GPU: every product reads it{}",
                    budget_words(p.peak_bytes)
                ),
            });
        }
        Err(e) => out.push(unfit(PlanKind::Resident, bin, e.to_string())),
    }
    let decoded = gpu_decode.then_some(largest_chunk);
    let on_gpu = streaming(binned_shape, dtype, bin, limits, budget, decoded, 0);
    let (stream, decoded) = match on_gpu.fits || decoded.is_none() {
        true => (on_gpu, decoded),
        // The GPU decoder's windows alone may pass a small budget: blocks packed on the CPU.
        false => (
            streaming(binned_shape, dtype, bin, limits, budget, None, 0),
            None,
        ),
    };
    out.push(compressed(
        binned_shape,
        dtype,
        bin,
        limits,
        budget,
        &stream,
    ));
    // Room for the ring sums where the budget has it beside a block of one scan row; the
    // compressed plan above builds from the blocks without them.
    let reserve = ring_sums_reserve(binned_shape, dtype, limits);
    let with_rings = (reserve > 0 && stream.fits)
        .then(|| streaming(binned_shape, dtype, bin, limits, budget, decoded, reserve))
        .filter(|p| p.fits);
    out.push(with_rings.unwrap_or(stream));
    out.push(cpu_plan(bin));
    for more in [2, 4] {
        let b = bin * more;
        if shape.det[0] < b || shape.det[1] < b || dtype.is_float() {
            continue;
        }
        if let Ok(p) = ResidentPlan::new(shape.binned(b), dtype, true, limits) {
            // A binned upload is packed on the CPU.
            let p = p.without_gpu_decode();
            out.push(MemoryPlan {
                kind: PlanKind::Resident,
                bin: b,
                payload_bytes: p.payload_bytes,
                peak_bytes: p.peak_bytes,
                rows_per_block: None,
                blocks: None,
                gpu_decode: false,
                fits: within(p.peak_bytes),
                ring_sums_bytes: None,
                note: format!(
                    "resident with a detector bin of {b}: coarser patterns, the user's choice{}",
                    budget_words(p.peak_bytes)
                ),
            });
        }
    }
    out
}

/// The CPU reference, which always fits.
pub fn cpu_plan(bin: usize) -> MemoryPlan {
    MemoryPlan {
        fits: true,
        ..unfit(
            PlanKind::Cpu,
            bin,
            "the CPU reference: frames streamed in blocks, nothing held on the GPU".into(),
        )
    }
}

fn unfit(kind: PlanKind, bin: usize, why: String) -> MemoryPlan {
    MemoryPlan {
        kind,
        bin,
        payload_bytes: 0,
        peak_bytes: 0,
        rows_per_block: None,
        blocks: None,
        gpu_decode: false,
        fits: false,
        note: why,
        ring_sums_bytes: None,
    }
}

/// Bytes a streaming plan keeps for the ring sums about the BF centre of a `shape` (binned)
/// acquisition: 8 per position and ring, the rings of a centre up to an eighth of the
/// detector from its middle (a fit further off goes without; decision 0036). 0 for float32
/// data (its sums are 128-bit, and never cached) and where one binding cannot hold them.
pub fn ring_sums_reserve(shape: Shape4, dtype: Dtype, limits: DeviceLimits) -> u64 {
    let [kr, kc] = shape.det.map(|n| n as f64);
    let off = kr.max(kc) / 8.0;
    let rings = ((kr / 2.0 + off).hypot(kc / 2.0 + off).floor() as u64) + 1;
    let bytes = shape.frames() as u64 * rings * 8;
    match dtype.is_float() || bytes > limits.max_storage_binding {
        true => 0,
        false => bytes,
    }
}

/// The streaming plan: the largest blocks of whole scan rows whose peak fits the budget (the
/// whole scan in one block when it has none), uploaded through the GPU decoder where
/// `decoded` gives the largest chunk (stored, decoded bytes), else packed on the CPU.
fn streaming(
    shape: Shape4,
    dtype: Dtype,
    bin: usize,
    limits: DeviceLimits,
    budget: Option<u64>,
    decoded: Option<(u64, u64)>,
    ring_sums: u64,
) -> MemoryPlan {
    let rows = shape.scan[0];
    let peak_of = |r: usize| {
        block_peak(shape, dtype, bin, limits, r, decoded).map(|p| BlockPeak {
            peak: p.peak + ring_sums,
            ..p
        })
    };
    let gpu_decode = decoded.is_some();
    let one = match peak_of(1) {
        Ok(p) => p,
        Err(e) => return unfit(PlanKind::Streaming, bin, e.to_string()),
    };
    let fits = |r: usize| match (peak_of(r), budget) {
        (Ok(p), Some(b)) => p.peak <= b,
        (Ok(_), None) => true,
        (Err(_), _) => false,
    };
    if !fits(1) {
        return MemoryPlan {
            fits: false,
            rows_per_block: Some(1),
            blocks: Some(rows),
            payload_bytes: one.payload,
            peak_bytes: one.peak,
            gpu_decode,
            note: format!(
                "a block of one scan row needs {} bytes, over the budget",
                one.peak
            ),
            ..unfit(PlanKind::Streaming, bin, String::new())
        };
    }
    // The peak grows with the rows: the largest block that fits, by bisection.
    let (mut lo, mut hi) = (1, rows);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let blocks = rows.div_ceil(lo);
    let peak = peak_of(lo).unwrap_or(one);
    let decoder = match gpu_decode {
        true => "decoded on the GPU",
        false => "decoded and packed on the CPU",
    };
    MemoryPlan {
        kind: PlanKind::Streaming,
        bin,
        payload_bytes: peak.payload,
        peak_bytes: peak.peak,
        rows_per_block: Some(lo),
        blocks: Some(blocks),
        gpu_decode,
        fits: true,
        note: format!(
            "blocks of {lo} scan rows {decoder}, reduced and let go: each product one pass over the files ({blocks} blocks){}",
            match ring_sums {
                0 => String::new(),
                n => format!("; ring sums about the BF centre kept ({n} bytes): disks and annuli about it need no further pass"),
            }
        ),
        ring_sums_bytes: (ring_sums > 0).then_some(ring_sums),
    }
}

/// Most bytes of the raw block a compressed resident is built from, and the share of a
/// budget it may take: larger blocks mean fewer dispatches while it is built.
pub const COMPRESSED_SCRATCH_BYTES: u64 = 1 << 30;
pub const COMPRESSED_SCRATCH_SHARE: u64 = 8;

/// The compressed plan: blocks of whole scan rows, whole tiles each, of at most
/// [`COMPRESSED_SCRATCH_BYTES`] (an eighth of a budget), uploaded as `stream` uploads its
/// blocks, then encoded. Its payload is at most the raw resident's and its index (one byte
/// per 32 of raw) and the small scratch frames are read back through
/// (`upload::packed::kept_scratch_bytes`); it fits when that and one block's upload do.
fn compressed(
    shape: Shape4,
    dtype: Dtype,
    bin: usize,
    limits: DeviceLimits,
    budget: Option<u64>,
    stream: &MemoryPlan,
) -> MemoryPlan {
    if dtype.is_float() {
        return unfit(
            PlanKind::Compressed,
            bin,
            "float32 data is kept raw: a compressed resident holds integer counts".into(),
        );
    }
    let whole = match ResidentPlan::new(shape, dtype, bin > 1, limits) {
        Ok(p) => p,
        Err(e) => return unfit(PlanKind::Compressed, bin, e.to_string()),
    };
    let [rows, cols] = shape.scan;
    let row_bytes = whole.payload_bytes.div_ceil(rows.max(1) as u64).max(1);
    let cap = COMPRESSED_SCRATCH_BYTES
        .min(budget.map_or(u64::MAX, |b| b / COMPRESSED_SCRATCH_SHARE))
        .min(whole.max_binding / 16 * 15);
    let least = crate::upload::packed::block_rows(1, cols, whole.tile as usize);
    let mut block = ((cap / row_bytes) as usize / least * least).max(least);
    if let Some(r) = stream.rows_per_block {
        // No larger than the blocks a streaming pass can upload within the budget.
        block = block.min((r / least * least).max(least));
    }
    let block = block.min(rows.max(1));
    let decoded = stream.gpu_decode;
    let block_bytes = (block as u64 * row_bytes).min(whole.payload_bytes);
    let scratch = crate::upload::packed::kept_scratch_bytes(whole.tile_words, block_bytes);
    let build = stream.peak_bytes.saturating_sub(stream.payload_bytes) + block_bytes;
    let at_most = whole.payload_bytes + whole.payload_bytes / 32 + scratch;
    let fits = stream.fits && budget.is_none_or(|b| build + scratch <= b);
    let blocks = rows.div_ceil(block.max(1));
    MemoryPlan {
        kind: PlanKind::Compressed,
        bin,
        payload_bytes: at_most,
        peak_bytes: at_most + build,
        rows_per_block: Some(block),
        blocks: Some(blocks),
        gpu_decode: decoded,
        fits,
        ring_sums_bytes: None,
        note: match fits {
            true => format!(
                "the whole acquisition on the GPU, each sector of samples cut to its bit width: at most {at_most} bytes (known once encoded), built in {blocks} blocks of {block} scan rows; frames read back pass through a scratch of {scratch} bytes"
            ),
            false => format!(
                "one block of {block} scan rows and the scratch ({} bytes) pass the budget",
                build + scratch
            ),
        },
    }
}

#[derive(Clone, Copy, Debug)]
struct BlockPeak {
    payload: u64,
    peak: u64,
}

/// Predicted GPU peak of a streaming pass with blocks of `rows` scan rows: the block's
/// resident with its upload (the GPU decoder's windows where `decoded` gives the largest
/// chunk, else one CPU staging window), a read-back of it (`binned`), the block's product
/// buffers, and the whole scan's moments and iDPC planes the pass ends with.
fn block_peak(
    shape: Shape4,
    dtype: Dtype,
    bin: usize,
    limits: DeviceLimits,
    rows: usize,
    decoded: Option<(u64, u64)>,
) -> Result<BlockPeak> {
    let block = Shape4 {
        scan: [rows.min(shape.scan[0]), shape.scan[1]],
        det: shape.det,
    };
    let plan = ResidentPlan::new(block, dtype, bin > 1, limits)?;
    let plan = match decoded {
        Some((stored, logical)) => plan.with_largest_chunk(stored, logical),
        None => plan.without_gpu_decode(),
    };
    let scan_outputs = shape.frames() as u64 * (24 + 64);
    Ok(BlockPeak {
        payload: plan.payload_bytes,
        peak: plan.peak_bytes + plan.payload_bytes + scan_outputs,
    })
}

/// The plan the engine takes: the first that fits at the sampling asked for (resident,
/// streaming, then the CPU reference, which always fits).
pub fn choose(plans: &[MemoryPlan], bin: usize) -> MemoryPlan {
    plans
        .iter()
        .find(|p| p.fits && p.bin == bin)
        .cloned()
        .unwrap_or_else(|| cpu_plan(bin))
}

/// The plan of kind `kind` at `bin` the user picked (`--memory-plan`, `memoryPlan`), if it
/// fits; else why not.
pub fn pick(
    plans: &[MemoryPlan],
    kind: PlanKind,
    bin: usize,
) -> std::result::Result<MemoryPlan, String> {
    let plan = plans
        .iter()
        .find(|p| p.kind == kind && p.bin == bin)
        .cloned()
        .unwrap_or_else(|| cpu_plan(bin));
    match plan.kind == kind && plan.fits {
        true => Ok(plan),
        false => Err(format!(
            "the {} memory plan does not fit: {}",
            kind.name(),
            plan.note
        )),
    }
}

/// A plan's name ([`PlanKind::name`]) as the CLI takes it.
pub fn parse_plan(text: &str) -> std::result::Result<PlanKind, String> {
    let kinds = [
        PlanKind::Resident,
        PlanKind::Compressed,
        PlanKind::Streaming,
        PlanKind::Cpu,
    ];
    let text = text.trim();
    kinds.into_iter().find(|k| k.name() == text).ok_or_else(|| {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        format!("'{text}' is not a memory plan ({})", names.join(", "))
    })
}

/// A budget in bytes as the CLI and the page give it: a plain integer, or with a binary
/// suffix (`256KiB`, `8GiB`) or a decimal one (`2GB`).
pub fn parse_budget(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "'{text}': unknown unit '{other}' (bytes, KiB, MiB, GiB, KB, MB, GB)"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a number of bytes"))?;
    match n.checked_mul(scale) {
        Some(0) => Err(format!("'{text}': a budget of 0 bytes holds nothing")),
        Some(b) => Ok(b),
        None => Err(format!("'{text}' is more bytes than 64 bits count")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DeviceLimits {
        DeviceLimits {
            max_buffer_size: 1 << 30,
            max_storage_binding: 1 << 30,
        }
    }

    fn shape(r: usize, c: usize, kr: usize, kc: usize) -> Shape4 {
        Shape4 {
            scan: [r, c],
            det: [kr, kc],
        }
    }

    #[test]
    fn without_a_budget_the_resident_is_taken() {
        let s = shape(5, 7, 13, 11);
        let all = plans(s, Dtype::U16, 1, limits(), None, (0, 0), false);
        let p = choose(&all, 1);
        assert_eq!(p.kind, PlanKind::Resident);
        assert!(all.iter().all(|p| p.fits));
    }

    #[test]
    fn a_small_budget_streams_in_the_largest_blocks_that_fit() {
        let s = shape(40, 33, 13, 11);
        let budget = 256 << 10;
        let all = plans(s, Dtype::U16, 1, limits(), Some(budget), (0, 0), false);
        let p = choose(&all, 1);
        assert_eq!(p.kind, PlanKind::Streaming, "{all:#?}");
        let rows = p.rows_per_block.unwrap();
        assert!(p.peak_bytes <= budget);
        assert!(rows < 40);
        let next = block_peak(s, Dtype::U16, 1, limits(), rows + 1, None).unwrap();
        assert!(next.peak > budget, "{rows} rows is not the largest block");
        assert_eq!(p.blocks, Some(40usize.div_ceil(rows)));
    }

    #[test]
    fn blocks_are_decoded_on_the_gpu_where_its_windows_fit() {
        let s = shape(512, 512, 192, 192);
        let chunk = (30_000, 73_728);
        let streaming = |all: &[MemoryPlan]| {
            all.iter()
                .find(|p| p.kind == PlanKind::Streaming)
                .cloned()
                .unwrap()
        };
        let big = plans(s, Dtype::U16, 1, limits(), Some(8 << 30), chunk, true);
        let p = streaming(&big);
        assert!(p.fits && p.gpu_decode, "{p:?}");
        assert!(p.peak_bytes <= 8 << 30);
        // The engine takes the compressed resident first, built from such blocks.
        let c = choose(&big, 1);
        assert!(c.kind == PlanKind::Compressed && c.gpu_decode, "{c:?}");
        // 256 MiB: no room for the decoder's windows, so blocks are packed on the CPU.
        let small = plans(s, Dtype::U16, 1, limits(), Some(256 << 20), chunk, true);
        let p = streaming(&small);
        assert!(p.fits && !p.gpu_decode, "{p:?}");
    }

    #[test]
    fn compressed_blocks_are_whole_tiles_within_an_eighth_of_the_budget() {
        let s = shape(512, 512, 192, 192);
        let budget = 8u64 << 30;
        let all = plans(
            s,
            Dtype::U16,
            1,
            limits(),
            Some(budget),
            (30_000, 73_728),
            true,
        );
        let c = all.iter().find(|p| p.kind == PlanKind::Compressed).unwrap();
        let rows = c.rows_per_block.unwrap();
        let row_bytes = 512 / 16 * 192 * 192 * 32;
        assert!(c.fits, "{c:?}");
        assert_eq!(rows * 512 % 16, 0);
        assert!(rows as u64 * row_bytes <= budget / COMPRESSED_SCRATCH_SHARE);
        assert!(rows as u64 * row_bytes <= COMPRESSED_SCRATCH_BYTES);
        assert_eq!(c.blocks, Some(512usize.div_ceil(rows)));
        // The payload is an upper bound: the raw resident and its index.
        assert!(c.payload_bytes > 512 * 512 * 192 * 192 * 2, "{c:?}");
        // Float32 is kept raw, by name; 7 scan columns need blocks of 16 rows (u16 tiles).
        let f = plans(s, Dtype::F32, 1, limits(), None, (0, 0), false);
        let c = f.iter().find(|p| p.kind == PlanKind::Compressed).unwrap();
        assert!(!c.fits && c.note.contains("kept raw"), "{c:?}");
        let odd = plans(
            shape(40, 7, 13, 11),
            Dtype::U16,
            1,
            limits(),
            None,
            (0, 0),
            false,
        );
        let c = choose(&odd, 1);
        assert_eq!(c.kind, PlanKind::Resident);
        let c = odd.iter().find(|p| p.kind == PlanKind::Compressed).unwrap();
        assert_eq!(c.rows_per_block.unwrap() % 16, 0, "{c:?}");
    }

    #[test]
    fn a_budget_no_block_fits_leaves_the_cpu_reference() {
        // One tile of a 128×128 float32 detector is 512 KiB.
        let s = shape(3, 4, 128, 128);
        let all = plans(s, Dtype::F32, 1, limits(), Some(256 << 10), (0, 0), false);
        let p = choose(&all, 1);
        assert_eq!(p.kind, PlanKind::Cpu, "{all:#?}");
        assert!(
            !all[2].fits && all[2].note.contains("one scan row"),
            "{all:#?}"
        );
    }

    #[test]
    fn binned_plans_are_listed_and_never_chosen() {
        let s = shape(64, 64, 96, 96);
        let all = plans(s, Dtype::U16, 1, limits(), Some(4 << 20), (0, 0), false);
        assert!(all
            .iter()
            .any(|p| p.bin == 2 && p.kind == PlanKind::Resident));
        assert_eq!(choose(&all, 1).bin, 1);
    }

    #[test]
    fn budgets_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_budget("262144"), Ok(262144));
        assert_eq!(parse_budget("256KiB"), Ok(262144));
        assert_eq!(parse_budget("8GiB"), Ok(8 << 30));
        assert_eq!(parse_budget("2GB"), Ok(2_000_000_000));
        assert!(parse_budget("0").is_err());
        assert!(parse_budget("lots").is_err());
        assert!(parse_budget("2TB").is_err());
        assert!(parse_budget("99999999999GiB").is_err());
    }
}
