//! The WGSL kernels, embedded from `wgsl/` (the same text on web and native), and the one
//! Rust definition of each uniform struct; `tests/shader_validation.rs` checks both with naga.

use bytemuck::{Pod, Zeroable};

pub const COMMON: &str = include_str!("../../wgsl/common.wgsl");

/// A compute kernel: its file, entry point and source.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub entry: &'static str,
    pub body: &'static str,
}

pub const MASKED_SUM: Kernel = Kernel {
    name: "masked_sum",
    entry: "masked_sum",
    body: include_str!("../../wgsl/masked_sum.wgsl"),
};
pub const COM_MOMENTS: Kernel = Kernel {
    name: "com_moments",
    entry: "com_moments",
    body: include_str!("../../wgsl/com_moments.wgsl"),
};
pub const PATTERN_REDUCE: Kernel = Kernel {
    name: "pattern_reduce",
    entry: "pattern_reduce",
    body: include_str!("../../wgsl/pattern_reduce.wgsl"),
};

pub const ALL: [Kernel; 3] = [MASKED_SUM, COM_MOMENTS, PATTERN_REDUCE];

impl Kernel {
    /// Full module text: shared helpers then the kernel.
    pub fn source(&self) -> String {
        format!("{COMMON}\n{}", self.body)
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
    pub frame_words: u32,
    pub bits: u32,
    pub n_idx: u32,
    pub first_frame: u32,
    pub groups_x: u32,
    pub _pad0: u32,
    pub _pad1: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ComParams {
    pub frames: u32,
    pub frame_words: u32,
    pub bits: u32,
    pub det_rows: u32,
    pub det_cols: u32,
    pub first_frame: u32,
    pub groups_x: u32,
    pub _pad0: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct PatternParams {
    pub frames: u32,
    pub frame_words: u32,
    pub bits: u32,
    pub det_len: u32,
    pub first_frame: u32,
    pub scan_cols: u32,
    pub roi_r0: u32,
    pub roi_r1: u32,
    pub roi_c0: u32,
    pub roi_c1: u32,
    pub accumulate: u32,
    pub _pad0: u32,
}

/// (WGSL struct name, Rust size, field names in order) for the layout test.
pub fn uniform_layouts() -> Vec<(&'static str, usize, Vec<&'static str>)> {
    vec![
        (
            "MaskedSumParams",
            std::mem::size_of::<MaskedSumParams>(),
            vec![
                "frames",
                "frame_words",
                "bits",
                "n_idx",
                "first_frame",
                "groups_x",
                "_pad0",
                "_pad1",
            ],
        ),
        (
            "ComParams",
            std::mem::size_of::<ComParams>(),
            vec![
                "frames",
                "frame_words",
                "bits",
                "det_rows",
                "det_cols",
                "first_frame",
                "groups_x",
                "_pad0",
            ],
        ),
        (
            "PatternParams",
            std::mem::size_of::<PatternParams>(),
            vec![
                "frames",
                "frame_words",
                "bits",
                "det_len",
                "first_frame",
                "scan_cols",
                "roi_r0",
                "roi_r1",
                "roi_c0",
                "roi_c1",
                "accumulate",
                "_pad0",
            ],
        ),
    ]
}
