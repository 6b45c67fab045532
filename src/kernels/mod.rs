//! The WGSL kernels, embedded from `wgsl/` (the same text on web and native), and the one
//! Rust definition of each uniform struct; `tests/shader_validation.rs` checks both with naga.

pub mod decode;
pub mod fft;

use bytemuck::{Pod, Zeroable};

pub const COMMON: &str = include_str!("../../wgsl/common.wgsl");

/// A compute kernel: its file, entry point and source.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub entry: &'static str,
    pub body: &'static str,
    /// WGSL appended to `body` that needs the `subgroups` extension (empty: none); such a
    /// kernel is built only on adapters that have it.
    pub subgroup_part: &'static str,
}

/// `kernel!(CONST, "name", "entry", BODY)`: one compute entry point of a WGSL module.
macro_rules! kernel {
    ($konst:ident, $name:literal, $entry:literal, $body:expr) => {
        pub const $konst: Kernel = Kernel {
            name: $name,
            entry: $entry,
            body: $body,
            subgroup_part: "",
        };
    };
}

kernel!(
    MASKED_SUM,
    "masked_sum",
    "masked_sum",
    include_str!("../../wgsl/masked_sum.wgsl")
);
kernel!(
    COM_MOMENTS,
    "com_moments",
    "com_moments",
    include_str!("../../wgsl/com_moments.wgsl")
);
kernel!(
    PATTERN_REDUCE,
    "pattern_reduce",
    "pattern_reduce",
    include_str!("../../wgsl/pattern_reduce.wgsl")
);
kernel!(
    DISPLAY_PREP,
    "display_prep",
    "display_prep",
    include_str!("../../wgsl/display_prep.wgsl")
);
const DISPLAY_STATS_BODY: &str = include_str!("../../wgsl/display_stats.wgsl");
kernel!(
    DISPLAY_MINMAX,
    "display_stats",
    "stats_minmax",
    DISPLAY_STATS_BODY
);
kernel!(
    DISPLAY_HIST,
    "display_hist",
    "stats_hist",
    DISPLAY_STATS_BODY
);
kernel!(
    DISPLAY_LIMITS,
    "display_limits",
    "stats_limits",
    DISPLAY_STATS_BODY
);
kernel!(
    TILE_FRAMES,
    "tile_frames",
    "tile_frames",
    include_str!("../../wgsl/tile_frames.wgsl")
);
kernel!(
    SYNTHETIC,
    "synthetic",
    "synthetic",
    include_str!("../../wgsl/synthetic.wgsl")
);
kernel!(
    ZERO_PIXELS,
    "zero_pixels",
    "zero_pixels",
    include_str!("../../wgsl/zero_pixels.wgsl")
);

/// GPU decode of bitshuffle+LZ4 (`src/gpu/decode.rs`): the inflate and the unshuffle + pack,
/// each after the decode kernels' shared parameters and bindings.
const BSLZ4_BODY: &str = concat!(
    include_str!("../../wgsl/decode_common.wgsl"),
    "\n",
    include_str!("../../wgsl/bslz4.wgsl")
);
const UNSHUFFLE_BODY: &str = concat!(
    include_str!("../../wgsl/decode_common.wgsl"),
    "\n",
    include_str!("../../wgsl/unshuffle.wgsl")
);
kernel!(LZ4_PARSE, "bslz4_parse", "lz4_parse", BSLZ4_BODY);
kernel!(LZ4_BLOCKS, "bslz4", "lz4_blocks", BSLZ4_BODY);
kernel!(LZ4_SERIAL, "bslz4_serial", "lz4_serial", BSLZ4_BODY);
kernel!(
    UNSHUFFLE_PACK,
    "unshuffle_pack",
    "unshuffle_pack",
    UNSHUFFLE_BODY
);
kernel!(
    UNSHUFFLE_TILES,
    "unshuffle",
    "unshuffle_tiles",
    UNSHUFFLE_BODY
);

/// The FFT module's entry points (one WGSL file, several pipelines).
const FFT_BODY: &str = include_str!("../../wgsl/fft.wgsl");
kernel!(FFT_PASS, "fft", "fft_pass", FFT_BODY);
kernel!(FFT_CHIRP_IN, "fft_chirp_in", "fft_chirp_in", FFT_BODY);
kernel!(FFT_MUL, "fft_mul", "fft_mul", FFT_BODY);
kernel!(FFT_CHIRP_OUT, "fft_chirp_out", "fft_chirp_out", FFT_BODY);
kernel!(FFT_TRANSPOSE, "fft_transpose", "fft_transpose", FFT_BODY);
kernel!(IDPC_PACK, "idpc_pack", "idpc_pack", FFT_BODY);
kernel!(IDPC_FILTER, "idpc_filter", "idpc_filter", FFT_BODY);
kernel!(IDPC_PACK_COM, "idpc_pack_com", "idpc_pack_com", FFT_BODY);

// The float32 variants of the product kernels (exact 128-bit sums), beside their integer
// entry points.
kernel!(
    RING_SUM,
    "ring_sum",
    "ring_sum",
    include_str!("../../wgsl/ring_sum.wgsl")
);
// The masked sum adding every invocation's lanes into the output atomically, where
// workgroup memory is the slower way to meet (see `Engine::atomic_sums`).
kernel!(
    MASKED_SUM_ATOMIC,
    "masked_sum_atomic",
    "masked_sum_atomic",
    MASKED_SUM.body
);
kernel!(
    MASKED_SUM_F32,
    "masked_sum_f32",
    "masked_sum_f32",
    MASKED_SUM.body
);
kernel!(
    COM_MOMENTS_WIDE,
    "com_moments_wide",
    "com_moments_wide",
    COM_MOMENTS.body
);
kernel!(
    COM_MOMENTS_F32,
    "com_moments_f32",
    "com_moments_f32",
    COM_MOMENTS.body
);
kernel!(
    PATTERN_REDUCE_F32,
    "pattern_reduce_f32",
    "pattern_reduce_f32",
    PATTERN_REDUCE.body
);

pub const ALL: [Kernel; 29] = [
    LZ4_PARSE,
    LZ4_BLOCKS,
    LZ4_SERIAL,
    UNSHUFFLE_PACK,
    UNSHUFFLE_TILES,
    MASKED_SUM,
    COM_MOMENTS,
    PATTERN_REDUCE,
    DISPLAY_PREP,
    DISPLAY_MINMAX,
    DISPLAY_HIST,
    DISPLAY_LIMITS,
    SYNTHETIC,
    ZERO_PIXELS,
    TILE_FRAMES,
    FFT_PASS,
    FFT_CHIRP_IN,
    FFT_MUL,
    FFT_CHIRP_OUT,
    FFT_TRANSPOSE,
    IDPC_PACK,
    IDPC_FILTER,
    IDPC_PACK_COM,
    MASKED_SUM_F32,
    MASKED_SUM_ATOMIC,
    RING_SUM,
    COM_MOMENTS_WIDE,
    COM_MOMENTS_F32,
    PATTERN_REDUCE_F32,
];

/// The masked sum meeting its slots through subgroup operations (`masked_sum.wgsl` plus
/// `masked_sum_subgroup.wgsl`), on adapters with subgroups.
pub const MASKED_SUM_SUBGROUP: Kernel = Kernel {
    name: "masked_sum_subgroup",
    entry: "masked_sum_subgroup",
    body: MASKED_SUM.body,
    subgroup_part: include_str!("../../wgsl/masked_sum_subgroup.wgsl"),
};

/// The kernels built only where the adapter has subgroups.
pub const SUBGROUP_KERNELS: [Kernel; 1] = [MASKED_SUM_SUBGROUP];

/// Every compute kernel: those every adapter builds, then those built only with subgroups.
#[cfg(not(target_arch = "wasm32"))]
pub fn compute_kernels() -> impl Iterator<Item = Kernel> {
    ALL.into_iter().chain(SUBGROUP_KERNELS)
}

/// A WGSL module as naga reads and validates it, and one of its entry points: what
/// [`workgroup_bytes`] and `bench kernel-stats` (`kernel_stats.rs`) look into.
#[cfg(not(target_arch = "wasm32"))]
pub struct EntryModule {
    pub module: naga::Module,
    pub info: naga::valid::ModuleInfo,
    /// The entry point's index in `module.entry_points`.
    pub index: usize,
}

#[cfg(not(target_arch = "wasm32"))]
impl EntryModule {
    pub fn parse(source: &str, entry: &str) -> std::result::Result<EntryModule, String> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .validate(&module)
            .map_err(|e| e.emit_to_string(source))?;
        let index = module
            .entry_points
            .iter()
            .position(|e| e.name == entry)
            .ok_or_else(|| format!("no entry point {entry}"))?;
        Ok(EntryModule {
            module,
            info,
            index,
        })
    }

    /// The module's global variables that the entry point uses.
    pub fn used_globals(&self) -> impl Iterator<Item = &naga::GlobalVariable> {
        let uses = self.info.get_entry_point(self.index);
        self.module
            .global_variables
            .iter()
            .filter(move |(h, _)| !uses[*h].is_empty())
            .map(|(_, g)| g)
    }
}

/// Bytes of workgroup memory the entry point `entry` of the WGSL module `source` uses (naga's
/// layout of the workgroup variables it touches). wgpu does not hold a kernel to the device's
/// limit, and a driver given more than it has can fail at launch rather than at build (a
/// variant 8 bytes over the H200's 48 KiB built there and never finished), so replaced
/// kernels are checked with this before they are built, and the embedded ones against
/// WebGPU's guaranteed 16 KiB in `tests/shader_validation.rs`.
#[cfg(not(target_arch = "wasm32"))]
pub fn workgroup_bytes(source: &str, entry: &str) -> std::result::Result<u32, String> {
    let m = EntryModule::parse(source, entry)?;
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(m.module.to_ctx())
        .map_err(|e| e.to_string())?;
    Ok(m.used_globals()
        .filter(|g| g.space == naga::AddressSpace::WorkGroup)
        .map(|g| layouter[g.ty].size)
        .sum())
}

/// Replacement kernel texts from `dir` for experiments: each `NAME.wgsl` there replaces the
/// kernel NAME (its text after the common prelude: for a subgroup kernel, the whole of it,
/// `masked_sum.wgsl` included; for a decode kernel, `decode_common.wgsl` included). A file
/// that names no kernel is refused by name.
#[cfg(not(target_arch = "wasm32"))]
pub fn overrides_from(dir: &std::path::Path) -> crate::error::Result<Vec<(String, String)>> {
    use crate::error::Error;
    let names: Vec<&str> = compute_kernels().map(|k| k.name).collect();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::param(format!("{}: cannot list the kernels: {e}", dir.display())))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Error::param(format!("{}: {e}", dir.display())))?
            .path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let Some(stem) = name.strip_suffix(".wgsl") else {
            continue;
        };
        if !names.contains(&stem) {
            return Err(Error::param(format!(
                "{}: no kernel is named {stem} (one of: {})",
                path.display(),
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::param(format!("{}: {e}", path.display())))?;
        out.push((stem.to_string(), text));
    }
    out.sort();
    Ok(out)
}

/// The display's render module (vertex `vs_main`, fragment `fs_main`); not a compute kernel.
pub const RENDER: Kernel = Kernel {
    name: "display",
    entry: "fs_main",
    body: include_str!("../../wgsl/display.wgsl"),
    subgroup_part: "",
};

impl Kernel {
    /// Whether the kernel needs the `subgroups` extension.
    pub fn needs_subgroups(&self) -> bool {
        !self.subgroup_part.is_empty()
    }

    /// Full module text: shared helpers, then the kernel. (naga 30 takes subgroup built-ins
    /// under the device's `SUBGROUP` feature and does not parse `enable subgroups;` yet; in
    /// the browser the engine puts that directive before this text, `web_subgroups`.)
    pub fn source(&self) -> String {
        format!("{COMMON}\n{}\n{}", self.body, self.subgroup_part)
    }

    /// The module text the engine builds: a replacement's (after the common prelude) when
    /// `overrides` names this kernel, else the embedded one.
    pub fn source_with(&self, overrides: &[(String, String)]) -> String {
        match overrides.iter().find(|(name, _)| name == self.name) {
            Some((_, body)) => format!("{COMMON}\n{body}"),
            None => self.source(),
        }
    }
}

/// Workgroups per dimension allowed by WebGPU.
pub const MAX_GROUPS: u32 = 65_535;

/// 2-D grid covering `n` workgroups: (x, y) with x ≤ 65,535.
pub fn grid(n: u32) -> (u32, u32) {
    let x = n.clamp(1, MAX_GROUPS);
    (x, n.div_ceil(x).max(1))
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MaskedSumParams {
    pub frames: u32,
    pub tile_words: u32,
    pub bits: u32,
    pub n_idx: u32,
    pub first_frame: u32,
    pub groups_x: u32,
    /// Float32 residents: the power of two all samples are integer multiples of.
    pub lsb: i32,
    /// Workgroups per tile ([`masked_sum_parts`]).
    pub parts: u32,
    /// Positions between neighbouring parts' images (0: one image).
    pub part_stride: u32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RingSumParams {
    pub frames: u32,
    pub rings: u32,
    pub groups_x: u32,
    pub _pad0: u32,
}

/// Workgroups per tile for a mask of `pixels` pixels of `bits`-bit samples: one tile per
/// workgroup leaves a large GPU partly idle (a resident buffer holds a few thousand tiles),
/// so the pixel list is cut into parts of about 48 pixels per invocation (32 a workgroup; on
/// the H200 that is 2 parts for a BF disk of 2,828 pixels, 12 for an annulus of 17,296: BF
/// ran 0.53 ms with one part, 0.51 with two, 0.84–0.89 with three or four).
pub fn masked_sum_parts(pixels: u32, bits: u32) -> u32 {
    pixels
        .div_ceil(32 * 48)
        .clamp(1, 16)
        .max(masked_sum_min_parts(pixels, bits, false))
}

/// The most pixels one part may hold with no u32 lane wrapping: an invocation sums a 32nd
/// of the part, or with `subgroups` a subgroup sums all of it; 32-bit samples carry into
/// a high lane instead.
pub fn masked_sum_part_limit(bits: u32, subgroups: bool) -> u32 {
    let per_lane = if subgroups { 1 } else { 32 };
    match bits {
        32 => u32::MAX,
        b => per_lane * sum_flush(b),
    }
}

/// The fewest even parts within [`masked_sum_part_limit`].
pub fn masked_sum_min_parts(pixels: u32, bits: u32, subgroups: bool) -> u32 {
    pixels
        .div_ceil(masked_sum_part_limit(bits, subgroups))
        .max(1)
}

/// Largest sample count whose u32 sum cannot wrap for `bits`-bit samples.
pub fn sum_flush(bits: u32) -> u32 {
    let vmax = if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    (u32::MAX / vmax).max(1)
}

/// Detector rows per u32 fold of the CoM running sums (`0`: take the 64-bit path per
/// sample): over n rows the running sum of sums reaches n(n − 1)/2 · vmax, kept below 2^32.
pub fn moment_flush(bits: u32, _det: [usize; 2]) -> u32 {
    if bits >= 32 {
        return 0;
    }
    let vmax = (1u64 << bits) - 1;
    let mut n = 1u64;
    while (n + 1) * n / 2 * vmax <= u32::MAX as u64 {
        n += 1;
    }
    n as u32
}

/// Row bands per tile that keep a large GPU busy: about 96 rows each (measured best on the
/// H200), up to 8. Both CoM kernels start from it.
pub fn com_bands(rows: usize) -> u32 {
    rows.div_ceil(96).clamp(1, 8) as u32
}

/// Row bands per tile for the CoM kernel with u32 lanes (`com_moments`), or `None` when
/// even one-row bands could wrap a lane (take `com_moments_wide`): an invocation sums
/// `ceil(cols / slots)` columns over a band, each sample times a row or column index, and
/// every sum must stay below 2^32. Otherwise [`com_bands`], or more bands when the bound
/// needs them.
pub fn com_parts(bits: u32, det: [usize; 2]) -> Option<u32> {
    if bits >= 32 {
        return None;
    }
    let [rows, cols] = [det[0].max(1) as u64, det[1].max(1) as u64];
    let slots = if bits == 8 { 32 } else { 64 };
    let vmax = (1u64 << bits) - 1;
    let per_row = cols.div_ceil(slots) * vmax * (rows.max(cols) - 1).max(1);
    let band = u32::MAX as u64 / per_row;
    if band == 0 {
        return None;
    }
    Some(com_bands(det[0]).max(rows.div_ceil(band) as u32))
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ComParams {
    pub frames: u32,
    pub tile_words: u32,
    pub bits: u32,
    pub det_rows: u32,
    pub det_cols: u32,
    pub first_frame: u32,
    pub groups_x: u32,
    /// Detector rows per u32 fold of the running sums ([`moment_flush`]).
    pub flush: u32,
    /// Float32 residents: the power of two all samples are integer multiples of.
    pub lsb: i32,
    /// Workgroups per tile ([`com_parts`]).
    pub parts: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct PatternParams {
    pub frames: u32,
    pub tile_words: u32,
    pub bits: u32,
    pub det_len: u32,
    pub first_frame: u32,
    /// Tiles per invocation ([`pattern_chunk_tiles`]).
    pub chunk_tiles: u32,
    pub groups_x: u32,
    /// Workgroups (32 pixels each) covering the detector.
    pub pixel_groups: u32,
    /// Float32 residents: the power of two all samples are integer multiples of.
    pub lsb: i32,
    pub _pad1: u32,
    pub _pad2: u32,
    pub _pad3: u32,
}

/// Invocations the pattern reduction aims for (enough to fill a large GPU), when the
/// detector alone gives fewer.
pub const PATTERN_INVOCATIONS: u64 = 1 << 21;

/// Tiles one pattern-reduce invocation walks for `tiles` tiles of `bits`-bit samples and a
/// detector of `det_len` pixels (two invocations each): enough chunks to fill the GPU, and
/// never so many tiles that an invocation's u32 sum (`4 · per_word` samples a tile) could
/// wrap; 32-bit samples carry into a high word.
pub fn pattern_chunk_tiles(tiles: u32, bits: u32, det_len: usize) -> u32 {
    let chunks = PATTERN_INVOCATIONS.div_ceil(det_len.max(1) as u64 * 2);
    let mut len = (tiles as u64).div_ceil(chunks).max(1);
    if bits < 32 {
        let per_vec4 = (128 / bits) as u64;
        len = len.min(u32::MAX as u64 / (per_vec4 * ((1u64 << bits) - 1)));
    }
    len as u32
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct DecodeParams {
    pub blocks: u32,
    pub groups_x: u32,
    pub frames: u32,
    pub first_frame: u32,
    pub seg_first_frame: u32,
    pub tile_words: u32,
    pub bits: u32,
    pub det_len: u32,
    pub elem: u32,
    pub bin: u32,
    pub det_cols: u32,
    pub mask_bad: u32,
    pub src_bytes: u32,
    pub dst_bytes: u32,
    pub out_cols: u32,
    pub det_rows: u32,
    /// Index of the window's first block among all blocks of the upload (failures name it).
    pub block_base: u32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct FftParams {
    pub n: u32,
    pub p: u32,
    pub rows: u32,
    pub inverse: u32,
    pub width: u32,
    pub height: u32,
    pub groups_x: u32,
    pub flip: u32,
    pub scale: f32,
    pub mean_r: f32,
    pub mean_c: f32,
    pub cos_t: f32,
    pub sin_t: f32,
    /// `idpc_pack`: the scan mean's fixed-point reference per axis, `ref / 2^ref_shift`
    /// (`mean_r`/`mean_c` then hold the rest of the mean).
    pub ref_r: u32,
    pub ref_c: u32,
    pub ref_shift: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SynthParams {
    pub frames: u32,
    pub first_frame: u32,
    pub tile_words: u32,
    pub det_rows: u32,
    pub det_cols: u32,
    pub scan_cols: u32,
    pub groups_x: u32,
    pub _pad0: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ZeroParams {
    pub tiles: u32,
    pub tile_words: u32,
    pub pixels: u32,
    pub groups_x: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct TileParams {
    pub frames: u32,
    pub first_tile: u32,
    pub frame_words: u32,
    pub tile_words: u32,
    pub bits: u32,
    pub groups_x: u32,
    pub det_len: u32,
    pub _pad1: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct PrepParams {
    pub n: u32,
    pub source: u32,
    pub stride: u32,
    pub offset: u32,
    pub bits: u32,
    pub groups_x: u32,
    pub flip: u32,
    pub scale: f32,
    pub mean_r: f32,
    pub mean_c: f32,
    pub cos_t: f32,
    pub sin_t: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct StatsParams {
    pub n: u32,
    pub mode: u32,
    pub scale: u32,
    pub _pad0: u32,
    pub p_lo: f32,
    pub p_hi: f32,
    pub abs_lo: f32,
    pub abs_hi: f32,
    pub shown_lo: f32,
    pub shown_hi: f32,
    pub _pad1: u32,
    pub _pad2: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct View {
    pub src_w: u32,
    pub src_h: u32,
    pub canvas_w: u32,
    pub canvas_h: u32,
    pub cmap: u32,
    /// [`crate::display::Scale::code`].
    pub scale: u32,
    pub overlay: u32,
    pub cursor_on: u32,
    pub zoom: f32,
    pub pan_r: f32,
    pub pan_c: f32,
    pub line_px: f32,
    pub o_r: f32,
    pub o_c: f32,
    pub o_inner: f32,
    pub o_outer: f32,
    pub rect_r0: f32,
    pub rect_r1: f32,
    pub rect_c0: f32,
    pub rect_c1: f32,
    pub cursor_r: f32,
    pub cursor_c: f32,
    /// Non-zero: a direction image drawn with the colour wheel.
    pub wheel: u32,
    pub _pad1: f32,
}

/// (WGSL struct name, Rust size, field names in order) for the layout test.
pub fn uniform_layouts() -> Vec<(&'static str, usize, Vec<&'static str>)> {
    vec![
        (
            "RingSumParams",
            std::mem::size_of::<RingSumParams>(),
            vec!["frames", "rings", "groups_x", "_pad0"],
        ),
        (
            "MaskedSumParams",
            std::mem::size_of::<MaskedSumParams>(),
            vec![
                "frames",
                "tile_words",
                "bits",
                "n_idx",
                "first_frame",
                "groups_x",
                "lsb",
                "parts",
                "part_stride",
                "_pad0",
                "_pad1",
                "_pad2",
            ],
        ),
        (
            "ComParams",
            std::mem::size_of::<ComParams>(),
            vec![
                "frames",
                "tile_words",
                "bits",
                "det_rows",
                "det_cols",
                "first_frame",
                "groups_x",
                "flush",
                "lsb",
                "parts",
                "_pad1",
                "_pad2",
            ],
        ),
        (
            "PatternParams",
            std::mem::size_of::<PatternParams>(),
            vec![
                "frames",
                "tile_words",
                "bits",
                "det_len",
                "first_frame",
                "chunk_tiles",
                "groups_x",
                "pixel_groups",
                "lsb",
                "_pad1",
                "_pad2",
                "_pad3",
            ],
        ),
        (
            "DecodeParams",
            std::mem::size_of::<DecodeParams>(),
            vec![
                "blocks",
                "groups_x",
                "frames",
                "first_frame",
                "seg_first_frame",
                "tile_words",
                "bits",
                "det_len",
                "elem",
                "bin",
                "det_cols",
                "mask_bad",
                "src_bytes",
                "dst_bytes",
                "out_cols",
                "det_rows",
                "block_base",
                "_pad0",
                "_pad1",
                "_pad2",
            ],
        ),
        (
            "FftParams",
            std::mem::size_of::<FftParams>(),
            vec![
                "n",
                "p",
                "rows",
                "inverse",
                "width",
                "height",
                "groups_x",
                "flip",
                "scale",
                "mean_r",
                "mean_c",
                "cos_t",
                "sin_t",
                "ref_r",
                "ref_c",
                "ref_shift",
            ],
        ),
        (
            "SynthParams",
            std::mem::size_of::<SynthParams>(),
            vec![
                "frames",
                "first_frame",
                "tile_words",
                "det_rows",
                "det_cols",
                "scan_cols",
                "groups_x",
                "_pad0",
            ],
        ),
        (
            "ZeroParams",
            std::mem::size_of::<ZeroParams>(),
            vec!["tiles", "tile_words", "pixels", "groups_x"],
        ),
        (
            "TileParams",
            std::mem::size_of::<TileParams>(),
            vec![
                "frames",
                "first_tile",
                "frame_words",
                "tile_words",
                "bits",
                "groups_x",
                "det_len",
                "_pad1",
            ],
        ),
        (
            "PrepParams",
            std::mem::size_of::<PrepParams>(),
            vec![
                "n", "source", "stride", "offset", "bits", "groups_x", "flip", "scale", "mean_r",
                "mean_c", "cos_t", "sin_t",
            ],
        ),
        (
            "StatsParams",
            std::mem::size_of::<StatsParams>(),
            vec![
                "n", "mode", "scale", "_pad0", "p_lo", "p_hi", "abs_lo", "abs_hi", "shown_lo",
                "shown_hi", "_pad1", "_pad2",
            ],
        ),
        (
            "View",
            std::mem::size_of::<View>(),
            vec![
                "src_w",
                "src_h",
                "canvas_w",
                "canvas_h",
                "cmap",
                "scale",
                "overlay",
                "cursor_on",
                "zoom",
                "pan_r",
                "pan_c",
                "line_px",
                "o_r",
                "o_c",
                "o_inner",
                "o_outer",
                "rect_r0",
                "rect_r1",
                "rect_c0",
                "rect_c1",
                "cursor_r",
                "cursor_c",
                "wheel",
                "_pad1",
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CoM bands keep every u32 lane below 2^32: 192² u16 needs two bands of 96 rows
    /// (three columns an invocation, row indices to 191), 256² u16 four; a detector whose
    /// single rows could wrap takes the wide kernel.
    #[test]
    fn com_bands_keep_lanes_from_wrapping() {
        let lanes_fit = |bits: u32, det: [usize; 2], parts: u32| {
            let slots = if bits == 8 { 32 } else { 64 };
            let band = det[0].div_ceil(parts as usize) as u64;
            let cpt = det[1].div_ceil(slots) as u64;
            band * cpt * ((1u64 << bits) - 1) * (det[0].max(det[1]) as u64 - 1) <= u32::MAX as u64
        };
        for (bits, det) in [
            (16, [192, 192]),
            (16, [256, 256]),
            (8, [512, 512]),
            (16, [300, 256]),
        ] {
            let parts = com_parts(bits, det).unwrap();
            assert!(lanes_fit(bits, det, parts), "{bits} {det:?} in {parts}");
        }
        assert_eq!(com_parts(16, [192, 192]), Some(2));
        assert_eq!(com_parts(16, [256, 256]), Some(4));
        assert_eq!(com_parts(16, [7, 3000]), None);
        assert_eq!(com_parts(32, [4, 4]), None);
        // n(n − 1)/2 · 65535 < 2^32 for n = 362, not 363.
        assert_eq!(moment_flush(16, [1, 1]), 362);
    }
}
