//! The WGSL kernels, embedded from `wgsl/` (the same text on web and native), and the one
//! Rust definition of each uniform struct; `tests/shader_validation.rs` checks both with naga.

pub mod com_moments;
pub mod decode;
pub mod display;
pub mod dpc_curl;
pub mod fft;
pub mod masked_sum;
pub mod packed;
pub mod pattern_reduce;
#[cfg(not(target_arch = "wasm32"))]
pub mod reflect;
pub mod ring_sum;
pub mod sha256;
pub mod synthetic;
pub mod tile_frames;
pub mod zero_pixels;

pub use com_moments::{com_bands, com_parts, com_parts_rows, moment_flush, ComParams};
pub use decode::DecodeParams;
pub use display::{PrepParams, StatsParams, View};
pub use dpc_curl::CurlParams;
pub use fft::FftParams;
pub use masked_sum::{
    masked_sum_min_parts, masked_sum_part_limit, masked_sum_parts, sum_flush, MaskedSumParams,
};
pub use packed::PackedParams;
pub use pattern_reduce::{pattern_chunk_tiles, PatternParams, PATTERN_INVOCATIONS};
#[cfg(not(target_arch = "wasm32"))]
pub use reflect::{overrides_from, workgroup_bytes, EntryModule};
pub use ring_sum::RingSumParams;
pub use sha256::HashParams;
pub use synthetic::SynthParams;
pub use tile_frames::TileParams;
pub use zero_pixels::{SentinelParams, ZeroParams};

pub const COMMON: &str = include_str!("../../wgsl/common.wgsl");

/// A compute kernel: its name (its entry point's), file and source.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    /// The entry point: the kernel's name (kept apart for the render module's).
    pub entry: &'static str,
    /// The file under `wgsl/` that holds the entry point.
    pub file: &'static str,
    pub body: &'static str,
    /// WGSL appended to `body` that needs the `subgroups` extension (empty: none); such a
    /// kernel is built only on adapters that have it.
    pub subgroup_part: &'static str,
}

/// A uniform struct's layout as Rust lays it out: what the WGSL struct of the same name must
/// match, field for field.
#[derive(Clone, Copy, Debug)]
pub struct UniformLayout {
    pub name: &'static str,
    pub size: usize,
    /// (field name, byte offset), in declaration order.
    pub fields: &'static [(&'static str, usize)],
}

/// A `#[repr(C)]` uniform struct, declared once in Rust beside its kernel: `uniform!` adds
/// the representation and its [`UniformLayout`] (`LAYOUT`), taken from the declaration itself.
macro_rules! uniform {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty,)* }

        impl $name {
            pub const LAYOUT: $crate::kernels::UniformLayout = $crate::kernels::UniformLayout {
                name: stringify!($name),
                size: std::mem::size_of::<$name>(),
                fields: &[$((stringify!($field), std::mem::offset_of!($name, $field)),)*],
            };
        }
    };
}
pub(crate) use uniform;

// `ALL`, `SUBGROUP_KERNELS` and one constant per kernel (`MASKED_SUM`, `BSLZ4`, …), made by
// build.rs from the `@compute` entry points of `wgsl/`.
include!(concat!(env!("OUT_DIR"), "/kernel_registry.rs"));

/// Every compute kernel: those every adapter builds, then those built only with subgroups.
#[cfg(not(target_arch = "wasm32"))]
pub fn compute_kernels() -> impl Iterator<Item = Kernel> {
    ALL.into_iter().chain(SUBGROUP_KERNELS)
}

/// The display's render module (vertex `vs_main`, fragment `fs_main`); not a compute kernel.
pub const RENDER: Kernel = Kernel {
    name: "display",
    entry: "fs_main",
    file: "display.wgsl",
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

/// Every uniform struct the kernels read, as [`uniform!`] laid it out: the layout test
/// (`tests/shader_validation.rs`) finds each in the WGSL by name and compares size, field
/// names and offsets with naga's.
pub const UNIFORMS: [UniformLayout; 16] = [
    CurlParams::LAYOUT,
    MaskedSumParams::LAYOUT,
    PackedParams::LAYOUT,
    RingSumParams::LAYOUT,
    ComParams::LAYOUT,
    PatternParams::LAYOUT,
    DecodeParams::LAYOUT,
    FftParams::LAYOUT,
    SynthParams::LAYOUT,
    ZeroParams::LAYOUT,
    SentinelParams::LAYOUT,
    TileParams::LAYOUT,
    PrepParams::LAYOUT,
    StatsParams::LAYOUT,
    View::LAYOUT,
    HashParams::LAYOUT,
];

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
        // The row walk deals a band's (row, group of 8) items to the slots in turn.
        let rows_fit = |bits: u32, det: [usize; 2], parts: u32| {
            let slots = if bits == 8 { 32 } else { 64 };
            let band = det[0].div_ceil(parts as usize) as u64;
            let items = (band * det[1].div_ceil(8) as u64).div_ceil(slots);
            items * 8 * ((1u64 << bits) - 1) * (det[0].max(det[1]) as u64 - 1) <= u32::MAX as u64
        };
        for (bits, det) in [
            (16, [192, 192]),
            (16, [256, 256]),
            (8, [512, 512]),
            (16, [300, 248]),
        ] {
            let parts = com_parts_rows(bits, det).unwrap();
            assert!(rows_fit(bits, det, parts), "{bits} {det:?} in {parts}");
            assert!(parts == 1 || !rows_fit(bits, det, parts - 1) || parts == com_bands(det[0]));
        }
        assert_eq!(com_parts_rows(16, [192, 192]), Some(2));
        assert_eq!(com_parts_rows(16, [8, 4096]), None);
        // n(n − 1)/2 · 65535 < 2^32 for n = 362, not 363.
        assert_eq!(moment_flush(16, [1, 1]), 362);
    }
}
